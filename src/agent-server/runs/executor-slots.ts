// The executor threads of ThreadExecutor (thread-executor.ts) one by one: the messages between the engine's thread
// and an executor thread (executor-worker.ts), a thread's start (from the bundle's entry or the sources', with the
// process's profiler flags) with its messages and exit wired to the executor, and its two ends: released when idle
// (closed, then terminated) and closed when the server stops.
import { join } from 'node:path';
import { pathToFileURL } from 'node:url';
import { Worker } from 'node:worker_threads';
import { packagePath } from '../../lib/package-root.ts';
import { bundleDir } from '../../lib/typescript-imports.ts';
import type { Logger } from '../../lib/logger.ts';
import type { PlatformWorkerEnv } from '../platform/index.ts';
import { WriteLock } from '../storage/embedded/write-lock.ts';
import type { CheckpointerSource } from '../storage/types.ts';
import type { ExecRequest, ExecResult } from './executor.ts';

export interface WorkerInit {
  index: number;
  configPath: string;
  source: CheckpointerSource;
  poolSize: number;
  /** The platform environment graph code gets (logger level, loopback URL, internal-call token). */
  platform?: PlatformWorkerEnv;
}

/** Options of ThreadExecutor.start; `platform` is read when a thread starts (the URL is known once listening). */
export type ThreadExecutorInit = Omit<WorkerInit, 'index' | 'platform'> & {
  platform?: () => PlatformWorkerEnv;
  /** Each thread's V8 young generation in MiB (--executor-young-mb); 0 or absent: V8's own. */
  youngMb?: number;
  /**
   * Threads end after this long without a run (--executor-idle-secs), giving their heaps back; the next run starts
   * them again (executing inline meanwhile). 0 or absent: they stay.
   */
  idleReleaseMs?: number;
};

export type ToWorker =
  /** `forget`: runs to forget first (ThreadExecutor.forget's, carried by the next message instead of one each). */
  | { type: 'execute'; req: ExecRequest; forget?: string[] }
  | { type: 'abort'; runId: string; reason: string }
  | { type: 'discard'; runId: string }
  | { type: 'settle'; runId: string; seq: number }
  | { type: 'forget'; runIds: string[] }
  | { type: 'close' };

export type FromWorker =
  | { type: 'ready' }
  | { type: 'failed'; message: string }
  | { type: 'event'; runId: string; event: string; json: string }
  | { type: 'result'; runId: string; result: ExecResult }
  | { type: 'settled'; seq: number }
  | { type: 'closed' }
  /** Messages of one event-loop turn of the thread, in order. */
  | { type: 'batch'; items: FromWorker[] };

export interface Slot {
  index: number;
  worker: Worker;
  running: number;
  ready: boolean;
  exited: boolean;
  /** Could not start at all: not replaced (it would fail again). */
  failed?: boolean;
  /** Ended for being idle: not replaced; the next run starts a new one. */
  released?: boolean;
  started: Promise<void>;
  /** Runs forgotten since the last message to the thread: they go with the next one (or after FORGET_AFTER_MS). */
  forgotten: string[];
  forgetTimer?: NodeJS.Timeout;
}

/**
 * From the bundle, the thread runs the bundle's entry: our modules then load without tsx's hooks, which every module
 * loaded through them pays for (tsx is registered in the thread only for the users' graphs). From the sources, the
 * .mjs entry registers tsx and loads the TypeScript.
 */
function entry(): URL {
  const bundle = bundleDir();
  return pathToFileURL(
    bundle ? join(bundle, 'executor-worker.js') : packagePath('src/agent-server/runs/executor-worker.mjs'),
  );
}

/** A server started with --cpu-prof (bench/agent-server.ts --profile) profiles its executor threads too. */
function profilerArgs(): string[] {
  return process.execArgv.filter((a) => /^--cpu-prof(?:$|-dir=|-interval=)/.test(a));
}

/** What the executor is told of a thread it started: each message but ready/failed, and its exit. */
export interface SlotEvents {
  message(slot: Slot, m: FromWorker): void;
  exit(slot: Slot, code: number): void;
}

/** Starts executor thread `index`; `on` hears its messages (once it is ready) and its exit. */
export function spawnSlot(index: number, init: ThreadExecutorInit, logger: Logger, on: SlotEvents): Slot {
  // No inherited preloads (--import): they are meant for the process (e.g. the local runtime's parent watch,
  // which exits when stdin ends, and a worker's stdin is always at its end); the thread registers tsx itself.
  const { platform, youngMb, ...rest } = init;
  const workerData: WorkerInit = { ...rest, index, ...(platform ? { platform: platform() } : {}) };
  const worker = new Worker(entry(), {
    workerData,
    execArgv: profilerArgs(),
    ...(youngMb ? { resourceLimits: { maxYoungGenerationSizeMb: youngMb } } : {}),
  });
  let started!: () => void;
  const slot: Slot = {
    index,
    worker,
    running: 0,
    ready: false,
    exited: false,
    started: new Promise<void>((r) => (started = r)),
    forgotten: [],
  };
  worker.on('message', (m: FromWorker) => {
    if (m.type === 'ready') {
      slot.ready = true;
      started();
      // The heap sizes the thread's isolate got (--executor-young-mb), as V8 reports them.
      const limits = worker.resourceLimits;
      logger.debug(
        {
          executor_thread: index,
          young_generation_mb: limits?.maxYoungGenerationSizeMb,
          old_generation_mb: limits?.maxOldGenerationSizeMb,
        },
        'executor thread ready',
      );
    } else if (m.type === 'failed') {
      // It could not load the graphs or open the checkpointer: runs stay on the inline executor.
      logger.error({ executor_thread: index, reason: m.message }, 'executor thread could not start');
      slot.failed = true;
      started();
      void worker.terminate();
    } else on.message(slot, m);
  });
  worker.on('error', (err) => logger.error({ err, executor_thread: index }, 'executor thread failed'));
  const workerThreadId = worker.threadId;
  worker.on('exit', (code) => {
    // Ended inside a write transaction (terminated, or out of memory): the file's lock must not stay with it.
    if (init.source.kind === 'embedded' && init.source.writeLock) {
      WriteLock.releaseHeldBy(init.source.writeLock, workerThreadId);
    }
    slot.exited = true;
    clearTimeout(slot.forgetTimer);
    slot.forgotten = [];
    started();
    on.exit(slot, code);
  });
  return slot;
}

/** Ends an idle thread: told to close (its checkpointer connection ends), then terminated, or at once while loading. */
export function releaseSlot(slot: Slot, post: (slot: Slot, m: ToWorker) => void): void {
  slot.released = true;
  if (slot.ready) post(slot, { type: 'close' });
  // Closed (its checkpointer connection ended), then the isolate goes, or at once while it still loads.
  const grace = slot.ready ? 5_000 : 0;
  const timer = setTimeout(() => void slot.worker.terminate(), grace);
  timer.unref();
  slot.worker.on('message', (m: FromWorker) => m.type === 'closed' && void slot.worker.terminate());
}

/** Closes a thread as the server stops: its runs finish and its connection closes (5 s at most), then it ends. */
export async function closeSlot(slot: Slot, post: (slot: Slot, m: ToWorker) => void): Promise<void> {
  if (slot.exited) return;
  if (slot.released) {
    await slot.worker.terminate();
    return;
  }
  // Still loading the graphs: nothing to finish or close there (a server stopped right after its start,
  // like the local runtime's preflight, must not wait for the load).
  if (!slot.ready) {
    await slot.worker.terminate();
    return;
  }
  const exited = new Promise<void>((r) => slot.worker.once('exit', () => r()));
  const closed = new Promise<void>((r) => slot.worker.on('message', (m: FromWorker) => m.type === 'closed' && r()));
  post(slot, { type: 'close' });
  let timer: NodeJS.Timeout | undefined;
  await Promise.race([closed, exited, new Promise((r) => (timer = setTimeout(r, 5_000)))]);
  clearTimeout(timer);
  await slot.worker.terminate();
}

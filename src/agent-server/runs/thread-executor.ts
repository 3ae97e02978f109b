// Runs graphs on worker threads so that graph execution (LangGraph, serialization, checkpoint writes) uses other
// cores than the thread answering HTTP and keeping the books. Each thread loads the graphs and opens its own
// checkpointer connection (executor-worker.ts); a run goes to the thread with the fewest runs. Events and
// outcomes come back as plain JSON, which is what the API sends anyway.
import { Worker } from 'node:worker_threads';
import type { Logger } from '../../lib/logger.ts';
import type { CheckpointerSource } from '../storage/types.ts';
import type { ExecRequest, ExecResult, RunExecutor } from './executor.ts';

export interface WorkerInit {
  index: number;
  configPath: string;
  source: CheckpointerSource;
  poolSize: number;
}

export type ToWorker =
  | { type: 'execute'; req: ExecRequest }
  | { type: 'abort'; runId: string; reason: string }
  | { type: 'discard'; runId: string }
  | { type: 'settle'; runId: string; seq: number }
  | { type: 'forget'; runId: string }
  | { type: 'close' };

export type FromWorker =
  | { type: 'ready' }
  | { type: 'failed'; message: string }
  | { type: 'event'; runId: string; event: string; data: unknown }
  | { type: 'result'; runId: string; result: ExecResult }
  | { type: 'settled'; seq: number }
  | { type: 'closed' };

interface Slot {
  index: number;
  worker: Worker;
  running: number;
  exited: boolean;
}

interface Pending {
  slot: Slot;
  onEvent: (event: string, data: unknown) => void;
  resolve: (r: ExecResult) => void;
  done: boolean;
}

const ENTRY = new URL('./executor-worker.mjs', import.meta.url);

export class ThreadExecutor implements RunExecutor {
  private readonly slots: Slot[] = [];
  /** By run id, from execute until forget (rollback may still need the run's thread after the result). */
  private readonly runs = new Map<string, Pending>();
  private readonly settles = new Map<number, () => void>();
  private seq = 0;
  private closing = false;

  private constructor(
    private readonly init: Omit<WorkerInit, 'index'>,
    private readonly logger: Logger,
  ) {}

  /** Starts `threads` executor threads; rejects when one cannot load the graphs or open the checkpointer. */
  static async start(threads: number, init: Omit<WorkerInit, 'index'>, logger: Logger): Promise<ThreadExecutor> {
    const ex = new ThreadExecutor(init, logger);
    try {
      await Promise.all(Array.from({ length: threads }, (_, i) => ex.spawn(i)));
    } catch (err) {
      await ex.close();
      throw err;
    }
    return ex;
  }

  private spawn(index: number): Promise<void> {
    // No inherited preloads (--import): they are meant for the process (e.g. the local runtime's parent watch,
    // which exits when stdin ends, and a worker's stdin is always at its end); the entry registers tsx itself.
    const worker = new Worker(ENTRY, { workerData: { ...this.init, index } satisfies WorkerInit, execArgv: [] });
    const slot: Slot = { index, worker, running: 0, exited: false };
    this.slots[index] = slot;
    return new Promise<void>((resolve, reject) => {
      let ready = false;
      worker.on('message', (m: FromWorker) => {
        if (m.type === 'ready') {
          ready = true;
          resolve();
        } else if (m.type === 'failed') reject(new Error(`executor thread ${index}: ${m.message}`));
        else this.onMessage(slot, m);
      });
      worker.on('error', (err) => {
        if (!ready) reject(err);
        else this.logger.error({ err, executor_thread: index }, 'executor thread failed');
      });
      worker.on('exit', (code) => {
        slot.exited = true;
        if (!ready) reject(new Error(`executor thread ${index} exited (code ${code}) before it was ready`));
        this.onExit(slot, code);
      });
    });
  }

  private onMessage(slot: Slot, m: FromWorker): void {
    if (m.type === 'event') {
      const p = this.runs.get(m.runId);
      if (p && !p.done) p.onEvent(m.event, m.data);
    } else if (m.type === 'result') {
      const p = this.runs.get(m.runId);
      if (p && !p.done) {
        p.done = true;
        slot.running--;
        p.resolve(m.result);
      }
    } else if (m.type === 'settled') {
      this.settles.get(m.seq)?.();
      this.settles.delete(m.seq);
    }
  }

  /** A thread that dies ends its runs in error (never silently lost) and is replaced. */
  private onExit(slot: Slot, code: number): void {
    for (const [runId, p] of this.runs) {
      if (p.slot !== slot) continue;
      if (!p.done) {
        p.done = true;
        p.resolve({ ok: false, error: { name: 'ExecutorThreadExited', message: `executor thread exited (code ${code})` } });
      }
      this.runs.delete(runId);
    }
    for (const [seq, resolve] of this.settles) {
      resolve();
      this.settles.delete(seq);
    }
    if (this.closing) return;
    this.logger.error({ executor_thread: slot.index, code }, 'executor thread exited; starting a new one');
    this.spawn(slot.index).catch((err: unknown) => this.logger.error({ err }, 'could not restart an executor thread'));
  }

  execute(req: ExecRequest, onEvent: (event: string, data: unknown) => void, signal: AbortSignal): Promise<ExecResult> {
    const live = this.slots.filter((s) => !s.exited);
    if (!live.length) {
      return Promise.resolve({ ok: false, error: { name: 'ExecutorUnavailable', message: 'no executor thread is running' } });
    }
    const slot = live.reduce((a, b) => (b.running < a.running ? b : a));
    const runId = req.run.run_id;
    return new Promise<ExecResult>((resolve) => {
      const pending: Pending = { slot, onEvent, resolve, done: false };
      this.runs.set(runId, pending);
      slot.running++;
      const abort = () => this.post(slot, { type: 'abort', runId, reason: String((signal.reason as Error)?.message ?? 'aborted') });
      if (signal.aborted) abort();
      else signal.addEventListener('abort', abort, { once: true });
      this.post(slot, { type: 'execute', req });
    });
  }

  discard(runId: string): void {
    const p = this.runs.get(runId);
    if (p) this.post(p.slot, { type: 'discard', runId });
  }

  settle(runId: string): Promise<void> {
    const p = this.runs.get(runId);
    if (!p || p.slot.exited) return Promise.resolve();
    const seq = ++this.seq;
    return new Promise<void>((resolve) => {
      this.settles.set(seq, resolve);
      this.post(p.slot, { type: 'settle', runId, seq });
    });
  }

  forget(runId: string): void {
    const p = this.runs.get(runId);
    if (!p) return;
    this.runs.delete(runId);
    this.post(p.slot, { type: 'forget', runId });
  }

  async close(): Promise<void> {
    this.closing = true;
    await Promise.all(
      this.slots.map(async (slot) => {
        if (!slot || slot.exited) return;
        const exited = new Promise<void>((r) => slot.worker.once('exit', () => r()));
        const closed = new Promise<void>((r) => slot.worker.on('message', (m: FromWorker) => m.type === 'closed' && r()));
        this.post(slot, { type: 'close' });
        let timer: NodeJS.Timeout | undefined;
        await Promise.race([closed, exited, new Promise((r) => (timer = setTimeout(r, 5_000)))]);
        clearTimeout(timer);
        await slot.worker.terminate();
      }),
    );
  }

  private post(slot: Slot, m: ToWorker): void {
    if (!slot.exited) slot.worker.postMessage(m);
  }
}

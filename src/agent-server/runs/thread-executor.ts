// Runs graphs on worker threads so that graph execution (LangGraph, serialization, checkpoint writes) uses other
// cores than the thread answering HTTP and keeping the books. Each thread loads the graphs and opens its own
// checkpointer connection (executor-worker.ts); a run goes to the thread with the fewest runs. Events and
// outcomes come back as plain JSON, which is what the API sends anyway. Threads start with the first run and
// load in the background: until one is ready (about a second), runs execute on the engine's thread through the
// inline executor, so a fresh server answers and runs at once. A thread's own start and ends are in executor-slots.ts.
import type { Logger } from '../../lib/logger.ts';
import type { ExecRequest, ExecResult, RunExecutor } from './executor.ts';
import {
  closeSlot,
  releaseSlot,
  spawnSlot,
  type FromWorker,
  type Slot,
  type ThreadExecutorInit,
  type ToWorker,
} from './executor-slots.ts';
import { releaseRunContext } from '../shims/lean-run-context.ts';

interface Pending {
  slot: Slot;
  onEvent: (event: string, json: string) => void;
  resolve: (r: ExecResult) => void;
  done: boolean;
}

/** How long forgotten runs may wait for a message to ride on before they are sent on their own. */
const FORGET_AFTER_MS = 100;

export class ThreadExecutor implements RunExecutor {
  private readonly slots: Slot[] = [];
  /** By run id, from execute until forget (rollback may still need the run's thread after the result). */
  private readonly runs = new Map<string, Pending>();
  private readonly settles = new Map<number, () => void>();
  private seq = 0;
  private closing = false;

  /** Runs given to the inline executor (no thread was ready), until forget. */
  private readonly inlineRuns = new Set<string>();

  private constructor(
    private readonly init: ThreadExecutorInit,
    private readonly logger: Logger,
    private readonly inline: RunExecutor,
    private readonly threads: number,
  ) {}

  /**
   * `threads` executor threads, started with the first run (a server that never runs anything, like the local
   * runtime's preflight, does not pay for them); `inline` runs graphs until one is ready.
   */
  static start(threads: number, init: ThreadExecutorInit, logger: Logger, inline: RunExecutor): ThreadExecutor {
    return new ThreadExecutor(init, logger, inline, threads);
  }

  private spawned = false;
  private idleTimer?: NodeJS.Timeout;

  private ensureSpawned(): void {
    clearTimeout(this.idleTimer);
    this.idleTimer = undefined;
    if (this.spawned || this.closing) return;
    this.spawned = true;
    for (let i = 0; i < this.threads; i++) this.spawn(i);
  }

  /** Threads alive now (ready or loading), for diagnostics and tests. */
  liveThreads(): number {
    return this.slots.filter((s) => s && !s.exited && !s.released && !s.failed).length;
  }

  /** Nothing runs on the threads: after idleReleaseMs of that they end, so their heaps go back to the system. */
  private armIdleRelease(): void {
    const ms = this.init.idleReleaseMs ?? 0;
    if (ms <= 0 || this.closing || !this.spawned || this.runs.size || this.inlineRuns.size || this.settles.size) return;
    clearTimeout(this.idleTimer);
    this.idleTimer = setTimeout(() => this.releaseIdle(), ms);
    this.idleTimer.unref();
  }

  private releaseIdle(): void {
    this.idleTimer = undefined;
    // A run may have come meanwhile (its execute cleared the timer, but be sure): only an idle executor lets go.
    if (this.closing || this.runs.size || this.inlineRuns.size || this.settles.size) return;
    const slots = this.slots.filter((s) => s && !s.exited && !s.released);
    if (!slots.length) return;
    this.spawned = false;
    for (const slot of slots) releaseSlot(slot, (sl, m) => this.post(sl, m));
    this.logger.info({ executor_threads: slots.length }, 'executor threads idle: ended until the next run');
  }

  /** Starts the threads now and resolves once each is ready (or failed to start). */
  whenReady(): Promise<void> {
    this.ensureSpawned();
    return Promise.all(this.slots.map((s) => s.started)).then(() => undefined);
  }

  private spawn(index: number): void {
    this.slots[index] = spawnSlot(index, this.init, this.logger, {
      message: (slot, m) => this.onMessage(slot, m),
      exit: (slot, code) => this.onExit(slot, code),
    });
  }

  private onMessage(slot: Slot, m: FromWorker): void {
    if (m.type === 'batch') {
      for (const item of m.items) this.onMessage(slot, item);
    } else if (m.type === 'event') {
      const p = this.runs.get(m.runId);
      if (p && !p.done) p.onEvent(m.event, m.json);
    } else if (m.type === 'result') {
      const p = this.runs.get(m.runId);
      if (p && !p.done) {
        p.done = true;
        slot.running--;
        p.resolve(m.result);
      }
      this.armIdleRelease();
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
        p.resolve({
          ok: false,
          error: { name: 'ExecutorThreadExited', message: `executor thread exited (code ${code})` },
        });
      }
      this.runs.delete(runId);
    }
    // Released while idle: no run or settle of its is left, and those of its successor are not its to end.
    if (slot.released) return;
    for (const [seq, resolve] of this.settles) {
      resolve();
      this.settles.delete(seq);
    }
    if (this.closing || slot.failed || !slot.ready) return;
    this.logger.error({ executor_thread: slot.index, code }, 'executor thread exited; starting a new one');
    this.spawn(slot.index);
  }

  execute(req: ExecRequest, onEvent: (event: string, json: string) => void, signal: AbortSignal): Promise<ExecResult> {
    const runId = req.run.run_id;
    this.ensureSpawned();
    const live = this.slots.filter((s) => s.ready && !s.exited && !s.released);
    if (!live.length || this.closing) {
      this.inlineRuns.add(runId);
      return this.inline.execute(req, onEvent, signal);
    }
    const slot = live.reduce((a, b) => (b.running < a.running ? b : a));
    return new Promise<ExecResult>((resolve) => {
      const pending: Pending = { slot, onEvent, resolve, done: false };
      this.runs.set(runId, pending);
      slot.running++;
      const abort = () =>
        this.post(slot, { type: 'abort', runId, reason: String((signal.reason as Error)?.message ?? 'aborted') });
      if (signal.aborted) abort();
      else signal.addEventListener('abort', abort, { once: true });
      this.post(slot, { type: 'execute', req });
    });
  }

  discard(runId: string): void {
    if (this.inlineRuns.has(runId)) return this.inline.discard(runId);
    const p = this.runs.get(runId);
    if (p) this.post(p.slot, { type: 'discard', runId });
  }

  settle(runId: string): Promise<void> {
    if (this.inlineRuns.has(runId)) return this.inline.settle(runId);
    const p = this.runs.get(runId);
    if (!p || p.slot.exited) return Promise.resolve();
    const seq = ++this.seq;
    return new Promise<void>((resolve) => {
      this.settles.set(seq, resolve);
      this.post(p.slot, { type: 'settle', runId, seq });
    });
  }

  forget(runId: string): void {
    if (this.inlineRuns.delete(runId)) {
      this.inline.forget(runId);
      // The last run this thread executed itself is over and threads run the next ones: its async context can go.
      if (!this.inlineRuns.size && this.slots.some((s) => s.ready && !s.exited)) releaseRunContext();
      this.armIdleRelease();
      return;
    }
    const p = this.runs.get(runId);
    if (!p) return;
    this.runs.delete(runId);
    this.armIdleRelease();
    // Nothing waits on it: the thread learns it with its next run (a message less per run), or a little later.
    const slot = p.slot;
    if (slot.exited) return;
    slot.forgotten.push(runId);
    slot.forgetTimer ??= setTimeout(() => this.sendForgotten(slot), FORGET_AFTER_MS).unref();
  }

  private sendForgotten(slot: Slot): void {
    clearTimeout(slot.forgetTimer);
    slot.forgetTimer = undefined;
    const runIds = slot.forgotten;
    if (!runIds.length) return;
    slot.forgotten = [];
    if (!slot.exited) slot.worker.postMessage({ type: 'forget', runIds } satisfies ToWorker);
  }

  async close(): Promise<void> {
    this.closing = true;
    clearTimeout(this.idleTimer);
    await Promise.all(this.slots.map((slot) => slot && closeSlot(slot, (sl, m) => this.post(sl, m))));
    await this.inline.close();
  }

  /** Sends `m`; runs forgotten before it go first (with an execute, in the same message). */
  private post(slot: Slot, m: ToWorker): void {
    if (slot.exited) return;
    if (slot.forgotten.length) {
      if (m.type === 'execute') {
        clearTimeout(slot.forgetTimer);
        slot.forgetTimer = undefined;
        m = { ...m, forget: slot.forgotten };
        slot.forgotten = [];
      } else this.sendForgotten(slot);
    }
    slot.worker.postMessage(m);
  }
}

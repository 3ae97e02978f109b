// The run engine of one process: up to `concurrency` runs at once, over the store's run queue, which it alone holds
// (the services create runs through createRun). A storage wake-up (run created, run finished) makes it claim
// immediately; a slow safety timer sweeps dead workers' runs and catches missed notifications. Each claimed run
// holds a lease it renews while the graph executes (run-upkeep.ts: the leases and the safety sweep).
import { randomUUID } from 'node:crypto';
import type { BaseCheckpointSaver } from '@langchain/langgraph-checkpoint';
import { isConnectionError } from '../../lib/connection-errors.ts';
import type { Logger } from '../../lib/logger.ts';
import type { GraphRegistry } from '../graphs/index.ts';
import type { EngineStorage, RunQueue } from '../storage/ports/run-queue.ts';
import type { CancelAction, NewRun, RunOutcome, RunRecord, StorageEvent } from '../storage/types.ts';
import { RunCheckpointer } from './checkpointer.ts';
import { RunWaiters } from './run-waiters.ts';
import { RunUpkeep } from './run-upkeep.ts';
import { CancelledError, runAttempt, type ActiveRun, type AttemptHost } from './attempt.ts';
import { InlineExecutor, type RunExecutor } from './executor.ts';
import type { FeedbackEvent } from '../streams/feedback.ts';

export interface EngineOptions {
  storage: EngineStorage;
  graphs: GraphRegistry;
  logger: Logger;
  concurrency: number;
  /** BG_JOB_TIMEOUT_SECS in ms. */
  runTimeoutMs: number;
  workerId?: string;
  leaseMs?: number;
  heartbeatMs?: number;
  /** Safety poll: sweep expired leases, look for missed work and cancels. */
  sweepMs?: number;
  /**
   * Where graphs execute: by default on this thread with the store's checkpointer (the inline executor); a
   * function gets that inline executor and returns the one to use (e.g. threads that fall back to it).
   */
  executor?: (inline: RunExecutor) => RunExecutor;
  /** The data of the `feedback` event of a run with feedback_keys (LangSmith), or null for none. */
  feedback?: FeedbackEvent;
  /** Told after this process stored a run's end (webhooks); must return at once. */
  onRunFinished?: (run: RunRecord, outcome: RunOutcome) => void;
  /** Told as this process starts a run's attempt (A2A push notifications: "working"); must return at once. */
  onRunStarted?: (run: RunRecord) => void;
}

export class RunEngine {
  readonly workerId: string;
  readonly checkpointer: BaseCheckpointSaver;
  private readonly queue: RunQueue;
  private readonly runCheckpoints: RunCheckpointer;
  private readonly executor: RunExecutor;
  private readonly active = new Map<string, ActiveRun>();
  /** Who waits for which run, and what this process knows of runs without reading them (run-waiters.ts). */
  private readonly waiters = new RunWaiters();
  /** Runs given back because the store went away under them, and how often (MAX_OUTAGE_RELEASES). */
  private readonly outageReleases = new Map<string, number>();
  private readonly attemptHost: AttemptHost;
  /** Slots handed out for runs this process claims as it creates them (createRun), not yet launched. */
  private reserved = 0;
  private claiming = false;
  private again = false;
  private stopping = false;
  private readonly upkeep: RunUpkeep;
  private unsubscribe: (() => void) | null = null;
  private readonly leaseMs: number;

  constructor(private readonly opts: EngineOptions) {
    this.workerId = opts.workerId ?? `${process.pid}-${randomUUID().slice(0, 8)}`;
    this.leaseMs = opts.leaseMs ?? 30_000;
    this.queue = opts.storage.queue;
    this.runCheckpoints = new RunCheckpointer(opts.storage.checkpointer);
    this.checkpointer = this.runCheckpoints.saver;
    // The memory store (getStore() / config.store in nodes) is the same one the /store routes use.
    const inline = new InlineExecutor(opts.graphs, this.runCheckpoints, opts.storage.items?.store);
    this.executor = opts.executor ? opts.executor(inline) : inline;
    this.attemptHost = {
      storage: opts.storage,
      logger: opts.logger,
      executor: this.executor,
      workerId: this.workerId,
      leaseMs: this.leaseMs,
      runTimeoutMs: opts.runTimeoutMs,
      feedback: opts.feedback,
      onRunStarted: opts.onRunStarted,
      onRunFinished: opts.onRunFinished,
      stopping: () => this.stopping,
      outageReleases: this.outageReleases,
      waiters: this.waiters,
    };
    this.upkeep = new RunUpkeep({
      ...this.attemptHost,
      active: this.active,
      cancelLocal: (id, action) => this.cancelLocal(id, action),
      pump: () => this.pump(),
    });
  }

  get runningCount(): number {
    return this.active.size;
  }

  /** Subscribes to wake-ups only: a process that answers requests but runs nothing (tests, read replicas). */
  listen(): void {
    this.unsubscribe ??= this.opts.storage.subscribe((e) => this.onEvent(e));
  }

  async start(): Promise<void> {
    this.listen();
    await this.upkeep.sweep();
    const heartbeat = this.opts.heartbeatMs ?? Math.max(Math.floor(this.leaseMs / 3), 10);
    this.upkeep.start(heartbeat, this.opts.sweepMs ?? 5_000);
    this.pump();
  }

  /** Stops claiming, waits up to graceMs for running runs, then gives the rest back to the queue. */
  async stop(graceMs: number): Promise<void> {
    this.stopping = true;
    this.upkeep.stop();
    const all = Promise.all([...this.active.values()].map((a) => a.done));
    let timer: NodeJS.Timeout | undefined;
    await Promise.race([all, new Promise((r) => (timer = setTimeout(r, graceMs)))]);
    clearTimeout(timer);
    const left = [...this.active.keys()];
    if (left.length) {
      this.opts.logger.warn({ runs: left }, 'shutdown grace period over: returning runs to the queue');
      for (const a of this.active.values()) a.controller.abort(new CancelledError('server shutting down'));
      await this.upkeep.giveBack(left);
      this.active.clear();
    }
    this.unsubscribe?.();
    this.unsubscribe = null;
    this.waiters.wakeAll();
    await this.executor.close();
  }

  /**
   * Creates a run (the queue applies its multitask strategy). When this process has a free slot, the queue may
   * claim the new run for it in the same write (when the run is the one a claim would take next), which saves the
   * claim that the wake-up would send and starts the run sooner: it is launched here. No free slot, stopping, or a
   * process that runs nothing: the run waits in the queue. A delayed run (after_seconds) is looked for again once
   * due. The record is the one the queue stored (status running when this process took it).
   */
  async createRun(run: NewRun): Promise<RunRecord> {
    const created = await this.enqueue(run);
    if (run.delay_ms) this.wakeAfter(run.delay_ms);
    return created;
  }

  private async enqueue(newRun: NewRun): Promise<RunRecord> {
    if (!this.hasFreeSlot()) return this.waiters.noteQueued(await this.queue.create(newRun));
    // A wake-up that came while the slot was held may have found no room: unless the slot went to the new run,
    // look again once it is given back (also when the create failed).
    this.reserved++;
    const run = await this.queue
      .create(newRun, { workerId: this.workerId, leaseMs: this.leaseMs })
      .finally(() => void this.reserved--)
      .catch((err: unknown) => {
        this.pump();
        throw err;
      });
    if (run.status !== 'running' || run.worker_id !== this.workerId) {
      this.waiters.noteQueued(run);
      this.pump();
      return run;
    }
    if (this.stopping) {
      // Stopping began meanwhile: the run goes back to the queue for another process (or the next start).
      await this.queue.release(this.workerId, [run.run_id]);
      return { ...run, status: 'pending', worker_id: null, attempt: Math.max(run.attempt - 1, 0) };
    }
    this.launch(run);
    return run;
  }

  /** A delayed run (after_seconds) becomes claimable later: look again then. */
  private wakeAfter(ms: number): void {
    // Node timers hold at most 2^31-1 ms; a later run is started by the periodic sweep when it is due.
    setTimeout(() => this.pump(), Math.min(ms + 5, 2_147_483_647)).unref();
  }

  /**
   * Resolves when the run is terminal (or gone); never hangs on a finished run. `known` is a record of the run
   * the caller read just before, or runningHere's (it saves one read); a finish in between is caught through
   * recentlyDone.
   */
  async waitForRun(
    threadId: string,
    runId: string,
    signal?: AbortSignal,
    known?: RunRecord,
  ): Promise<RunRecord | null> {
    this.listen();
    return this.waiters.wait(runId, () => this.opts.storage.runs.get(threadId, runId), {
      signal,
      known,
      stopping: () => this.stopping,
    });
  }

  /**
   * The run's record when it executes in this process on thread `threadId` now: it exists there (a join need not
   * read it to know; waitForRun takes it as `known`). Undefined otherwise, also once its end is being stored.
   */
  runningHere(threadId: string, runId: string): RunRecord | undefined {
    const entry = this.active.get(runId);
    return entry && !entry.finishing && entry.run.thread_id === threadId ? entry.run : undefined;
  }

  /**
   * The record of a run created through this process on thread `threadId` that waits in the queue and has not ended
   * or gone since (no run_done heard for it), without its kwargs and metadata: it exists there, and waitForRun may
   * take the record as `known`. Undefined when this process does not know.
   */
  queuedHere(threadId: string, runId: string): RunRecord | undefined {
    return this.waiters.queuedHere(threadId, runId);
  }

  /** The thread values `run` (a record waitForRun returned) stored as it finished in this process, if known. */
  finalValues(run: RunRecord | null): string | undefined {
    return this.waiters.finalValues(run);
  }

  private onEvent(e: StorageEvent): void {
    if (e.type === 'wake') this.pump();
    else if (e.type === 'run_done') {
      this.waiters.forgetQueued(e.run_id);
      // A run this process is storing the end of: execute() hands waiters its final record and values next; the
      // store's own run_done (it may arrive first) would only make them read the run again.
      if (!this.active.get(e.run_id)?.finishing) this.waiters.done(e.run_id);
      // A finished run may unblock the next one queued on its thread.
      this.pump();
    } else if (e.type === 'cancel') this.cancelLocal(e.run_id, e.action);
  }

  private cancelLocal(runId: string, action: CancelAction): void {
    const a = this.active.get(runId);
    if (!a || a.cancel) return;
    a.cancel = action;
    if (action === 'rollback') this.executor.discard(runId);
    a.controller.abort(new CancelledError(`run cancelled (${action})`));
  }

  /** Whether this process takes runs now (started, not stopping) and has a slot for one more. */
  private hasFreeSlot(): boolean {
    const started = !!this.unsubscribe && this.upkeep.running;
    return started && !this.stopping && this.active.size + this.reserved < this.opts.concurrency;
  }

  private pump(): void {
    if (this.stopping || !this.unsubscribe || !this.upkeep.running) return;
    if (this.claiming) {
      this.again = true;
      return;
    }
    if (!this.hasFreeSlot()) return;
    this.claiming = true;
    void this.claimLoop().finally(() => {
      this.claiming = false;
      if (this.again) {
        this.again = false;
        this.pump();
      }
    });
  }

  private async claimLoop(): Promise<void> {
    while (this.hasFreeSlot()) {
      let run: RunRecord | null;
      try {
        run = await this.queue.claim(this.workerId, this.leaseMs);
      } catch (err) {
        // An unreachable store is waited for quietly (the pool's error listener says so once); the rest is a bug.
        if (isConnectionError(err)) {
          setTimeout(() => this.pump(), 1_000).unref();
          return;
        }
        this.opts.logger.error({ err }, 'claiming a run failed; retrying shortly');
        setTimeout(() => this.pump(), 200).unref();
        return;
      }
      if (!run) return;
      this.launch(run);
    }
  }

  private launch(run: RunRecord): void {
    const entry: ActiveRun = {
      run,
      controller: new AbortController(),
      cancel: run.cancel_action,
      timedOut: false,
      finishing: false,
      done: Promise.resolve(),
    };
    this.active.set(run.run_id, entry);
    this.waiters.forgetQueued(run.run_id);
    entry.done = runAttempt(this.attemptHost, entry)
      .catch((err) => this.opts.logger.error({ err, run_id: run.run_id }, 'run bookkeeping failed'))
      .finally(() => {
        this.executor.forget(run.run_id);
        this.active.delete(run.run_id);
        const next = entry.next;
        if (next && this.stopping) {
          // Claimed as stopping began: back to the queue for another process (or the next start).
          void this.upkeep.giveBack([next.run_id]);
        } else if (next) this.launch(next);
        this.pump();
      });
  }
}

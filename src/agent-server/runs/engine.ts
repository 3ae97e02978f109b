// The run engine of one process: up to `concurrency` runs at once. A storage wake-up (run created, run
// finished) makes it claim immediately; a slow safety timer sweeps dead workers' runs and catches missed
// notifications. Each claimed run holds a lease it renews while the graph executes.
import { randomUUID } from 'node:crypto';
import type { BaseCheckpointSaver } from '@langchain/langgraph-checkpoint';
import { isConnectionError } from '../../lib/connection-errors.ts';
import type { Logger } from '../../lib/logger.ts';
import type { GraphRegistry } from '../graphs/index.ts';
import {
  MAX_ATTEMPTS,
  NO_CHECKPOINT_KEY,
  TERMINAL_RUN_STATUSES,
  type CancelAction,
  type Json,
  type RunOutcome,
  type RunRecord,
  type Storage,
  type StorageEvent,
} from '../storage/types.ts';
import { RunCheckpointer } from './checkpointer.ts';
import { InlineExecutor, type RunExecutor } from './executor.ts';
import { lostToOutage, untilReachable } from './outage.ts';
import type { FeedbackEvent } from '../streams/feedback.ts';
import { runDoneEvent } from '../streams/thread-events.ts';
import { stringify } from '../serde.ts';

export interface EngineOptions {
  storage: Storage;
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

interface ActiveRun {
  run: RunRecord;
  controller: AbortController;
  cancel: CancelAction | null;
  timedOut: boolean;
  /** Its end is being stored (finish); execute() tells its waiters once that is done, whatever the answer. */
  finishing: boolean;
  /** The run the store claimed for this slot as it stored this one's end (finishAndClaim), launched after it. */
  next?: RunRecord;
  done: Promise<void>;
}

class CancelledError extends Error {}

/** How often this process gives one run back to the queue because the store went away under it. */
const MAX_OUTAGE_RELEASES = 5;
/**
 * How long, and for how many runs, a queued run created here is known to exist without reading it (queuedHere); a
 * join of a run queued longer reads it. Should a run_done be missed (a LISTEN reconnect), a join that trusted the
 * entry reads the run after waitForRun's 2 s timer.
 */
const QUEUED_KNOWN_MS = 8_000;
const MAX_QUEUED_KNOWN = 4096;

export class RunEngine {
  readonly workerId: string;
  readonly checkpointer: BaseCheckpointSaver;
  private readonly runCheckpoints: RunCheckpointer;
  private readonly executor: RunExecutor;
  private readonly active = new Map<string, ActiveRun>();
  /** Join/wait callers by run id; a run finished here hands them its final record (no re-read). */
  private readonly waiters = new Map<string, Set<(done?: RunRecord) => void>>();
  /**
   * The values a run finished here stored on its thread (JSON text), by the final record handed to its waiters:
   * join and wait answer them without reading the thread back (see finalValues).
   */
  private readonly finalJson = new WeakMap<RunRecord, string>();
  /** Runs seen finishing lately (run id -> ms), so a waiter that registers just after still notices. */
  private readonly recentlyDone = new Map<string, number>();
  /**
   * Runs created through this process that went to the queue (no free slot), by id, with when: they exist on their
   * thread until a run_done says they ended or went (deleted, rolled back, thread deleted), so a join need not read
   * them (queuedHere). Dropped when launched here, on their run_done, or after QUEUED_KNOWN_MS. The records are kept
   * without their kwargs and metadata (a client's input can be megabytes): a join needs the run's status only.
   */
  private readonly queued = new Map<string, { run: RunRecord; at: number }>();
  /** Runs given back because the store went away under them, and how often (MAX_OUTAGE_RELEASES). */
  private readonly outageReleases = new Map<string, number>();
  /** Slots handed out for runs this process claims as it creates them (claimAtCreate), not yet launched. */
  private reserved = 0;
  private claiming = false;
  private again = false;
  private stopping = false;
  private timers: NodeJS.Timeout[] = [];
  private unsubscribe: (() => void) | null = null;
  private readonly leaseMs: number;

  constructor(private readonly opts: EngineOptions) {
    this.workerId = opts.workerId ?? `${process.pid}-${randomUUID().slice(0, 8)}`;
    this.leaseMs = opts.leaseMs ?? 30_000;
    this.runCheckpoints = new RunCheckpointer(opts.storage.checkpointer);
    this.checkpointer = this.runCheckpoints.saver;
    // The memory store (getStore() / config.store in nodes) is the same one the /store routes use.
    const inline = new InlineExecutor(opts.graphs, this.runCheckpoints, opts.storage.items?.store);
    this.executor = opts.executor ? opts.executor(inline) : inline;
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
    await this.safetyTick();
    const heartbeat = this.opts.heartbeatMs ?? Math.max(Math.floor(this.leaseMs / 3), 10);
    this.timers.push(setInterval(() => void this.heartbeat(), heartbeat));
    this.timers.push(setInterval(() => void this.safetyTick(), this.opts.sweepMs ?? 5_000));
    for (const t of this.timers) t.unref();
    this.pump();
  }

  /** Stops claiming, waits up to graceMs for running runs, then gives the rest back to the queue. */
  async stop(graceMs: number): Promise<void> {
    this.stopping = true;
    for (const t of this.timers) clearInterval(t);
    this.timers = [];
    const all = Promise.all([...this.active.values()].map((a) => a.done));
    let timer: NodeJS.Timeout | undefined;
    await Promise.race([all, new Promise((r) => (timer = setTimeout(r, graceMs)))]);
    clearTimeout(timer);
    const left = [...this.active.keys()];
    if (left.length) {
      this.opts.logger.warn({ runs: left }, 'shutdown grace period over: returning runs to the queue');
      for (const a of this.active.values()) a.controller.abort(new CancelledError('server shutting down'));
      await this.opts.storage.runs
        .release(this.workerId, left)
        .catch((err) => this.opts.logger.error({ err }, 'could not release runs; the sweeper will requeue them'));
      this.active.clear();
    }
    this.unsubscribe?.();
    this.unsubscribe = null;
    for (const set of this.waiters.values()) for (const w of set) w();
    await this.executor.close();
  }

  /**
   * Creating a run through this process: when it has a free slot, the store may claim the new run for it in the
   * same write (when the run is the one a claim would take next), which saves the claim that the wake-up would
   * send and starts the run sooner. `create` gets the claim to ask for (or none: no free slot, stopping, or a
   * process that runs nothing) and its result is launched here when the store claimed it.
   */
  async claimAtCreate(
    create: (claim?: { workerId: string; leaseMs: number }) => Promise<RunRecord>,
  ): Promise<RunRecord> {
    const free =
      !this.stopping &&
      !!this.unsubscribe &&
      this.timers.length > 0 &&
      this.active.size + this.reserved < this.opts.concurrency;
    if (!free) return this.noteQueued(await create());
    // A wake-up that came while the slot was held may have found no room: unless the slot went to the new run,
    // look again once it is given back (also when the create failed).
    this.reserved++;
    const run = await create({ workerId: this.workerId, leaseMs: this.leaseMs })
      .finally(() => void this.reserved--)
      .catch((err: unknown) => {
        this.pump();
        throw err;
      });
    if (run.status !== 'running' || run.worker_id !== this.workerId) {
      this.noteQueued(run);
      this.pump();
      return run;
    }
    if (this.stopping) {
      // Stopping began meanwhile: the run goes back to the queue for another process (or the next start).
      await this.opts.storage.runs.release(this.workerId, [run.run_id]);
      return { ...run, status: 'pending', worker_id: null, attempt: Math.max(run.attempt - 1, 0) };
    }
    this.launch(run);
    return run;
  }

  /** A delayed run (after_seconds) becomes claimable later: look again then. */
  wakeAfter(ms: number): void {
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
    let first = known;
    for (;;) {
      let wake!: (done?: RunRecord) => void;
      const woken = new Promise<RunRecord | undefined>((r) => (wake = r));
      let set = this.waiters.get(runId);
      if (!set) this.waiters.set(runId, (set = new Set()));
      set.add(wake);
      try {
        // A known record is current unless it was running and the run finished since (a terminal one stays so).
        const run =
          first && (TERMINAL_RUN_STATUSES.has(first.status) || !this.recentlyDone.has(runId))
            ? first
            : await this.opts.storage.runs.get(threadId, runId);
        first = undefined;
        if (!run || TERMINAL_RUN_STATUSES.has(run.status)) return run;
        if (signal?.aborted) return run;
        const onAbort = () => wake();
        signal?.addEventListener('abort', onAbort, { once: true });
        // The timer covers a missed notification (e.g. a LISTEN reconnect).
        const t = setTimeout(wake, 2_000);
        const done = await woken;
        clearTimeout(t);
        signal?.removeEventListener('abort', onAbort);
        if (done) return done;
        if (this.stopping) return this.opts.storage.runs.get(threadId, runId);
      } finally {
        set.delete(wake);
        if (!set.size) this.waiters.delete(runId);
      }
    }
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
    const queued = this.queued.get(runId);
    return queued && queued.run.thread_id === threadId && !this.recentlyDone.has(runId) ? queued.run : undefined;
  }

  /** A run created through this process that went to the queue: remembered for queuedHere. */
  private noteQueued(run: RunRecord): RunRecord {
    if (run.status === 'pending' && !this.recentlyDone.has(run.run_id) && this.queued.size < MAX_QUEUED_KNOWN) {
      this.queued.set(run.run_id, { run: { ...run, kwargs: {}, metadata: {} }, at: Date.now() });
    }
    return run;
  }

  /** The thread values `run` (a record waitForRun returned) stored as it finished in this process, if known. */
  finalValues(run: RunRecord | null): string | undefined {
    return run ? this.finalJson.get(run) : undefined;
  }

  private runDone(runId: string, final?: RunRecord): void {
    this.recentlyDone.set(runId, Date.now());
    this.queued.delete(runId);
    for (const w of this.waiters.get(runId) ?? []) w(final);
  }

  private onEvent(e: StorageEvent): void {
    if (e.type === 'wake') this.pump();
    else if (e.type === 'run_done') {
      this.queued.delete(e.run_id);
      // A run this process is storing the end of: execute() hands waiters its final record and values next; the
      // store's own run_done (it may arrive first) would only make them read the run again.
      if (!this.active.get(e.run_id)?.finishing) this.runDone(e.run_id);
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

  private pump(): void {
    if (this.stopping || !this.unsubscribe || this.timers.length === 0) return;
    if (this.claiming) {
      this.again = true;
      return;
    }
    if (this.active.size + this.reserved >= this.opts.concurrency) return;
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
    while (!this.stopping && this.active.size + this.reserved < this.opts.concurrency) {
      let run: RunRecord | null;
      try {
        run = await this.opts.storage.runs.claim(this.workerId, this.leaseMs);
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
    this.queued.delete(run.run_id);
    entry.done = this.execute(entry)
      .catch((err) => this.opts.logger.error({ err, run_id: run.run_id }, 'run bookkeeping failed'))
      .finally(() => {
        this.executor.forget(run.run_id);
        this.active.delete(run.run_id);
        const next = entry.next;
        if (next && this.stopping) {
          // Claimed as stopping began: back to the queue for another process (or the next start).
          void this.opts.storage.runs
            .release(this.workerId, [next.run_id])
            .catch((err) => this.opts.logger.error({ err }, 'could not release a run; the sweeper will requeue it'));
        } else if (next) this.launch(next);
        this.pump();
      });
  }

  private async execute(entry: ActiveRun): Promise<void> {
    const { run, controller } = entry;
    const log = this.opts.logger.child({ run_id: run.run_id, thread_id: run.thread_id, attempt: run.attempt });
    const kw = run.kwargs as RunKwargs;
    const config = runnableConfig(run, kw);
    // Claimed as it was created on a thread without checkpoints (and busy since): its first read can be skipped.
    if (run.no_checkpoint && run.attempt <= 1) (config.configurable as Json)[NO_CHECKPOINT_KEY] = randomUUID();
    const graphId = String((kw.config?.configurable as Json | undefined)?.graph_id ?? '');
    const timer = setTimeout(() => {
      entry.timedOut = true;
      controller.abort(new Error('run timed out'));
    }, this.opts.runTimeoutMs);
    timer.unref();
    log.info('run started');
    try {
      this.opts.onRunStarted?.(run);
    } catch (err) {
      log.warn({ err }, 'run-started hook failed');
    }
    // Every attempt's events go to the run's durable stream, after those of earlier attempts.
    const streams = this.opts.storage.streams;
    const publish = (event: string, json: string) => streams.append(run.run_id, run.thread_id, event, json);
    publish('metadata', stringify({ run_id: run.run_id, thread_id: run.thread_id, attempt: Math.max(run.attempt, 1) }));
    const result = entry.cancel
      ? { ok: false as const, error: { name: 'CancelledError', message: 'cancelled before start' } }
      : await this.executor.execute({ run, graphId, config }, publish, controller.signal);
    clearTimeout(timer);
    let outcome: RunOutcome;
    if (result.ok) outcome = result.outcome;
    else {
      if (entry.cancel === 'rollback') {
        this.executor.discard(run.run_id);
        await this.executor.settle(run.run_id);
        await this.opts.storage.runs.rollback(run.run_id, this.workerId);
        log.info('run cancelled and rolled back');
        return;
      }
      if (this.stopping && !entry.cancel && !entry.timedOut) return; // stop() releases it back to the queue
      // The database went away under the run: it goes back to the queue (not counted as an attempt) and runs
      // again once the store is back, instead of ending in an error that was not the graph's. A few times only: a
      // graph that fails like this on its own (its own database down) must end some day.
      const outages = this.outageReleases.get(run.run_id) ?? 0;
      if (
        !entry.cancel &&
        !entry.timedOut &&
        outages < MAX_OUTAGE_RELEASES &&
        (await lostToOutage(result.error, () => this.opts.storage.runs.getById(run.run_id)))
      ) {
        this.outageReleases.set(run.run_id, outages + 1);
        log.warn({ reason: result.error.message }, 'run interrupted by a store outage; it goes back to the queue');
        await untilReachable(() => this.opts.storage.runs.release(this.workerId, [run.run_id]), {
          stopping: () => this.stopping,
          logger: log,
          what: 'giving the run back',
        });
        return;
      }
      this.outageReleases.delete(run.run_id);
      const values = result.values;
      if (entry.cancel) outcome = { status: 'interrupted', values };
      else if (entry.timedOut) {
        outcome = {
          status: 'timeout',
          values,
          error: { error: 'TimeoutError', message: 'Run exceeded BG_JOB_TIMEOUT_SECS' },
        };
      } else {
        const err = Object.assign(new Error(result.error.message), result.error);
        log.warn({ err }, 'run failed');
        outcome = { status: 'error', error: { error: result.error.name, message: result.error.message }, values };
      }
    }
    if (outcome.error) publish('error', stringify(outcome.error));
    // Feedback URLs for the run's feedback_keys, as its last event (only with LangSmith configured).
    if (kw.feedback_keys?.length && this.opts.feedback) {
      const data = await this.opts.feedback(run.run_id, kw.feedback_keys);
      if (data) publish('feedback', data);
    }
    // The run's end on its thread's stream (run streams skip it; see streams/thread-events.ts).
    publish(...runDoneEvent(run.run_id));
    // Readers end a stream once the run is terminal: its events must be readable before that.
    await streams
      .flush()
      .catch((err: unknown) => log.warn({ err }, 'some stream events of the run could not be stored'));
    // A result stored late is still this worker's: finish() needs only our worker id, and this process's own
    // sweep renews our leases before it requeues anything.
    entry.finishing = true;
    const runs = this.opts.storage.runs;
    const ok = await untilReachable(
      async () => {
        // The slot this run frees takes the next run in the same write, unless the process is stopping.
        if (!runs.finishAndClaim || this.stopping) return runs.finish(run.run_id, this.workerId, outcome);
        const { finished, next } = await runs.finishAndClaim(run.run_id, this.workerId, outcome, this.leaseMs);
        if (next) entry.next = next;
        return finished;
      },
      {
        stopping: () => this.stopping,
        logger: log,
        what: 'storing the run result',
      },
    );
    this.outageReleases.delete(run.run_id);
    if (ok === undefined) {
      log.warn('shutting down before the store came back: the lease rules retry the run');
      this.runDone(run.run_id);
    } else if (ok) {
      log.info({ status: outcome.status }, 'run finished');
      const final: RunRecord = { ...run, status: outcome.status, error: (outcome.error as Json | undefined) ?? null };
      if (outcome.valuesJson !== undefined) this.finalJson.set(final, outcome.valuesJson);
      this.runDone(run.run_id, final);
      try {
        this.opts.onRunFinished?.(run, outcome);
      } catch (err) {
        log.warn({ err }, 'run-finished hook failed');
      }
    } else {
      log.warn('run lost its lease before finishing; another worker owns it now');
      // Waiters here read the run again (its run_done from the other worker was not taken as the end of it).
      this.runDone(run.run_id);
    }
  }

  private async heartbeat(): Promise<void> {
    const ids = [...this.active.keys()];
    if (!ids.length) return;
    try {
      const held = new Set(await this.opts.storage.runs.heartbeat(this.workerId, ids, this.leaseMs));
      for (const id of ids) {
        const a = this.active.get(id);
        // The lease went to someone else (we were too slow): stop without writing a result.
        if (a && !held.has(id) && !a.cancel) {
          this.opts.logger.warn({ run_id: id }, 'lease lost; stopping the run here');
          a.cancel = 'interrupt';
          a.controller.abort(new CancelledError('lease lost'));
        }
      }
    } catch (err) {
      this.opts.logger.warn({ err }, 'heartbeat failed');
    }
  }

  private async sweptRunFinished(runId: string): Promise<void> {
    const run = await this.opts.storage.runs.getById(runId).catch(() => null);
    if (!run || !TERMINAL_RUN_STATUSES.has(run.status)) return; // rolled back (deleted) or requeued since
    try {
      this.opts.onRunFinished?.(run, { status: run.status as RunOutcome['status'], error: run.error });
    } catch (err) {
      this.opts.logger.warn({ err, run_id: runId }, 'run-finished hook failed');
    }
  }

  private async safetyTick(): Promise<void> {
    const old = Date.now() - 10_000;
    for (const [id, at] of this.recentlyDone) if (at < old) this.recentlyDone.delete(id);
    const stale = Date.now() - QUEUED_KNOWN_MS;
    for (const [id, q] of this.queued) if (q.at < stale) this.queued.delete(id);
    try {
      // Our own runs' leases first: after the event loop was held up past a lease, this process's sweep must not
      // requeue a run it is still executing (another process's sweep may, and the heartbeat then stops it here).
      await this.heartbeat();
      const swept = await this.opts.storage.runs.sweep(MAX_ATTEMPTS);
      if (swept.requeued.length || swept.failed.length) {
        this.opts.logger.warn(swept, 'requeued or ended runs whose worker stopped responding');
      }
      // Runs this sweep ended (their worker is gone) get their run-finished notice here, once.
      if (this.opts.onRunFinished) for (const id of swept.failed) void this.sweptRunFinished(id);
      const requests = await this.opts.storage.runs.cancelRequests([...this.active.keys()]);
      for (const [id, action] of requests) this.cancelLocal(id, action);
    } catch (err) {
      this.opts.logger.warn({ err }, 'safety sweep failed');
    }
    this.pump();
  }
}

/** The parts of a run's kwargs the engine reads (the executor reads the rest). */
interface RunKwargs {
  config?: Json;
  context?: unknown;
  feedback_keys?: string[] | null;
}

function runnableConfig(run: RunRecord, kw: RunKwargs): Json {
  const cfg = (kw.config ?? {}) as Json;
  const configurable = { ...((cfg.configurable as Json | undefined) ?? {}) };
  if (configurable.checkpoint_id == null) delete configurable.checkpoint_id;
  configurable.thread_id = run.thread_id;
  configurable.checkpoint_ns = '';
  const { checkpoint_id: _c, checkpoint_ns: _n, ...meta } = configurable;
  return {
    ...cfg,
    // The API's recursion_limit is LangGraph.js's recursionLimit (an explicit recursionLimit wins).
    ...(typeof cfg.recursion_limit === 'number' && cfg.recursionLimit === undefined
      ? { recursionLimit: cfg.recursion_limit }
      : {}),
    configurable,
    metadata: { ...meta, ...((cfg.metadata as Json | undefined) ?? {}) },
    ...(kw.context !== undefined && kw.context !== null ? { context: kw.context } : {}),
  };
}

// One attempt of a claimed run, to its stored end: the run's config from its kwargs, the graph executed (inline or
// on an executor thread) under the run's timeout and cancel signal, its events published to its stream, and the
// outcome stored with finish (or finishAndClaim, which hands the freed slot the next run in the same write). A run
// lost to a store outage goes back to the queue instead of ending in an error that was not the graph's; a rolled
// back one is deleted. The engine (engine.ts) owns the slots, the claiming and the leases around it.
import { randomUUID } from 'node:crypto';
import type { Logger } from '../../lib/logger.ts';
import { NO_CHECKPOINT_KEY, type CancelAction, type Json, type RunOutcome, type RunRecord } from '../storage/types.ts';
import type { EngineStorage } from '../storage/ports/run-queue.ts';
import type { RunExecutor } from './executor.ts';
import { lostToOutage, untilReachable } from './outage.ts';
import type { RunWaiters } from './run-waiters.ts';
import type { FeedbackEvent } from '../streams/feedback.ts';
import { runDoneEvent } from '../streams/thread-events.ts';
import { stringify } from '../serde.ts';

export interface ActiveRun {
  run: RunRecord;
  controller: AbortController;
  cancel: CancelAction | null;
  timedOut: boolean;
  /** Its end is being stored (finish); runAttempt() tells its waiters once that is done, whatever the answer. */
  finishing: boolean;
  /** The run the store claimed for this slot as it stored this one's end (finishAndClaim), launched after it. */
  next?: RunRecord;
  done: Promise<void>;
}

export class CancelledError extends Error {}

/** How often this process gives one run back to the queue because the store went away under it. */
const MAX_OUTAGE_RELEASES = 5;

/** What an attempt uses of its engine. */
export interface AttemptHost {
  storage: EngineStorage;
  logger: Logger;
  executor: RunExecutor;
  workerId: string;
  leaseMs: number;
  /** BG_JOB_TIMEOUT_SECS in ms. */
  runTimeoutMs: number;
  feedback?: FeedbackEvent;
  onRunStarted?: (run: RunRecord) => void;
  onRunFinished?: (run: RunRecord, outcome: RunOutcome) => void;
  /** The engine is stopping: a run it stops is given back by stop(), and no next run is claimed. */
  stopping: () => boolean;
  /** Runs given back because the store went away under them, and how often (MAX_OUTAGE_RELEASES). */
  outageReleases: Map<string, number>;
  waiters: RunWaiters;
}

export async function runAttempt(host: AttemptHost, entry: ActiveRun): Promise<void> {
  const { run, controller } = entry;
  const log = host.logger.child({ run_id: run.run_id, thread_id: run.thread_id, attempt: run.attempt });
  const kw = run.kwargs as RunKwargs;
  const config = runnableConfig(run, kw);
  // Claimed as it was created on a thread without checkpoints (and busy since): its first read can be skipped.
  if (run.no_checkpoint && run.attempt <= 1) (config.configurable as Json)[NO_CHECKPOINT_KEY] = randomUUID();
  const graphId = String((kw.config?.configurable as Json | undefined)?.graph_id ?? '');
  const timer = setTimeout(() => {
    entry.timedOut = true;
    controller.abort(new Error('run timed out'));
  }, host.runTimeoutMs);
  timer.unref();
  log.info('run started');
  try {
    host.onRunStarted?.(run);
  } catch (err) {
    log.warn({ err }, 'run-started hook failed');
  }
  // Every attempt's events go to the run's durable stream, after those of earlier attempts.
  const streams = host.storage.streams;
  const publish = (event: string, json: string) => streams.append(run.run_id, run.thread_id, event, json);
  // {run_id, attempt}, as the platform and the JS reference send it (the thread is the stream's own, or in its path).
  publish('metadata', stringify({ run_id: run.run_id, attempt: Math.max(run.attempt, 1) }));
  const result = entry.cancel
    ? { ok: false as const, error: { name: 'CancelledError', message: 'cancelled before start' } }
    : await host.executor.execute({ run, graphId, config }, publish, controller.signal);
  clearTimeout(timer);
  let outcome: RunOutcome;
  if (result.ok) outcome = result.outcome;
  else {
    if (entry.cancel === 'rollback') {
      host.executor.discard(run.run_id);
      await host.executor.settle(run.run_id);
      await host.storage.queue.rollback(run.run_id, host.workerId);
      log.info('run cancelled and rolled back');
      return;
    }
    if (host.stopping() && !entry.cancel && !entry.timedOut) return; // stop() releases it back to the queue
    // The database went away under the run: it goes back to the queue (not counted as an attempt) and runs
    // again once the store is back, instead of ending in an error that was not the graph's. A few times only: a
    // graph that fails like this on its own (its own database down) must end some day.
    const outages = host.outageReleases.get(run.run_id) ?? 0;
    if (
      !entry.cancel &&
      !entry.timedOut &&
      outages < MAX_OUTAGE_RELEASES &&
      (await lostToOutage(result.error, () => host.storage.runs.getById(run.run_id)))
    ) {
      host.outageReleases.set(run.run_id, outages + 1);
      log.warn({ reason: result.error.message }, 'run interrupted by a store outage; it goes back to the queue');
      await untilReachable(() => host.storage.queue.release(host.workerId, [run.run_id]), {
        stopping: () => host.stopping(),
        logger: log,
        what: 'giving the run back',
      });
      return;
    }
    host.outageReleases.delete(run.run_id);
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
  if (kw.feedback_keys?.length && host.feedback) {
    const data = await host.feedback(run.run_id, kw.feedback_keys);
    if (data) publish('feedback', data);
  }
  // The run's end on its thread's stream (run streams skip it; see streams/thread-events.ts).
  publish(...runDoneEvent(run.run_id));
  // Readers end a stream once the run is terminal: its events must be readable before that.
  await streams.flush().catch((err: unknown) => log.warn({ err }, 'some stream events of the run could not be stored'));
  // A result stored late is still this worker's: finish() needs only our worker id, and this process's own
  // sweep renews our leases before it requeues anything.
  entry.finishing = true;
  const queue = host.storage.queue;
  const ok = await untilReachable(
    async () => {
      // The slot this run frees takes the next run in the same write, unless the process is stopping.
      if (host.stopping()) return queue.finish(run.run_id, host.workerId, outcome);
      const { finished, next } = await queue.finishAndClaim(run.run_id, host.workerId, outcome, host.leaseMs);
      if (next) entry.next = next;
      return finished;
    },
    {
      stopping: () => host.stopping(),
      logger: log,
      what: 'storing the run result',
    },
  );
  host.outageReleases.delete(run.run_id);
  if (ok === undefined) {
    log.warn('shutting down before the store came back: the lease rules retry the run');
    host.waiters.done(run.run_id);
  } else if (ok) {
    log.info({ status: outcome.status }, 'run finished');
    const final: RunRecord = { ...run, status: outcome.status, error: (outcome.error as Json | undefined) ?? null };
    host.waiters.done(run.run_id, final, outcome.valuesJson);
    try {
      host.onRunFinished?.(run, outcome);
    } catch (err) {
      log.warn({ err }, 'run-finished hook failed');
    }
  } else {
    log.warn('run lost its lease before finishing; another worker owns it now');
    // Waiters here read the run again (its run_done from the other worker was not taken as the end of it).
    host.waiters.done(run.run_id);
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

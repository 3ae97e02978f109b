// The waiting side of the run engine: the joins and waits of this process, by run, and what the process knows of
// runs without reading them — the final record and thread values of a run it finished, runs it saw end a moment
// ago, runs created through it that went to the queue. The engine tells it what happens (done, noteQueued,
// forgetQueued); readers ask it (wait, queuedHere, finalValues).
import { TERMINAL_RUN_STATUSES, type RunRecord } from '../storage/types.ts';

/**
 * How long, and for how many runs, a queued run created here is known to exist without reading it (queuedHere); a
 * join of a run queued longer reads it. Should a run_done be missed (a LISTEN reconnect), a join that trusted the
 * entry reads the run after wait()'s 2 s timer.
 */
const QUEUED_KNOWN_MS = 8_000;
const MAX_QUEUED_KNOWN = 4096;
/** How long a run seen ending stays in recentlyDone. */
const RECENTLY_DONE_MS = 10_000;
/** A waiter reads its run again this often even without a notice (one missed during a LISTEN reconnect). */
const MISSED_NOTICE_MS = 2_000;

export interface WaitOptions {
  signal?: AbortSignal;
  /** A record of the run the caller read just before, or runningHere's: it saves the first read. */
  known?: RunRecord;
  /** True once the engine stops: a woken waiter then reads the run once more and returns it as it is. */
  stopping: () => boolean;
}

export class RunWaiters {
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

  /**
   * Resolves when the run is terminal (or gone); never hangs on a finished run. `read` reads the run; a finish
   * between the caller's read (`known`) and this call is caught through recentlyDone.
   */
  async wait(runId: string, read: () => Promise<RunRecord | null>, opts: WaitOptions): Promise<RunRecord | null> {
    const { signal } = opts;
    let first = opts.known;
    for (;;) {
      let wake!: (done?: RunRecord) => void;
      const woken = new Promise<RunRecord | undefined>((r) => (wake = r));
      let set = this.waiters.get(runId);
      if (!set) this.waiters.set(runId, (set = new Set()));
      set.add(wake);
      try {
        // A known record is current unless it was running and the run finished since (a terminal one stays so).
        const run =
          first && (TERMINAL_RUN_STATUSES.has(first.status) || !this.recentlyDone.has(runId)) ? first : await read();
        first = undefined;
        if (!run || TERMINAL_RUN_STATUSES.has(run.status)) return run;
        if (signal?.aborted) return run;
        const onAbort = () => wake();
        signal?.addEventListener('abort', onAbort, { once: true });
        // The timer covers a missed notification (e.g. a LISTEN reconnect).
        const t = setTimeout(wake, MISSED_NOTICE_MS);
        const done = await woken;
        clearTimeout(t);
        signal?.removeEventListener('abort', onAbort);
        if (done) return done;
        if (opts.stopping()) return read();
      } finally {
        set.delete(wake);
        if (!set.size) this.waiters.delete(runId);
      }
    }
  }

  /**
   * The run ended (or went): its waiters wake, with its final record and thread values when this process stored
   * its end (they then need no read), else to read it again.
   */
  done(runId: string, final?: RunRecord, valuesJson?: string): void {
    if (final && valuesJson !== undefined) this.finalJson.set(final, valuesJson);
    this.recentlyDone.set(runId, Date.now());
    this.queued.delete(runId);
    for (const w of this.waiters.get(runId) ?? []) w(final);
  }

  /** Wakes every waiter (the engine stops): each reads its run once more. */
  wakeAll(): void {
    for (const set of this.waiters.values()) for (const w of set) w();
  }

  /** A run created through this process that went to the queue: remembered for queuedHere. */
  noteQueued(run: RunRecord): RunRecord {
    if (run.status === 'pending' && !this.recentlyDone.has(run.run_id) && this.queued.size < MAX_QUEUED_KNOWN) {
      this.queued.set(run.run_id, { run: { ...run, kwargs: {}, metadata: {} }, at: Date.now() });
    }
    return run;
  }

  /** The run left the queue (launched here) or ended (a run_done was heard). */
  forgetQueued(runId: string): void {
    this.queued.delete(runId);
  }

  /**
   * The record of a run created through this process on thread `threadId` that waits in the queue and has not ended
   * or gone since (no run_done heard for it), without its kwargs and metadata. Undefined when this process does not
   * know.
   */
  queuedHere(threadId: string, runId: string): RunRecord | undefined {
    const queued = this.queued.get(runId);
    return queued && queued.run.thread_id === threadId && !this.recentlyDone.has(runId) ? queued.run : undefined;
  }

  /** The thread values `run` (a record wait() returned) stored as it finished in this process, if known. */
  finalValues(run: RunRecord | null): string | undefined {
    return run ? this.finalJson.get(run) : undefined;
  }

  /** Forgets what is too old to trust (the engine's safety tick). */
  prune(now = Date.now()): void {
    for (const [id, at] of this.recentlyDone) if (at < now - RECENTLY_DONE_MS) this.recentlyDone.delete(id);
    for (const [id, q] of this.queued) if (q.at < now - QUEUED_KNOWN_MS) this.queued.delete(id);
  }
}

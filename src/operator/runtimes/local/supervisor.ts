// Restart bookkeeping of the local runtime's agent servers: failures in a row per revision, when the next start
// may happen (restart-policy.ts decides), and a timer that asks the controllers to look again at that moment
// (the revision controller's next deploy() then starts the server with its current spec and secrets).
import {
  afterFailure,
  DEFAULT_RESTART_POLICY,
  type LimitReason,
  type RestartPolicy,
  type RestartReason,
} from './restart-policy.ts';

export interface RestartInfo {
  reason: RestartReason;
  /** What ended the last attempt (one line). */
  message: string;
  /** Failures in a row. */
  failures: number;
  /** When the next start may happen (ms since the epoch). */
  at: number;
}

type Entry = RestartInfo & { timer?: NodeJS.Timeout };

export class RestartSupervisor<Ref> {
  private readonly failures = new Map<string, number>();
  private readonly healthySince = new Map<string, number>();
  private readonly last = new Map<string, Entry>();

  constructor(
    /** Called when a waiting revision may be started again. */
    private readonly due: (ref: Ref) => void,
    private readonly policy: RestartPolicy = DEFAULT_RESTART_POLICY,
    private readonly now: () => number = Date.now,
  ) {}

  /** The server answers /ok: the restart it was is over; the failure count stays until it has run a while. */
  healthy(key: string): void {
    this.healthySince.set(key, this.now());
    clearTimeout(this.last.get(key)?.timer);
    this.last.delete(key);
  }

  /**
   * A start failed or a server ended: when to start it again, and why (the timer calls `due` then). `limit`: the
   * limit it was killed for, which is a more telling reason than the crash loop it may be in.
   */
  failed(key: string, ref: Ref, message: string, transient: boolean, limit?: LimitReason): RestartInfo {
    const since = this.healthySince.get(key);
    this.healthySince.delete(key);
    const healthyMs = since === undefined ? 0 : this.now() - since;
    const decision = afterFailure(this.failures.get(key) ?? 0, healthyMs, transient, this.policy);
    this.failures.set(key, decision.failures);
    clearTimeout(this.last.get(key)?.timer);
    const entry: Entry = {
      reason: limit ?? decision.reason,
      message,
      failures: decision.failures,
      at: this.now() + decision.delayMs,
    };
    entry.timer = setTimeout(() => {
      entry.timer = undefined;
      // Timers may fire a millisecond before Date.now() reaches `at`: the moment has come, so say so, or the
      // reconcile this asks for would still see "waiting" and nothing would ever ask again.
      entry.at = Math.min(entry.at, this.now());
      this.due(ref);
    }, decision.delayMs);
    entry.timer.unref();
    this.last.set(key, entry);
    return this.info(entry);
  }

  /** Whether this revision has failed since it last answered /ok (its next failure is a restart, not a first start). */
  restarting(key: string): boolean {
    return this.last.has(key);
  }

  /** The restart in progress (waiting for its moment, or started and not yet healthy), if any. */
  pending(key: string): RestartInfo | undefined {
    const e = this.last.get(key);
    return e && this.info(e);
  }

  /** True while the next start of this revision must still wait. */
  waiting(key: string): boolean {
    const e = this.last.get(key);
    return !!e && e.at > this.now();
  }

  /** Drops a revision's state and timer (stopped, cleaned up, or moved off). */
  forget(key: string): void {
    clearTimeout(this.last.get(key)?.timer);
    this.last.delete(key);
    this.failures.delete(key);
    this.healthySince.delete(key);
  }

  forgetWhere(match: (key: string) => boolean): void {
    for (const key of new Set([...this.last.keys(), ...this.failures.keys(), ...this.healthySince.keys()])) {
      if (match(key)) this.forget(key);
    }
  }

  private info(e: Entry): RestartInfo {
    return { reason: e.reason, message: e.message, failures: e.failures, at: e.at };
  }
}

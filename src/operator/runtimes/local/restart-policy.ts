// When the local runtime starts an agent server again, kubelet-style: a server that exits (or could not start for
// a reason that passes, such as an unreachable database) is started again after a delay that doubles with each
// failure in a row, up to a cap; a server that then stays healthy for a while starts the count afresh. Pure, so
// the table tests in test/operator/runtimes/local/restart-policy.test.ts cover every branch.

export interface RestartPolicy {
  /** Delay before the first restart. */
  initialMs: number;
  /** Delays never exceed this. */
  maxMs: number;
  /** A server healthy this long before it exits starts the failure count again from one. */
  resetAfterMs: number;
  /** From this many failures in a row on, the revision is in a crash loop (said so in its status). */
  crashLoopAfter: number;
  /**
   * Cap of the delay while the database is unreachable: trying again costs one connection attempt, and the sooner
   * a deployment notices its database is back, the shorter its outage.
   */
  transientMaxMs?: number;
}

export const DEFAULT_RESTART_POLICY: RestartPolicy = {
  initialMs: 1_000,
  maxMs: 60_000,
  resetAfterMs: 120_000,
  crashLoopAfter: 3,
  transientMaxMs: 5_000,
};

/** A limit the runtime killed a server for (limits.ts): memory (with /tmp), processes, disk. */
export type LimitReason = 'OOMKilled' | 'ProcessLimitExceeded' | 'DiskLimitExceeded';

/**
 * Why a revision is waiting to be started again: restarting, in a crash loop, waiting for its database, or killed
 * for a limit.
 */
export type RestartReason = 'Restarting' | 'CrashLoopBackOff' | 'DatabaseUnavailable' | LimitReason;

export interface RestartDecision {
  /** Failures in a row, this one included. */
  failures: number;
  delayMs: number;
  reason: RestartReason;
}

/** The delay before restart number `failures` (1-based): initial, doubled each time, capped. */
export function backoffDelay(failures: number, policy: RestartPolicy = DEFAULT_RESTART_POLICY): number {
  if (!(failures >= 1)) return policy.initialMs;
  // 2^30 already exceeds any cap in milliseconds; the exponent is bounded so the product stays finite.
  const exp = Math.min(failures - 1, 30);
  return Math.min(policy.initialMs * 2 ** exp, policy.maxMs);
}

/**
 * What follows a failure: `previous` failures in a row before it, `healthyMs` how long the server had answered
 * /ok before it ended (0: it never did), `transient` whether the start failed for a reason outside the agent
 * (its database unreachable), which is never called a crash loop.
 */
export function afterFailure(
  previous: number,
  healthyMs: number,
  transient: boolean,
  policy: RestartPolicy = DEFAULT_RESTART_POLICY,
): RestartDecision {
  const failures = healthyMs >= policy.resetAfterMs ? 1 : Math.max(previous, 0) + 1;
  const reason: RestartReason = transient
    ? 'DatabaseUnavailable'
    : failures >= policy.crashLoopAfter
      ? 'CrashLoopBackOff'
      : 'Restarting';
  const delayMs = backoffDelay(failures, policy);
  return { failures, delayMs: transient ? Math.min(delayMs, policy.transientMaxMs ?? delayMs) : delayMs, reason };
}

// Store writes that must not be lost to a database or Redis outage: a run's end and a run given back to the
// queue are retried, with backoff, while the store is unreachable, so a restart of the database neither loses a
// finished run's result nor runs it again once the database returns.
import { isConnectionError, isDatabaseDisconnect } from '../../lib/connection-errors.ts';
import type { Logger } from '../../lib/logger.ts';

const FIRST_DELAY_MS = 250;
const MAX_DELAY_MS = 5_000;

/**
 * Calls `fn` until it succeeds or fails for a reason other than an unreachable store; gives up (undefined) once
 * `stopping()` says the process is shutting down, leaving the run to the lease rules (another worker's sweep).
 */
export async function untilReachable<T>(
  fn: () => Promise<T>,
  opts: { stopping(): boolean; logger: Logger; what: string },
): Promise<T | undefined> {
  for (let delay = FIRST_DELAY_MS, warned = false; ; delay = Math.min(delay * 2, MAX_DELAY_MS)) {
    try {
      return await fn();
    } catch (err) {
      if (!isConnectionError(err)) throw err;
      if (opts.stopping()) return undefined;
      if (!warned) opts.logger.warn({ reason: (err as Error).message }, `${opts.what}: store unreachable; retrying`);
      warned = true;
      await new Promise((r) => setTimeout(r, delay));
    }
  }
}

/**
 * Whether a run's failure came from the store going away rather than from the graph: a driver's disconnect
 * error always does; a plain network error (which the graph's own HTTP calls raise too) only while the store
 * cannot be reached (`probe` fails the same way).
 */
export async function lostToOutage(
  error: { name: string; message: string; code?: string },
  probe: () => Promise<unknown>,
): Promise<boolean> {
  if (isDatabaseDisconnect(error)) return true;
  if (!isConnectionError(error)) return false;
  return probe().then(
    () => false,
    (err: unknown) => isConnectionError(err),
  );
}

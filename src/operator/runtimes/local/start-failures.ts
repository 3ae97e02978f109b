// Which failures to start an agent server pass by themselves (retried with backoff, not the revision's fault), and
// how a pending restart reads as the runtime's server status.
import { isConnectionError } from '../../../lib/connections.ts';
import type { ServerStatus } from '../types.ts';
import type { RestartInfo } from './supervisor.ts';

/**
 * What an agent server prints, or a start throws, when its database is unreachable or shutting down, or when the
 * port picked for it was taken between the pick and the listen, or when the server it replaces (killed with its
 * host) has not yet ended and still holds the data folder's lock.
 */
const TRANSIENT_OUTPUT =
  /ECONNREFUSED|ECONNRESET|EADDRINUSE|57P0[123]|the database system is (?:starting up|shutting down|in recovery mode)|Connection terminated|terminating connection due to administrator command|database not reachable|data folder \S+ is in use by agentplane agent-server/i;

/** A start failure (the error a start threw, or the last words of a server that ended) worth retrying. */
export function isTransientStart(failure: unknown): boolean {
  if (typeof failure === 'string') return TRANSIENT_OUTPUT.test(failure);
  if (isConnectionError(failure)) return true;
  const code = (failure as { code?: unknown } | null)?.code;
  return code === 'EADDRINUSE';
}

export function restartStatus(info: RestartInfo): ServerStatus {
  // No countdown in the text: a status message that changed every second would be written every second.
  return {
    phase: 'Starting',
    trouble: {
      reason: info.reason,
      message: `${info.message}; starting it again with backoff (${info.failures} failure${info.failures === 1 ? '' : 's'} in a row)`,
      restarts: info.failures,
    },
  };
}

// Which failures to start an agent server pass by themselves (retried with backoff, not the revision's fault), and
// how a pending restart reads as the runtime's server status.
import { isConnectionError } from '../../../lib/connection-errors.ts';
import type { ServerStatus } from '../types.ts';
import type { RestartInfo } from './supervisor.ts';

/**
 * A start failure worth retrying: an error the runtime's own code threw while it made the server's database (its
 * Postgres unreachable or shutting down) or its port. What a server printed before it ended is never one: a tenant
 * could print "ECONNREFUSED" and be retried forever, never failed; servers.ts asks Postgres itself instead, and
 * checks itself whether the server it replaces still holds the data folder's lock.
 */
export function isTransientStart(failure: unknown): boolean {
  if (typeof failure === 'string') return false;
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

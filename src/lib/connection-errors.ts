// Which errors mean a database or Redis is not there (yet) or went away: pure checks on error codes and messages,
// apart from connections.ts so that code which only classifies errors (the agent server's engine and start, the
// HTTP error mapping) does not load the pg and ioredis drivers.

/**
 * Runs `fn` again, with backoff, while it fails because the database or Redis is unreachable, for at most
 * `maxWaitMs`; then, or on any other error, it throws. Only for idempotent work (an upsert, a read).
 */
export async function retryWhileUnreachable<T>(fn: () => Promise<T>, maxWaitMs: number): Promise<T> {
  const end = Date.now() + maxWaitMs;
  for (let delay = 250; ; delay = Math.min(delay * 2, 2_000)) {
    try {
      return await fn();
    } catch (err) {
      if (!isConnectionError(err) || Date.now() + delay > end) throw err;
      await new Promise((r) => setTimeout(r, delay));
    }
  }
}

/** Socket-level codes: the peer is not there (yet), went away, or the network dropped us. */
const NETWORK_CODES = new Set([
  'ECONNREFUSED',
  'ECONNRESET',
  'ECONNABORTED',
  'ENOTFOUND',
  'EAI_AGAIN',
  'ETIMEDOUT',
  'EHOSTUNREACH',
  'ENETUNREACH',
  'EPIPE',
]);

/**
 * SQLSTATEs of a server that is going away or not there yet: 57P01 admin shutdown (a restart), 57P02 crash
 * shutdown, 57P03 cannot connect now (starting up, recovering), 53300 too many connections, and class 08
 * (connection exceptions). A failover's read-only standby answers 25006 to a write until it is promoted.
 */
const SERVER_GOING_AWAY = new Set(['57P01', '57P02', '57P03', '53300', '25006']);

/** What node-postgres and ioredis say, without a code, when a connection ended under a query or command. */
const DROPPED =
  /Connection terminated|connection error and is not queryable|Client was closed and is not queryable|Connection is closed|timeout exceeded when trying to connect|Reached the max retries per request limit|Stream isn't writeable|MaxRetriesPerRequestError/i;

/** Errors only a database driver raises: the server went away or the connection broke under a statement. */
export function isDatabaseDisconnect(err: unknown): boolean {
  const e = err as { code?: unknown; message?: unknown } | null;
  if (!e || typeof e !== 'object') return false;
  if (typeof e.code === 'string' && (SERVER_GOING_AWAY.has(e.code) || /^08[0-9A-Z]{3}$/.test(e.code))) return true;
  return typeof e.message === 'string' && DROPPED.test(e.message);
}

/**
 * True when `err` says a database or Redis connection could not be made or was lost: the request may succeed if
 * retried once the dependency is back (503), unlike a refusal (bad password, missing database, a bad query).
 */
export function isConnectionError(err: unknown, depth = 0): boolean {
  if (!err || typeof err !== 'object' || depth > 4) return false;
  const e = err as { code?: unknown; message?: unknown; errors?: unknown; cause?: unknown; name?: unknown };
  if (typeof e.code === 'string') {
    if (NETWORK_CODES.has(e.code) || SERVER_GOING_AWAY.has(e.code) || /^08[0-9A-Z]{3}$/.test(e.code)) return true;
  }
  if (e.name === 'MaxRetriesPerRequestError') return true;
  if (typeof e.message === 'string' && DROPPED.test(e.message)) return true;
  // pg reports an AggregateError when every address of a host refused.
  if (Array.isArray(e.errors) && e.errors.length > 0 && e.errors.every((x) => isConnectionError(x, depth + 1)))
    return true;
  return e.cause !== undefined && isConnectionError(e.cause, depth + 1);
}

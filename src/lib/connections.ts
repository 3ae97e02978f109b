// The only places that open PostgreSQL pools and clients and Redis clients (ESLint's no-restricted-syntax points
// here). A pool, client or Redis connection without an 'error' listener turns a database restart into an
// unhandled 'error' event, which ends the process; these factories attach one before anything can fail. The
// connection-class errors they and their callers see are told apart from refusals by isConnectionError.
import { Redis, type RedisOptions } from 'ioredis';
import pg from 'pg';
import type { Logger } from './logger.ts';

type OnError = (err: Error) => void;

const quiet: OnError = () => undefined;

/**
 * Error listeners on a pool and on every client it makes: an idle client's failure is the pool's 'error' event;
 * a checked-out client between two queries (inside a transaction) emits its own, and its next query then fails,
 * so its holder releases it with the error and the pool discards it. Also for pools a library made itself.
 */
export function guardPgPool(pool: pg.Pool, onError: OnError = quiet): pg.Pool {
  pool.on('error', onError);
  pool.on('connect', (client) => client.on('error', onError));
  return pool;
}

export function newPgPool(config: pg.PoolConfig, onError: OnError = quiet): pg.Pool {
  return guardPgPool(new pg.Pool(config), onError);
}

export function newPgClient(config: pg.ClientConfig, onError: OnError = quiet): pg.Client {
  const client = new pg.Client(config);
  client.on('error', onError);
  return client;
}

export function newRedis(url: string, options: RedisOptions, onError: OnError = quiet): Redis {
  const redis = new Redis(url, options);
  redis.on('error', onError);
  return redis;
}

/** A second connection to the same Redis (ioredis' duplicate()), with its own error listener. */
export function duplicateRedis(redis: Redis, onError: OnError = quiet): Redis {
  const copy = redis.duplicate();
  copy.on('error', onError);
  return copy;
}

/** A logger's warn as an error listener, at most once per `everyMs` (a restart makes every pooled client fail). */
export function warnEvery(logger: Logger | undefined, msg: string, everyMs = 5_000): OnError {
  let last = 0;
  return (err) => {
    const now = Date.now();
    if (!logger || now - last < everyMs) return;
    last = now;
    logger.warn({ reason: err.message, code: (err as { code?: unknown }).code }, msg);
  };
}

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

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

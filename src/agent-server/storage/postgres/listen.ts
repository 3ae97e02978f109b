// A dedicated connection for LISTEN that comes back by itself: when it drops (a restart, a failover, a network
// cut) it is opened again with backoff until it succeeds or the store closes, and `onConnected` runs after each
// (re)connect so the caller can look again at what it may have missed meanwhile.
import type pg from 'pg';
import { newPgClient } from '../../../lib/connections.ts';
import type { Logger } from '../../../lib/logger.ts';

export interface ListenOptions {
  databaseUrl: string;
  channel: string;
  logger?: Logger;
  /** Names the connection in log lines. */
  what: string;
  onNotification(msg: pg.Notification): void;
  onConnected(): void;
}

const FIRST_DELAY_MS = 250;
const MAX_DELAY_MS = 5_000;

/** Connects once (a failure here is the caller's: start-up waits and retries as a whole), then keeps it up. */
export async function keepListening(opts: ListenOptions): Promise<{ close(): Promise<void> }> {
  let client: pg.Client | null = null;
  let closed = false;
  let timer: NodeJS.Timeout | undefined;
  let delay = FIRST_DELAY_MS;

  const open = async (): Promise<void> => {
    // Errors while connecting are the caller's (open() rejects); only a connection that was up retries itself.
    let lost = true;
    const c = newPgClient({ connectionString: opts.databaseUrl }, (err) => {
      if (lost) return;
      lost = true;
      if (client === c) client = null;
      opts.logger?.warn({ reason: err.message }, `postgres LISTEN connection (${opts.what}) lost; reconnecting`);
      c.end().catch(() => undefined);
      retry();
    });
    c.on('notification', (msg) => opts.onNotification(msg));
    // A server that closes the socket without an error message (kill -9, a proxy) ends the client quietly.
    c.on('end', () => {
      if (lost || closed) return;
      lost = true;
      if (client === c) client = null;
      opts.logger?.warn(`postgres LISTEN connection (${opts.what}) ended; reconnecting`);
      retry();
    });
    try {
      await c.connect();
      await c.query(`LISTEN ${opts.channel}`);
    } catch (err) {
      await c.end().catch(() => undefined);
      throw err;
    }
    if (closed) {
      await c.end().catch(() => undefined);
      return;
    }
    lost = false;
    client = c;
    delay = FIRST_DELAY_MS;
    opts.onConnected();
  };

  const retry = (): void => {
    if (closed) return;
    clearTimeout(timer);
    timer = setTimeout(() => {
      open().catch((err: Error) => {
        delay = Math.min(delay * 2, MAX_DELAY_MS);
        opts.logger?.debug({ reason: err.message, retry_in_ms: delay }, `postgres LISTEN (${opts.what}) not back yet`);
        retry();
      });
    }, delay);
    timer.unref();
  };

  await open();
  return {
    async close() {
      closed = true;
      clearTimeout(timer);
      await client?.end().catch(() => undefined);
    },
  };
}

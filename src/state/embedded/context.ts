// What the embedded state's aggregates share: the SQLite connection, the write transaction that hands committed
// changes to watchers (the change feed), and the key that seals secret values and integration tokens.
import { EventEmitter } from 'node:events';
import { join } from 'node:path';
import type Database from 'better-sqlite3';
import { ResourceExpiredError } from '../errors.ts';
import type { AnyResource, Kind, WatchEventType } from '../resources.ts';
import { KEY_FILE, SecretKeyError, open as openSealed, readKeyFile, seal } from './secret-box.ts';

export type Change = { rv: number; kind: Kind; namespace: string; type: WatchEventType; obj: AnyResource };

/** A value sealed with the store's key when the key is first used: tells a wrong key at once. */
export const KEY_CHECK = 'secret_key_check';
export const KEY_CHECK_TEXT = 'agentplane secret key check';

export type EmbeddedContext = {
  readonly db: Database.Database;
  /** The namespace of objects written without one. */
  readonly namespace: string;
  /** Changes as they are published: a Change, or a ResourceExpiredError when watchers fell behind the history. */
  readonly events: EventEmitter;
  /** Runs `fn` in a transaction and publishes its changes only after it committed. */
  write<T>(fn: () => T): T;
  changesSince(rv: number): Change[];
  counter(name: string): number;
  /** Starts looking for changes written by other processes sharing the file (once; stopped by close). */
  startPolling(): void;
  /** The key of secret values: given, or read (made on first use) from the key file; checked once per process. */
  secretKey(): Buffer;
  close(): void;
};

export function openContext(
  db: Database.Database,
  namespace: string,
  pollMs: number,
  keys: { given?: Buffer; dir?: string },
): EmbeddedContext {
  const events = new EventEmitter();
  events.setMaxListeners(0);
  const counter = (name: string): number =>
    (db.prepare('SELECT value FROM counters WHERE name = ?').get(name) as { value: number }).value;
  /** Last resourceVersion handed to watchers. */
  let published = counter('rv');
  let poller: NodeJS.Timeout | undefined;
  let key: Buffer | undefined;

  const changesSince = (rv: number): Change[] => {
    const rows = db.prepare('SELECT * FROM changes WHERE rv > ? ORDER BY rv').all(rv) as {
      rv: number;
      kind: Kind;
      namespace: string;
      type: WatchEventType;
      json: string;
    }[];
    return rows.map((r) => ({
      rv: r.rv,
      kind: r.kind,
      namespace: r.namespace,
      type: r.type,
      obj: JSON.parse(r.json) as AnyResource,
    }));
  };

  /**
   * Sends watchers every change after the last one published, in resourceVersion order: this process's writes
   * right after they commit, other processes' writes (e.g. `api-key create`, a separate operator) when polled.
   */
  const publish = (): void => {
    if (events.listenerCount('change') === 0) {
      published = counter('rv');
      return;
    }
    if (counter('compacted') > published) {
      published = counter('rv');
      events.emit('change', new ResourceExpiredError('watch fell behind the kept history'));
      return;
    }
    for (const c of changesSince(published)) {
      published = c.rv;
      events.emit('change', c);
    }
  };

  return {
    db,
    namespace,
    events,
    write<T>(fn: () => T): T {
      // IMMEDIATE: take the write lock before the first read, so a check-then-write is atomic across processes
      // sharing the file (a deferred transaction would fail with SQLITE_BUSY when another process wrote in between).
      const result = db.transaction(fn).immediate();
      publish();
      return result;
    },
    changesSince,
    counter,
    startPolling() {
      if (poller || pollMs <= 0) return;
      poller = setInterval(() => {
        try {
          publish();
        } catch {
          // closed database: close() stops the poller
        }
      }, pollMs);
      poller.unref();
    },
    secretKey() {
      if (key) return key;
      const check = db.prepare('SELECT value FROM meta WHERE name = ?').get(KEY_CHECK) as { value: string } | undefined;
      const file = keys.dir ? join(keys.dir, KEY_FILE) : undefined;
      const found = keys.given ?? (keys.dir ? readKeyFile(keys.dir, !check) : undefined);
      if (!found) {
        throw new SecretKeyError(
          `the secret values in this store are encrypted, but there is no key: set AGENTPLANE_SECRET_KEY (--secret-key) or restore ${file}`,
        );
      }
      if (check) {
        try {
          openSealed(found, check.value, KEY_CHECK);
        } catch {
          const which = keys.given ? 'AGENTPLANE_SECRET_KEY (--secret-key)' : file;
          throw new SecretKeyError(`${which} is not the key the secret values in this store were encrypted with`);
        }
      } else {
        db.prepare('INSERT OR IGNORE INTO meta (name, value) VALUES (?, ?)').run(
          KEY_CHECK,
          seal(found, KEY_CHECK_TEXT, KEY_CHECK),
        );
        // Another process may have written its check first: ours must match it.
        const stored = (db.prepare('SELECT value FROM meta WHERE name = ?').get(KEY_CHECK) as { value: string }).value;
        openSealed(found, stored, KEY_CHECK);
      }
      key = found;
      return found;
    },
    close() {
      clearInterval(poller);
      events.removeAllListeners();
      db.close();
    },
  };
}

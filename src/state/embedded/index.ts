// Embedded platform state: one SQLite file (better-sqlite3, WAL). Every write is one transaction, so nothing is
// half-written; watches follow a change log (resources.ts). Secret values and integration tokens are encrypted at
// rest (secret-box.ts). Each aggregate is a small factory over the shared context (context.ts).
import { join } from 'node:path';
import { randomBytes } from 'node:crypto';
import { privateDir, privateFile } from '../../lib/private-files.ts';
import Database from 'better-sqlite3';
import { migrateSqlite } from '../../lib/migrations.ts';
import { enableWal } from '../../lib/sqlite-wal.ts';
import type { PlatformState } from '../types.ts';
import { embeddedApiKeys } from './api-keys.ts';
import { embeddedAuthObjects } from './auth-objects.ts';
import { embeddedClaims } from './claims.ts';
import { openContext } from './context.ts';
import { embeddedIntegrations } from './integrations.ts';
import { embeddedListeners } from './listeners.ts';
import { PLATFORM_STATE_MIGRATIONS } from './migrations.ts';
import { embeddedResources } from './resources.ts';
import { embeddedRevisionLogs } from './revision-logs.ts';
import { embeddedSecrets, prepareSecrets } from './secrets.ts';
import { KEY_FILE } from './secret-box.ts';

export type EmbeddedPlatformStateOptions = {
  /** Directory of the database file (created if missing). ':memory:' keeps everything in memory. */
  dataDir: string;
  namespace?: string;
  /** Changes kept for watch resumption. */
  historyLimit?: number;
  /** How often watchers look for changes written by other processes sharing the file. */
  pollMs?: number;
  /** AES-256 key of secret values (AGENTPLANE_SECRET_KEY); without it `<dataDir>/secret.key`, made on first use. */
  secretKey?: Buffer;
};

/** The SQLite file of the embedded platform state kept in `dataDir`. */
export const embeddedStateFile = (dataDir: string) => join(dataDir, 'control-plane.db');

export function openEmbeddedPlatformState(opts: EmbeddedPlatformStateOptions): PlatformState {
  let file = ':memory:';
  if (opts.dataDir !== ':memory:') {
    privateDir(opts.dataDir);
    file = embeddedStateFile(opts.dataDir);
    // The database, SQLite's files beside it and the key that seals its secrets.
    privateFile(file, [`${file}-wal`, `${file}-shm`, join(opts.dataDir, KEY_FILE)]);
  }
  const db = new Database(file);
  // Waits for the lock rather than failing when another process opens or migrates the file at the same moment.
  db.pragma('busy_timeout = 5000');
  enableWal(db);
  // Freed pages are zeroed, so a value rewritten as ciphertext leaves no plaintext behind in the file.
  db.pragma('secure_delete = ON');
  migrateSqlite(db, PLATFORM_STATE_MIGRATIONS, `the control plane's store ${file}`);
  const keys =
    opts.dataDir === ':memory:'
      ? { given: opts.secretKey ?? randomBytes(32) }
      : { given: opts.secretKey, dir: opts.dataDir };
  const ctx = openContext(db, opts.namespace ?? 'default', opts.pollMs ?? 200, keys);
  try {
    prepareSecrets(ctx);
  } catch (err) {
    db.close();
    throw err;
  }
  return {
    namespace: ctx.namespace,
    ...embeddedResources(ctx, opts.historyLimit ?? 10_000),
    ...embeddedSecrets(ctx),
    ...embeddedApiKeys(ctx),
    ...embeddedIntegrations(ctx),
    ...embeddedAuthObjects(ctx),
    ...embeddedListeners(ctx),
    ...embeddedClaims(ctx),
    ...embeddedRevisionLogs(ctx),
    async close() {
      ctx.close();
    },
  };
}

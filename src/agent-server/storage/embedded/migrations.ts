// The schema steps of the agent server's embedded store (SQLite), applied in order by migrateSqlite
// (../../../lib/migrations.ts) when the store opens. SqliteSaver keeps its checkpoint tables itself (saver.init()).
// Forward-only: a released step is never edited, a change is a new step at the end (docs/development.md).
import type Database from 'better-sqlite3';
import { addSqliteColumn, type Migration } from '../../../lib/migrations.ts';

/**
 * Version 1 is the schema release 0.1 made, which kept no version: a file made by it (or by an earlier build,
 * without the columns added later) is brought in by running this step over it, so every statement leaves what
 * exists alone.
 */
const BASELINE = `
CREATE TABLE IF NOT EXISTS ap_assistants (
  assistant_id TEXT PRIMARY KEY, graph_id TEXT NOT NULL, config TEXT NOT NULL, context TEXT NOT NULL,
  metadata TEXT NOT NULL, name TEXT NOT NULL, description TEXT, version INTEGER NOT NULL,
  created_at TEXT NOT NULL, updated_at TEXT NOT NULL);
CREATE TABLE IF NOT EXISTS ap_threads (
  thread_id TEXT PRIMARY KEY, created_at TEXT NOT NULL, updated_at TEXT NOT NULL, state_updated_at TEXT NOT NULL,
  metadata TEXT NOT NULL, status TEXT NOT NULL, config TEXT NOT NULL, "values" TEXT, interrupts TEXT NOT NULL,
  error TEXT);
CREATE TABLE IF NOT EXISTS ap_runs (
  seq INTEGER PRIMARY KEY AUTOINCREMENT, run_id TEXT NOT NULL UNIQUE, thread_id TEXT NOT NULL,
  assistant_id TEXT NOT NULL, created_at TEXT NOT NULL, updated_at TEXT NOT NULL, metadata TEXT NOT NULL,
  status TEXT NOT NULL, kwargs TEXT NOT NULL, multitask_strategy TEXT NOT NULL, attempt INTEGER NOT NULL DEFAULT 0,
  worker_id TEXT, lease_expires_at INTEGER, cancel_action TEXT, error TEXT);
CREATE TABLE IF NOT EXISTS ap_assistant_versions (
  assistant_id TEXT NOT NULL, version INTEGER NOT NULL, graph_id TEXT NOT NULL, config TEXT NOT NULL,
  context TEXT NOT NULL, metadata TEXT NOT NULL, name TEXT NOT NULL, description TEXT, created_at TEXT NOT NULL,
  PRIMARY KEY (assistant_id, version));
-- Assistants made before versions were kept get their current state as a version.
INSERT OR IGNORE INTO ap_assistant_versions SELECT assistant_id, version, graph_id, config, context, metadata, name,
  description, updated_at FROM ap_assistants;
CREATE INDEX IF NOT EXISTS ap_runs_thread ON ap_runs (thread_id, status);
CREATE INDEX IF NOT EXISTS ap_runs_status ON ap_runs (status, seq);

CREATE TABLE IF NOT EXISTS ap_store_items (
  namespace TEXT NOT NULL, key TEXT NOT NULL, value TEXT NOT NULL, created_at TEXT NOT NULL, updated_at TEXT NOT NULL,
  expires_at INTEGER, ttl_minutes REAL, PRIMARY KEY (namespace, key));
CREATE INDEX IF NOT EXISTS ap_store_items_expiry ON ap_store_items (expires_at) WHERE expires_at IS NOT NULL;
CREATE TABLE IF NOT EXISTS ap_store_vectors (
  namespace TEXT NOT NULL, key TEXT NOT NULL, field TEXT NOT NULL, embedding TEXT NOT NULL,
  PRIMARY KEY (namespace, key, field));

CREATE TABLE IF NOT EXISTS ap_crons (
  cron_id TEXT PRIMARY KEY, assistant_id TEXT NOT NULL, thread_id TEXT, on_run_completed TEXT, end_time TEXT,
  schedule TEXT NOT NULL, timezone TEXT, created_at TEXT NOT NULL, updated_at TEXT NOT NULL, payload TEXT NOT NULL,
  user_id TEXT, next_ms INTEGER, metadata TEXT NOT NULL, owner_metadata TEXT NOT NULL, owner_auth TEXT,
  enabled INTEGER NOT NULL);
CREATE INDEX IF NOT EXISTS ap_crons_due ON ap_crons (next_ms) WHERE enabled = 1;
`;

function baseline(db: Database.Database): void {
  db.exec(BASELINE);
  // Files made before after_seconds support lack the column.
  addSqliteColumn(db, 'ap_runs', 'not_before', 'INTEGER');
  // Thread TTL (thread-ttl.ts): minutes, counted from updated_at; what expiry does (NULL: "delete") and the
  // updated_at a keep_latest sweep last pruned. Files made before lack them.
  addSqliteColumn(db, 'ap_threads', 'ttl_minutes', 'REAL');
  addSqliteColumn(db, 'ap_threads', 'ttl_strategy', 'TEXT');
  addSqliteColumn(db, 'ap_threads', 'ttl_pruned_updated_at', 'TEXT');
  db.exec('CREATE INDEX IF NOT EXISTS ap_threads_ttl ON ap_threads (updated_at) WHERE ttl_minutes IS NOT NULL');
}

export const AGENT_SERVER_SQLITE_MIGRATIONS: readonly Migration<Database.Database>[] = [
  { version: 1, name: 'baseline: the schema of release 0.1', up: baseline },
  {
    version: 2,
    name: "runs.cancel_reason: why a run was cancelled (the SDK's runs.cancel reason)",
    up: (db) => addSqliteColumn(db, 'ap_runs', 'cancel_reason', 'TEXT'),
  },
];

// The schema steps of the control plane's embedded store (SQLite), applied in order by migrateSqlite
// (../../lib/migrations.ts) when the store opens. Forward-only: a released step is never edited, a change is a
// new step at the end. docs/development.md ("Schema migrations") says how to add one.
import type Database from 'better-sqlite3';
import { addSqliteColumn, type Migration } from '../../lib/migrations.ts';
import { customUrlHost } from '../../resources/index.ts';

/**
 * Version 1 is the schema release 0.1 made, which kept no version: a file made by it (or by an earlier build,
 * without the columns added later) is brought in by running this step over it, so every statement is one that
 * leaves what exists alone.
 */
const BASELINE = `
CREATE TABLE IF NOT EXISTS objects (
  kind TEXT NOT NULL, namespace TEXT NOT NULL, name TEXT NOT NULL, uid TEXT NOT NULL UNIQUE,
  rv INTEGER NOT NULL, json TEXT NOT NULL, PRIMARY KEY (kind, namespace, name));
CREATE TABLE IF NOT EXISTS owners (owner_uid TEXT NOT NULL, kind TEXT NOT NULL, namespace TEXT NOT NULL,
  name TEXT NOT NULL, PRIMARY KEY (owner_uid, kind, namespace, name));
CREATE TABLE IF NOT EXISTS changes (rv INTEGER PRIMARY KEY, kind TEXT NOT NULL, namespace TEXT NOT NULL,
  type TEXT NOT NULL, json TEXT NOT NULL);
CREATE TABLE IF NOT EXISTS counters (name TEXT PRIMARY KEY, value INTEGER NOT NULL);
INSERT OR IGNORE INTO counters VALUES ('rv', 0), ('compacted', 0);
CREATE TABLE IF NOT EXISTS secrets (namespace TEXT NOT NULL, name TEXT NOT NULL, owner_uid TEXT NOT NULL,
  data TEXT NOT NULL, PRIMARY KEY (namespace, name));
CREATE TABLE IF NOT EXISTS api_keys (id TEXT PRIMARY KEY, hash TEXT NOT NULL UNIQUE, name TEXT NOT NULL,
  tenants TEXT NOT NULL, created_at TEXT NOT NULL);
CREATE TABLE IF NOT EXISTS revision_logs (id INTEGER PRIMARY KEY AUTOINCREMENT, namespace TEXT NOT NULL,
  revision TEXT NOT NULL, type TEXT NOT NULL, ts TEXT NOT NULL, message TEXT NOT NULL);
CREATE INDEX IF NOT EXISTS revision_logs_by_rev ON revision_logs (namespace, revision, type, id);
CREATE TABLE IF NOT EXISTS name_claims (namespace TEXT NOT NULL, claim TEXT NOT NULL, tenant TEXT NOT NULL,
  name TEXT NOT NULL, owner_name TEXT NOT NULL, owner_uid TEXT NOT NULL, PRIMARY KEY (namespace, claim));
CREATE INDEX IF NOT EXISTS name_claims_by_owner ON name_claims (owner_uid);
CREATE TABLE IF NOT EXISTS host_claims (namespace TEXT NOT NULL, host TEXT NOT NULL, owner_name TEXT NOT NULL,
  owner_uid TEXT NOT NULL, PRIMARY KEY (namespace, host));
CREATE INDEX IF NOT EXISTS host_claims_by_owner ON host_claims (owner_uid);
CREATE TABLE IF NOT EXISTS integrations (id TEXT PRIMARY KEY, tenant TEXT NOT NULL, name TEXT NOT NULL,
  host TEXT NOT NULL, username TEXT, created_at TEXT NOT NULL, token TEXT NOT NULL);
CREATE INDEX IF NOT EXISTS integrations_by_tenant ON integrations (tenant);
CREATE TABLE IF NOT EXISTS meta (name TEXT PRIMARY KEY, value TEXT NOT NULL);
CREATE TABLE IF NOT EXISTS listeners (id TEXT PRIMARY KEY, tenant TEXT NOT NULL, compute_id TEXT NOT NULL,
  json TEXT NOT NULL, UNIQUE (tenant, compute_id));
CREATE TABLE IF NOT EXISTS auth_objects (kind TEXT NOT NULL, name TEXT NOT NULL, tenant TEXT NOT NULL,
  record TEXT NOT NULL, sealed TEXT NOT NULL, version INTEGER NOT NULL, PRIMARY KEY (kind, name));
CREATE INDEX IF NOT EXISTS auth_objects_by_tenant ON auth_objects (kind, tenant);
`;

function baseline(db: Database.Database): void {
  db.exec(BASELINE);
  // Secret rows written before encryption carry enc = 0 (plaintext JSON).
  addSqliteColumn(db, 'secrets', 'enc', 'INTEGER NOT NULL DEFAULT 0');
  // Listener keys (Listeners v2) name their listener; keys written before have none.
  addSqliteColumn(db, 'api_keys', 'listener_id', 'TEXT');
  // Integrations written before GitHub App and SSH integrations have no details (plain HTTPS token).
  addSqliteColumn(db, 'integrations', 'details', 'TEXT');
  addSqliteColumn(db, 'integrations', 'installation_id', 'INTEGER');
  // One GitHub App installation belongs to at most one workspace.
  db.exec(
    'CREATE UNIQUE INDEX IF NOT EXISTS integrations_by_installation ON integrations (installation_id) WHERE installation_id IS NOT NULL',
  );
}

/**
 * Deployments written before host claims existed hold their custom host without a claim; release 0.1 looked through
 * every tenant's deployments on each create and patch to find them. They get their claim once, here; when two of
 * them name the same host the older one keeps it.
 */
function claimHostsOfOlderDeployments(db: Database.Database): void {
  const rows = db
    .prepare("SELECT namespace, name, uid, json FROM objects WHERE kind = 'AgentDeployment' ORDER BY rv")
    .all() as { namespace: string; name: string; uid: string; json: string }[];
  const live = new Set<string>();
  const wanted: { namespace: string; host: string; name: string; uid: string }[] = [];
  for (const row of rows) {
    const dep = JSON.parse(row.json) as {
      metadata: { deletionTimestamp?: string };
      spec?: { sourceConfig?: { customUrl?: string | null } };
    };
    if (dep.metadata.deletionTimestamp) continue;
    live.add(row.uid);
    const url = dep.spec?.sourceConfig?.customUrl;
    const parsed = url ? customUrlHost(url) : undefined;
    if (parsed && 'host' in parsed)
      wanted.push({ namespace: row.namespace, host: parsed.host, name: row.name, uid: row.uid });
  }
  const holder = db.prepare('SELECT owner_uid FROM host_claims WHERE namespace = ? AND host = ?');
  const claim = db.prepare(
    'INSERT OR REPLACE INTO host_claims (namespace, host, owner_name, owner_uid) VALUES (?, ?, ?, ?)',
  );
  for (const w of wanted) {
    const held = holder.get(w.namespace, w.host) as { owner_uid: string } | undefined;
    // A claim whose deployment is gone is stale (claimHost takes those over too).
    if (!held || !live.has(held.owner_uid)) claim.run(w.namespace, w.host, w.name, w.uid);
  }
}

export const PLATFORM_STATE_MIGRATIONS: readonly Migration<Database.Database>[] = [
  { version: 1, name: 'baseline: the schema of release 0.1', up: baseline },
  { version: 2, name: 'host claims for deployments written before host claims', up: claimHostsOfOlderDeployments },
];

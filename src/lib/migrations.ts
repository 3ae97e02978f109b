// Numbered, forward-only schema migrations. Each database keeps the steps it has applied in a table of its own
// (schema_migrations: version, name, applied_at); a step runs at most once, in order, inside the same transaction
// as the record of it. The stores list their steps (…/migrations.ts); this module checks a list and decides which
// steps a database still needs. The SQLite runner is here too (two stores share it); the Postgres one lives beside
// the only Postgres store.
import type Database from 'better-sqlite3';

export type Migration<Db, Result = void> = {
  /** 1, 2, 3, … without gaps. */
  version: number;
  /** What the step does, recorded with it. */
  name: string;
  /** Runs inside the migration transaction; steps that can meet a database made before versions were kept are
   * written so that running them on it is harmless (IF NOT EXISTS, columns added only when missing). */
  up(db: Db): Result;
};

export type MigrationResult = { from: number; to: number; applied: number[] };

/** The record of applied steps, as SQL both SQLite and PostgreSQL accept (`table` may carry a schema). */
export const versionTableSql = (table: string) =>
  `CREATE TABLE IF NOT EXISTS ${table} (version INTEGER PRIMARY KEY, name TEXT NOT NULL, applied_at TEXT NOT NULL)`;

/** Throws unless the steps are numbered 1..n in order. */
export function checkMigrations(migrations: readonly { version: number; name: string }[]): void {
  migrations.forEach((m, i) => {
    if (m.version !== i + 1) {
      throw new Error(`migration "${m.name}" has version ${m.version}; expected ${i + 1} (steps are numbered 1..n)`);
    }
  });
}

/**
 * The steps a database at `current` needs to reach `target` (default: the newest). A database newer than this code
 * knows is refused: an older release must not run against a schema it does not understand.
 */
export function pendingMigrations<M extends { version: number }>(
  migrations: readonly M[],
  current: number,
  what: string,
  target = migrations.length,
): M[] {
  if (current > migrations.length) {
    throw new Error(
      `${what} is at schema version ${current}, newer than this release knows (${migrations.length}): run a newer agentplane`,
    );
  }
  if (!Number.isInteger(target) || target < 0 || target > migrations.length) {
    throw new Error(`no schema version ${target} for ${what} (versions 1..${migrations.length})`);
  }
  return migrations.slice(current, Math.max(current, target));
}

/**
 * Brings the SQLite database up to date (or to `target`) in one IMMEDIATE transaction: the write lock is taken
 * before the version is read, so of several processes opening the file at once one applies the steps and the others
 * wait (busy_timeout, set here when the connection has none) and then find nothing to do.
 */
export function migrateSqlite(
  db: Database.Database,
  migrations: readonly Migration<Database.Database>[],
  what: string,
  target?: number,
): MigrationResult {
  checkMigrations(migrations);
  if (!(db.pragma('busy_timeout', { simple: true }) as number)) db.pragma('busy_timeout = 10000');
  const run = db.transaction((): MigrationResult => {
    db.exec(versionTableSql('schema_migrations'));
    const current = sqliteSchemaVersion(db);
    const steps = pendingMigrations(migrations, current, what, target);
    const record = db.prepare('INSERT INTO schema_migrations (version, name, applied_at) VALUES (?, ?, ?)');
    for (const step of steps) {
      step.up(db);
      record.run(step.version, step.name, new Date().toISOString());
    }
    return { from: current, to: steps.at(-1)?.version ?? current, applied: steps.map((s) => s.version) };
  });
  return run.immediate();
}

/** The newest step applied to the SQLite database (0: none, or no record of steps at all). */
export function sqliteSchemaVersion(db: Database.Database): number {
  const table = db.prepare("SELECT 1 FROM sqlite_master WHERE type = 'table' AND name = 'schema_migrations'").get();
  if (!table) return 0;
  const row = db.prepare('SELECT max(version) AS v FROM schema_migrations').get() as { v: number | null };
  return row.v ?? 0;
}

/** Adds a column unless the table has it (SQLite has no ADD COLUMN IF NOT EXISTS). */
export function addSqliteColumn(db: Database.Database, table: string, column: string, type: string): void {
  const columns = db.prepare(`PRAGMA table_info(${table})`).all() as { name: string }[];
  if (!columns.some((c) => c.name === column)) db.exec(`ALTER TABLE ${table} ADD COLUMN ${column} ${type}`);
}

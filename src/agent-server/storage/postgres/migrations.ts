// The schema steps of the agent server's Postgres store, applied in order when the store opens, each in the one
// transaction that also records it in <schema>.schema_migrations, under a transaction-scoped advisory lock: of
// several processes starting at once one applies the steps and the others wait, then find nothing to do.
// PostgresSaver and PostgresStore keep their own tables and versions (setup()). Forward-only: a released step is
// never edited, a change is a new step at the end (docs/development.md, "Schema migrations").
import type pg from 'pg';
import {
  checkMigrations,
  pendingMigrations,
  versionTableSql,
  type Migration,
  type MigrationResult,
} from '../../../lib/migrations.ts';

/** What a step works on: one connection, inside the migration transaction, and the store's schema. */
export type PgMigrationTarget = { client: pg.ClientBase; schema: string };

// Arbitrary constant shared by every agent-server process (the same as the store's start-up lock).
export const MIGRATION_LOCK = 7_316_284_551;

/**
 * Version 1 is the schema release 0.1 made, which kept no version: a database made by it (or by an earlier build,
 * without the columns added later: ADD COLUMN IF NOT EXISTS) is brought in by running this step over it.
 */
const baselineSql = (s: string) => `
CREATE SCHEMA IF NOT EXISTS ${s};
CREATE TABLE IF NOT EXISTS ${s}.assistants (
  assistant_id uuid PRIMARY KEY, graph_id text NOT NULL, config jsonb NOT NULL, context jsonb NOT NULL,
  metadata jsonb NOT NULL, name text NOT NULL, description text, version integer NOT NULL,
  created_at timestamptz NOT NULL DEFAULT now(), updated_at timestamptz NOT NULL DEFAULT now());
CREATE TABLE IF NOT EXISTS ${s}.threads (
  thread_id uuid PRIMARY KEY, created_at timestamptz NOT NULL DEFAULT now(),
  updated_at timestamptz NOT NULL DEFAULT now(), state_updated_at timestamptz NOT NULL DEFAULT now(),
  metadata jsonb NOT NULL, status text NOT NULL DEFAULT 'idle', config jsonb NOT NULL DEFAULT '{}',
  "values" jsonb, interrupts jsonb NOT NULL DEFAULT '{}', error jsonb);
CREATE TABLE IF NOT EXISTS ${s}.runs (
  seq bigserial UNIQUE, run_id uuid PRIMARY KEY, thread_id uuid NOT NULL, assistant_id uuid NOT NULL,
  created_at timestamptz NOT NULL DEFAULT now(), updated_at timestamptz NOT NULL DEFAULT now(),
  metadata jsonb NOT NULL, status text NOT NULL, kwargs jsonb NOT NULL, multitask_strategy text NOT NULL,
  attempt integer NOT NULL DEFAULT 0, worker_id text, lease_expires_at timestamptz, cancel_action text, error jsonb);
ALTER TABLE ${s}.runs ADD COLUMN IF NOT EXISTS not_before timestamptz;
ALTER TABLE ${s}.threads ADD COLUMN IF NOT EXISTS ttl_minutes double precision;
ALTER TABLE ${s}.threads ADD COLUMN IF NOT EXISTS ttl_strategy text;
ALTER TABLE ${s}.threads ADD COLUMN IF NOT EXISTS ttl_pruned_updated_at timestamptz;
CREATE INDEX IF NOT EXISTS threads_ttl ON ${s}.threads (updated_at) WHERE ttl_minutes IS NOT NULL;
CREATE TABLE IF NOT EXISTS ${s}.assistant_versions (
  assistant_id uuid NOT NULL, version integer NOT NULL, graph_id text NOT NULL, config jsonb NOT NULL,
  context jsonb NOT NULL, metadata jsonb NOT NULL, name text NOT NULL, description text,
  created_at timestamptz NOT NULL DEFAULT now(), PRIMARY KEY (assistant_id, version));
INSERT INTO ${s}.assistant_versions SELECT assistant_id, version, graph_id, config, context, metadata, name, description,
  updated_at FROM ${s}.assistants ON CONFLICT DO NOTHING;
CREATE INDEX IF NOT EXISTS runs_thread_status ON ${s}.runs (thread_id, status, seq);
CREATE INDEX IF NOT EXISTS runs_pending ON ${s}.runs (seq) WHERE status = 'pending';
CREATE INDEX IF NOT EXISTS runs_running_lease ON ${s}.runs (lease_expires_at) WHERE status = 'running';

CREATE TABLE IF NOT EXISTS ${s}.crons (
  cron_id uuid PRIMARY KEY, assistant_id uuid NOT NULL, thread_id uuid, on_run_completed text, end_time timestamptz,
  schedule text NOT NULL, timezone text, created_at timestamptz NOT NULL DEFAULT now(),
  updated_at timestamptz NOT NULL DEFAULT now(), payload jsonb NOT NULL, user_id text, next_run_date timestamptz,
  metadata jsonb NOT NULL, owner_metadata jsonb NOT NULL, owner_auth jsonb, enabled boolean NOT NULL);
CREATE INDEX IF NOT EXISTS crons_due ON ${s}.crons (next_run_date) WHERE enabled;

CREATE UNLOGGED TABLE IF NOT EXISTS ${s}.stream_events (
  id bigserial PRIMARY KEY, run_id uuid NOT NULL, thread_id uuid NOT NULL, event text NOT NULL, data text NOT NULL,
  created_at timestamptz NOT NULL DEFAULT now());
CREATE INDEX IF NOT EXISTS stream_events_run ON ${s}.stream_events (run_id, id);
CREATE INDEX IF NOT EXISTS stream_events_thread ON ${s}.stream_events (thread_id, id);
`;

export const POSTGRES_MIGRATIONS: readonly Migration<PgMigrationTarget, Promise<void>>[] = [
  {
    version: 1,
    name: 'baseline: the schema of release 0.1',
    up: async ({ client, schema }) => {
      await client.query(baselineSql(schema));
    },
  },
  {
    version: 2,
    name: "runs.cancel_reason: why a run was cancelled (the SDK's runs.cancel reason)",
    up: async ({ client, schema }) => {
      await client.query(`ALTER TABLE ${schema}.runs ADD COLUMN IF NOT EXISTS cancel_reason text`);
    },
  },
];

/** The newest step applied in `schema` (0: none, or no record of steps). */
export async function postgresSchemaVersion(client: pg.ClientBase, schema: string): Promise<number> {
  const { rows } = await client.query<{ t: string | null }>('SELECT to_regclass($1) AS t', [
    `${schema}.schema_migrations`,
  ]);
  if (!rows[0]?.t) return 0;
  const v = await client.query<{ v: number | null }>(`SELECT max(version) AS v FROM ${schema}.schema_migrations`);
  return v.rows[0]?.v ?? 0;
}

/** Brings `schema` up to date (or to `target`) in one transaction on `client` (a connection of its own). */
export async function migratePostgres(
  client: pg.ClientBase,
  schema: string,
  target?: number,
): Promise<MigrationResult> {
  checkMigrations(POSTGRES_MIGRATIONS);
  await client.query('BEGIN');
  try {
    await client.query('SELECT pg_advisory_xact_lock($1)', [MIGRATION_LOCK]);
    await client.query(`CREATE SCHEMA IF NOT EXISTS ${schema}`);
    await client.query(versionTableSql(`${schema}.schema_migrations`));
    const current = await postgresSchemaVersion(client, schema);
    const steps = pendingMigrations(POSTGRES_MIGRATIONS, current, `the agent server's schema ${schema}`, target);
    for (const step of steps) {
      await step.up({ client, schema });
      await client.query(`INSERT INTO ${schema}.schema_migrations (version, name, applied_at) VALUES ($1, $2, $3)`, [
        step.version,
        step.name,
        new Date().toISOString(),
      ]);
    }
    await client.query('COMMIT');
    return { from: current, to: steps.at(-1)?.version ?? current, applied: steps.map((s) => s.version) };
  } catch (err) {
    await client.query('ROLLBACK').catch(() => undefined);
    throw err;
  }
}

// Uploaded source tarballs in PostgreSQL: the SourceArchiveStore of a cluster, where several control-plane replicas
// take uploads and any of them serves a build's fetch, so nothing may live on one pod's disk (and etcd is not for
// megabytes). Tarballs are rows of 1 MiB chunks keyed by (tenant, sha256): one workspace's hash never finds another's
// bytes. A commit (tarball and record) and a sweep of one workspace each run in one transaction under that
// workspace's advisory lock, so of two replicas one never deletes a tarball the other is recording an upload of.
import { createReadStream } from 'node:fs';
import { mkdtemp } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { Readable } from 'node:stream';
import type pg from 'pg';
import { newPgPool } from '../lib/connections.ts';
import { ConflictError } from '../lib/errors.ts';
import { checkMigrations, pendingMigrations, versionTableSql, type Migration } from '../lib/migrations.ts';
import { SHA256, type ArchiveReferences, type SourceArchiveStore, type StoredUpload } from './source-archives.ts';

const SCHEMA = 'agentplane_sources';
const CHUNK_BYTES = 1024 * 1024;
// Arbitrary constant of this schema's migration lock (the agent servers' is another).
const MIGRATION_LOCK = 7_316_284_552;

const MIGRATIONS: Migration<pg.ClientBase, Promise<unknown>>[] = [
  {
    version: 1,
    name: 'tarballs in chunks, upload claims and records',
    up: (c) =>
      c.query(`
CREATE TABLE ${SCHEMA}.objects (
  tenant text NOT NULL, sha256 text NOT NULL, size bigint NOT NULL, created_at timestamptz NOT NULL DEFAULT now(),
  PRIMARY KEY (tenant, sha256));
CREATE TABLE ${SCHEMA}.chunks (
  tenant text NOT NULL, sha256 text NOT NULL, seq integer NOT NULL, data bytea NOT NULL,
  PRIMARY KEY (tenant, sha256, seq),
  FOREIGN KEY (tenant, sha256) REFERENCES ${SCHEMA}.objects ON DELETE CASCADE);
CREATE TABLE ${SCHEMA}.uploads (
  tenant text NOT NULL, deployment_id text NOT NULL, upload_id text NOT NULL, expires bigint NOT NULL,
  sha256 text, size bigint,
  PRIMARY KEY (tenant, deployment_id, upload_id));`),
  },
];

export type PostgresSourceArchivesOptions = {
  url: string;
  /** Connections kept (default 4: uploads are few, each holds one while its chunks are written). */
  maxConnections?: number;
};

async function migrate(pool: pg.Pool): Promise<void> {
  checkMigrations(MIGRATIONS);
  const client = await pool.connect();
  try {
    await client.query('BEGIN');
    await client.query('SELECT pg_advisory_xact_lock($1)', [MIGRATION_LOCK]);
    await client.query(`CREATE SCHEMA IF NOT EXISTS ${SCHEMA}`);
    await client.query(versionTableSql(`${SCHEMA}.schema_migrations`));
    const { rows } = await client.query<{ v: number | null }>(
      `SELECT max(version) AS v FROM ${SCHEMA}.schema_migrations`,
    );
    for (const step of pendingMigrations(MIGRATIONS, rows[0]?.v ?? 0, `the source archives' schema ${SCHEMA}`)) {
      await step.up(client);
      await client.query(`INSERT INTO ${SCHEMA}.schema_migrations (version, name, applied_at) VALUES ($1, $2, $3)`, [
        step.version,
        step.name,
        new Date().toISOString(),
      ]);
    }
    await client.query('COMMIT');
  } catch (err) {
    await client.query('ROLLBACK').catch(() => undefined);
    throw err;
  } finally {
    client.release();
  }
}

/** Opens (and brings up to date) the store; fails with the database's own reason when it cannot be used. */
export async function openPostgresSourceArchives(opts: PostgresSourceArchivesOptions): Promise<SourceArchiveStore> {
  // An idle connection the server drops must not crash the process.
  const pool = newPgPool({ connectionString: opts.url, max: opts.maxConnections ?? 4 });
  try {
    await migrate(pool);
  } catch (err) {
    await pool.end();
    throw err;
  }
  let tmp: Promise<string> | undefined;

  /** Runs `fn` in one transaction holding the workspace's lock (commits and sweeps of it never interleave). */
  const inWorkspace = async <T>(tenant: string, fn: (c: pg.PoolClient) => Promise<T>): Promise<T> => {
    const client = await pool.connect();
    try {
      await client.query('BEGIN');
      await client.query(`SELECT pg_advisory_xact_lock(hashtext('agentplane-sources'), hashtext($1))`, [tenant]);
      const result = await fn(client);
      await client.query('COMMIT');
      return result;
    } catch (err) {
      await client.query('ROLLBACK').catch(() => undefined);
      throw err;
    } finally {
      client.release();
    }
  };

  return {
    tmpDir() {
      tmp ??= mkdtemp(join(tmpdir(), 'agentplane-uploads-'));
      return tmp;
    },

    async claim(tenant, deploymentId, uploadId, expires) {
      const { rowCount } = await pool.query(
        `INSERT INTO ${SCHEMA}.uploads (tenant, deployment_id, upload_id, expires) VALUES ($1, $2, $3, $4)
         ON CONFLICT DO NOTHING`,
        [tenant, deploymentId, uploadId, expires],
      );
      if (!rowCount)
        throw new ConflictError('This upload URL was already used: ask for a new one (POST .../upload-url).');
    },

    async commit(tenant, deploymentId, uploadId, tmpFile, sha256, size, expires) {
      if (!SHA256.test(sha256)) throw new Error('invalid sha256');
      await inWorkspace(tenant, async (c) => {
        // Same hash, same bytes: a tarball already stored stays, this copy is not written again.
        const inserted = await c.query(
          `INSERT INTO ${SCHEMA}.objects (tenant, sha256, size) VALUES ($1, $2, $3) ON CONFLICT DO NOTHING`,
          [tenant, sha256, size],
        );
        if (inserted.rowCount) {
          let seq = 0;
          for await (const chunk of createReadStream(tmpFile, { highWaterMark: CHUNK_BYTES })) {
            await c.query(`INSERT INTO ${SCHEMA}.chunks (tenant, sha256, seq, data) VALUES ($1, $2, $3, $4)`, [
              tenant,
              sha256,
              seq++,
              chunk,
            ]);
          }
        }
        await c.query(
          `UPDATE ${SCHEMA}.uploads SET sha256 = $4, size = $5, expires = $6
           WHERE tenant = $1 AND deployment_id = $2 AND upload_id = $3`,
          [tenant, deploymentId, uploadId, sha256, size, expires],
        );
      });
    },

    async lookup(tenant, deploymentId, uploadId): Promise<StoredUpload | undefined> {
      const { rows } = await pool.query<{ sha256: string; size: string; expires: string }>(
        `SELECT u.sha256, u.size, u.expires FROM ${SCHEMA}.uploads u
         JOIN ${SCHEMA}.objects o ON o.tenant = u.tenant AND o.sha256 = u.sha256
         WHERE u.tenant = $1 AND u.deployment_id = $2 AND u.upload_id = $3`,
        [tenant, deploymentId, uploadId],
      );
      const row = rows[0];
      return row && { sha256: row.sha256, size: Number(row.size), deploymentId, expires: Number(row.expires) };
    },

    async usage(tenant) {
      const { rows } = await pool.query<{ count: string; bytes: string | null }>(
        `SELECT count(*) AS count, sum(size) AS bytes FROM ${SCHEMA}.objects WHERE tenant = $1`,
        [tenant],
      );
      return { count: Number(rows[0]?.count ?? 0), bytes: Number(rows[0]?.bytes ?? 0) };
    },

    sweep(tenant, referenced: ArchiveReferences, nowSeconds, graceSeconds) {
      return inWorkspace(tenant, async (c) => {
        // A claim never completed goes when its URL expires; a record a grace later (or at once when its
        // deployment is gone).
        await c.query(
          `DELETE FROM ${SCHEMA}.uploads WHERE tenant = $1 AND (
             expires + CASE WHEN sha256 IS NULL THEN 0 ELSE $3::bigint END < $2::bigint
             OR (sha256 IS NOT NULL AND $4::boolean AND NOT (deployment_id = ANY($5::text[]))))`,
          [
            tenant,
            nowSeconds,
            graceSeconds,
            referenced !== 'all',
            referenced === 'all' ? [] : [...referenced.deployments],
          ],
        );
        const left = await c.query<{ n: string }>(
          `SELECT count(*) AS n FROM ${SCHEMA}.uploads WHERE tenant = $1 AND sha256 IS NOT NULL`,
          [tenant],
        );
        const records = Number(left.rows[0]?.n ?? 0);
        if (referenced === 'all') return { deleted: 0, records };
        const gone = await c.query(
          `DELETE FROM ${SCHEMA}.objects o WHERE o.tenant = $1 AND NOT (o.sha256 = ANY($2::text[]))
           AND NOT EXISTS (SELECT 1 FROM ${SCHEMA}.uploads u WHERE u.tenant = o.tenant AND u.sha256 = o.sha256)`,
          [tenant, [...referenced.hashes]],
        );
        return { deleted: gone.rowCount ?? 0, records };
      });
    },

    async has(tenant, sha256) {
      if (!SHA256.test(sha256)) return false;
      const { rowCount } = await pool.query(`SELECT 1 FROM ${SCHEMA}.objects WHERE tenant = $1 AND sha256 = $2`, [
        tenant,
        sha256,
      ]);
      return Boolean(rowCount);
    },

    async read(tenant, sha256) {
      if (!SHA256.test(sha256)) return undefined;
      const { rows } = await pool.query<{ n: number }>(
        `SELECT (SELECT count(*) FROM ${SCHEMA}.chunks c WHERE c.tenant = o.tenant AND c.sha256 = o.sha256)::int AS n
         FROM ${SCHEMA}.objects o WHERE o.tenant = $1 AND o.sha256 = $2`,
        [tenant, sha256],
      );
      const count = rows[0]?.n;
      if (count === undefined) return undefined;
      // One chunk in memory at a time, read as the consumer asks for it.
      async function* chunks() {
        for (let seq = 0; seq < count!; seq++) {
          const r = await pool.query<{ data: Buffer }>(
            `SELECT data FROM ${SCHEMA}.chunks WHERE tenant = $1 AND sha256 = $2 AND seq = $3`,
            [tenant, sha256, seq],
          );
          if (!r.rows[0]) throw new Error(`the source tarball sha256:${sha256} was deleted while it was read`);
          yield r.rows[0].data;
        }
      }
      return Readable.from(chunks(), { objectMode: false });
    },

    async tenants() {
      const { rows } = await pool.query<{ tenant: string }>(
        `SELECT tenant FROM ${SCHEMA}.uploads UNION SELECT tenant FROM ${SCHEMA}.objects`,
      );
      return rows.map((r) => r.tenant);
    },

    async close() {
      await pool.end();
    },
  };
}

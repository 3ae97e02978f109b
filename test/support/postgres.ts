// The one place tests learn where PostgreSQL is. The global setup (postgres-global-setup.ts) picks a server once
// per run and puts its admin URL in AGENTPLANE_TEST_DATABASE_URL; tests create a database of their own from it.
import { randomBytes } from 'node:crypto';
import pg from 'pg';

/** Admin URL of the server the tests use: a role that may create databases, on its maintenance database. */
export const TEST_DATABASE_URL_ENV = 'AGENTPLANE_TEST_DATABASE_URL';
/** Set to 1 to skip the probe of 127.0.0.1:5432 and start an embedded PostgreSQL even when a local one answers. */
export const FORCE_EMBEDDED_ENV = 'AGENTPLANE_TEST_FORCE_EMBEDDED_PG';
export const LOCAL_SERVER_URL = 'postgres://postgres@127.0.0.1:5432/postgres';

export function testDatabaseUrl(): string {
  const url = process.env[TEST_DATABASE_URL_ENV];
  if (!url) {
    throw new Error(
      `${TEST_DATABASE_URL_ENV} is not set: run the tests through vitest (its global setup picks the server)`,
    );
  }
  return url;
}

/** The URL of database `name` on the test server (same role, same password). */
export function databaseUrl(name: string): string {
  const url = new URL(testDatabaseUrl());
  url.pathname = `/${name}`;
  return url.toString();
}

export type TestDatabase = { name: string; url: string; drop: () => Promise<void> };

/** A fresh, empty database on the test server; `drop()` removes it even while connections are open. */
export async function createTestDatabase(prefix = 'ap_t_'): Promise<TestDatabase> {
  const name = `${prefix}${randomBytes(6).toString('hex')}`;
  await admin(async (c) => {
    await c.query(`CREATE DATABASE ${name}`);
    // Commits return without waiting for their WAL flush (as on the embedded server, which runs with fsync off):
    // what a commit wrote is visible at once all the same, only a crash of the server itself could lose it, and no
    // test crashes the shared one. On a loaded disk a flush took ~17 ms, paid by every commit of every run.
    await c.query(`ALTER DATABASE ${name} SET synchronous_commit = off`);
  });
  return { name, url: databaseUrl(name), drop: () => admin((c) => dropDatabase(c, name)) };
}

/**
 * Gives connections that are closing (a pool just ended) a moment to go before forcing the rest out: a connection
 * terminated while its client is ending surfaces as an uncaught error in the test process.
 */
async function dropDatabase(c: pg.Client, name: string): Promise<void> {
  for (let i = 0; i < 40; i++) {
    const { rows } = await c.query<{ n: number }>(
      'SELECT count(*)::int AS n FROM pg_stat_activity WHERE datname = $1',
      [name],
    );
    if (!rows[0]?.n) break;
    await new Promise((r) => setTimeout(r, 50));
  }
  await c.query(`DROP DATABASE IF EXISTS ${name} WITH (FORCE)`);
}

async function admin(fn: (client: pg.Client) => Promise<unknown>): Promise<void> {
  const client = new pg.Client({ connectionString: testDatabaseUrl() });
  await client.connect();
  try {
    await fn(client);
  } finally {
    await client.end();
  }
}

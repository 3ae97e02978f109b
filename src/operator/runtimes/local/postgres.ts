// With --database-url each deployment gets a database of its own, owned by a login role of its own: the agent
// server connects as that role (no superuser, no CREATEDB/CREATEROLE), and CONNECT is revoked from PUBLIC, so one
// deployment's server cannot open another's database. The password is random and kept in a 0600 file in the
// deployment's folder, which no sandbox mounts.
import { randomBytes } from 'node:crypto';
import { readFile, writeFile } from 'node:fs/promises';
import { newPgClient } from '../../../lib/connections.ts';

export function databaseNameFor(deploymentId: string): string {
  return `ap_dev_${deploymentId.toLowerCase().replace(/[^a-z0-9]/g, '_')}`.slice(0, 63);
}

const ident = (name: string) => `"${name.replace(/"/g, '""')}"`;

async function passwordIn(file: string): Promise<string> {
  const existing = (await readFile(file, 'utf8').catch(() => '')).trim();
  if (/^[0-9a-f]{48}$/.test(existing)) return existing;
  const fresh = randomBytes(24).toString('hex');
  await writeFile(file, fresh, { mode: 0o600 });
  return fresh;
}

/** Creates (or repairs) the deployment's role and database; returns the URL the agent server uses. */
export async function ensureDeploymentDatabase(
  serverUrl: string,
  deploymentId: string,
  passwordFile: string,
): Promise<string> {
  const name = databaseNameFor(deploymentId);
  const password = await passwordIn(passwordFile);
  const client = newPgClient({ connectionString: serverUrl });
  await client.connect();
  try {
    const role = await client.query('SELECT 1 FROM pg_roles WHERE rolname = $1', [name]);
    // The password is hex: safe inside a literal (DDL takes no bind parameters).
    const attrs = `LOGIN NOSUPERUSER NOCREATEDB NOCREATEROLE NOREPLICATION NOBYPASSRLS PASSWORD '${password}'`;
    if (!role.rowCount) {
      await client.query(`CREATE ROLE ${ident(name)} ${attrs}`).catch((err: { code?: string }) => {
        if (err.code !== '42710') throw err; // created concurrently
      });
    }
    await client.query(`ALTER ROLE ${ident(name)} ${attrs}`);
    const db = await client.query<{ owner: string }>(
      'SELECT pg_get_userbyid(datdba) AS owner FROM pg_database WHERE datname = $1',
      [name],
    );
    if (!db.rowCount) {
      await client.query(`CREATE DATABASE ${ident(name)} OWNER ${ident(name)}`).catch((err: { code?: string }) => {
        if (err.code !== '42P04') throw err; // created concurrently
      });
    }
    await client.query(`ALTER DATABASE ${ident(name)} OWNER TO ${ident(name)}`);
    await client.query(`REVOKE ALL ON DATABASE ${ident(name)} FROM PUBLIC`);
    // A database made before deployments had roles: hand its tables over, or the server could not use them.
    if (db.rowCount && db.rows[0]!.owner !== name) await adoptObjects(serverUrl, name);
  } finally {
    await client.end();
  }
  const url = new URL(serverUrl);
  url.username = name;
  url.password = password;
  url.pathname = `/${name}`;
  return url.toString();
}

/** Gives the deployment's role the schemas and relations (tables, sequences, views) of its database. */
async function adoptObjects(serverUrl: string, name: string): Promise<void> {
  const url = new URL(serverUrl);
  url.pathname = `/${name}`;
  const client = newPgClient({ connectionString: url.toString() });
  await client.connect();
  try {
    const schemas = await client.query<{ nspname: string }>(
      "SELECT nspname FROM pg_namespace WHERE nspname NOT LIKE 'pg\\_%' AND nspname NOT IN ('information_schema', 'public')",
    );
    for (const { nspname } of schemas.rows)
      await client.query(`ALTER SCHEMA ${ident(nspname)} OWNER TO ${ident(name)}`);
    const relations = await client.query<{ nspname: string; relname: string }>(
      `SELECT n.nspname, c.relname FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace
       WHERE c.relkind IN ('r', 'p', 'v', 'm', 'S', 'f') AND n.nspname NOT LIKE 'pg\\_%' AND n.nspname <> 'information_schema'
         AND pg_get_userbyid(c.relowner) <> $1`,
      [name],
    );
    for (const r of relations.rows) {
      await client
        .query(`ALTER TABLE ${ident(r.nspname)}.${ident(r.relname)} OWNER TO ${ident(name)}`)
        .catch((err: { code?: string }) => {
          if (err.code !== '0A000') throw err; // a sequence owned by a table follows its table
        });
    }
  } finally {
    await client.end();
  }
}

export async function dropDeploymentDatabase(serverUrl: string, deploymentId: string): Promise<void> {
  const name = databaseNameFor(deploymentId);
  const client = newPgClient({ connectionString: serverUrl });
  await client.connect();
  try {
    await client.query(`DROP DATABASE IF EXISTS ${ident(name)} WITH (FORCE)`);
    await client.query(`DROP ROLE IF EXISTS ${ident(name)}`);
  } finally {
    await client.end();
  }
}

/**
 * Whether the runtime itself can use the Postgres server now (connect, one query): the runtime's own check of a
 * database outage, which an agent's output is never taken for.
 */
export async function databaseAnswers(serverUrl: string, timeoutMs = 3000): Promise<boolean> {
  const client = newPgClient({
    connectionString: serverUrl,
    connectionTimeoutMillis: timeoutMs,
    query_timeout: timeoutMs,
  });
  try {
    await client.connect();
    await client.query('SELECT 1');
    return true;
  } catch {
    return false;
  } finally {
    await client.end().catch(() => undefined);
  }
}

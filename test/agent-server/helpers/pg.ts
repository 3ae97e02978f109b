// A fresh Postgres database per test file (prefix ap_as_), dropped afterwards.
import { randomBytes } from 'node:crypto';
import pg from 'pg';

const ADMIN_URL = process.env.AP_TEST_PG_ADMIN_URL ?? 'postgres://postgres@127.0.0.1:5432/postgres';

export async function createTestDatabase(): Promise<{ url: string; drop: () => Promise<void> }> {
  const name = `ap_as_${randomBytes(6).toString('hex')}`;
  const admin = new pg.Client({ connectionString: ADMIN_URL });
  await admin.connect();
  await admin.query(`CREATE DATABASE ${name}`);
  await admin.end();
  const url = ADMIN_URL.replace(/\/[^/]*$/, `/${name}`);
  return {
    url,
    async drop() {
      const c = new pg.Client({ connectionString: ADMIN_URL });
      await c.connect();
      await c.query(`DROP DATABASE IF EXISTS ${name} WITH (FORCE)`);
      await c.end();
    },
  };
}

// The agent server's stores migrate from every earlier schema to the newest: a database release 0.1 left (no record
// of versions; test/fixtures/migrations/agent-server-*-0.1.sql), one older still (without the columns added on start
// later) and one stopped at each numbered step; data survives. Several connections migrating one new Postgres
// database at once all succeed and apply each step once.
import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import Database from 'better-sqlite3';
import pg from 'pg';
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import { openEmbeddedStorage } from '../../../src/agent-server/storage/embedded/index.ts';
import { AGENT_SERVER_SQLITE_MIGRATIONS } from '../../../src/agent-server/storage/embedded/migrations.ts';
import { openPostgresStorage } from '../../../src/agent-server/storage/postgres/index.ts';
import {
  POSTGRES_MIGRATIONS,
  migratePostgres,
  postgresSchemaVersion,
} from '../../../src/agent-server/storage/postgres/migrations.ts';
import { migrateSqlite, sqliteSchemaVersion } from '../../../src/lib/migrations.ts';
import { createTestDatabase } from '../helpers/pg.ts';

const FIXTURES = join(import.meta.dirname, '../..', 'fixtures', 'migrations');
const fixture = (name: string) => readFileSync(join(FIXTURES, name), 'utf8');
const THREAD = '6f0c1f0e-0000-4000-8000-000000000001';
const ASSISTANT = '6f0c1f0e-0000-4000-8000-0000000000a1';
const NOW = '2026-01-01T00:00:00.000Z';

describe('agent server embedded store: schema migrations', () => {
  const dirs: string[] = [];
  afterEach(() => {
    for (const d of dirs.splice(0)) rmSync(d, { recursive: true, force: true });
  });

  function fileIn(): { dir: string; db: Database.Database } {
    const dir = mkdtempSync(join(tmpdir(), 'ap-as-migrations-'));
    dirs.push(dir);
    return { dir, db: new Database(join(dir, 'agentplane.sqlite')) };
  }

  function fill(db: Database.Database): void {
    db.prepare(`INSERT INTO ap_assistants VALUES (?, 'agent', '{}', '{}', '{"m":1}', 'helper', NULL, 3, ?, ?)`).run(
      ASSISTANT,
      NOW,
      NOW,
    );
    db.prepare(
      `INSERT INTO ap_threads (thread_id, created_at, updated_at, state_updated_at, metadata, status, config, interrupts)
       VALUES (?, ?, ?, ?, '{"kept":true}', 'idle', '{}', '{}')`,
    ).run(THREAD, NOW, NOW, NOW);
  }

  async function expectLatest(dir: string): Promise<void> {
    const storage = openEmbeddedStorage({ dataDir: dir });
    try {
      expect((await storage.threads.get(THREAD))?.metadata).toEqual({ kept: true });
    } finally {
      await storage.close();
    }
    const db = new Database(join(dir, 'agentplane.sqlite'), { readonly: true });
    try {
      expect(sqliteSchemaVersion(db)).toBe(AGENT_SERVER_SQLITE_MIGRATIONS.length);
      const columns = (t: string) =>
        (db.prepare(`PRAGMA table_info(${t})`).all() as { name: string }[]).map((c) => c.name);
      expect(columns('ap_runs')).toContain('not_before');
      expect(columns('ap_threads')).toEqual(
        expect.arrayContaining(['ttl_minutes', 'ttl_strategy', 'ttl_pruned_updated_at']),
      );
      // An assistant written before versions were kept has its current state as a version.
      expect(db.prepare('SELECT version, name FROM ap_assistant_versions').all()).toEqual([
        { version: 3, name: 'helper' },
      ]);
    } finally {
      db.close();
    }
  }

  it('a file release 0.1 made (no versions) is recognised, migrated, and its data kept', async () => {
    const { dir, db } = fileIn();
    db.exec(fixture('agent-server-sqlite-0.1.sql'));
    fill(db);
    db.close();
    await expectLatest(dir);
  });

  it('a file older still, without the columns added on start later, gets them', async () => {
    const { dir, db } = fileIn();
    db.exec(fixture('agent-server-sqlite-0.1.sql'));
    db.exec('ALTER TABLE ap_runs DROP COLUMN not_before');
    db.exec(
      'ALTER TABLE ap_threads DROP COLUMN ttl_strategy; ALTER TABLE ap_threads DROP COLUMN ttl_pruned_updated_at',
    );
    fill(db);
    db.close();
    await expectLatest(dir);
  });

  it.each(Array.from({ length: AGENT_SERVER_SQLITE_MIGRATIONS.length }, (_, v) => v + 1))(
    'a file at version %i migrates to the newest',
    async (v) => {
      const { dir, db } = fileIn();
      expect(migrateSqlite(db, AGENT_SERVER_SQLITE_MIGRATIONS, 'test', v).to).toBe(v);
      fill(db);
      db.exec('DELETE FROM ap_assistant_versions');
      db.exec(`INSERT INTO ap_assistant_versions SELECT assistant_id, version, graph_id, config, context, metadata, name,
        description, updated_at FROM ap_assistants`);
      db.close();
      await expectLatest(dir);
    },
  );
});

describe('agent server postgres store: schema migrations', () => {
  let db: Awaited<ReturnType<typeof createTestDatabase>>;
  beforeAll(async () => {
    db = await createTestDatabase();
  });
  afterAll(async () => {
    await db?.drop();
  });

  async function withClient<T>(fn: (c: pg.Client) => Promise<T>): Promise<T> {
    const c = new pg.Client({ connectionString: db.url });
    await c.connect();
    try {
      return await fn(c);
    } finally {
      await c.end();
    }
  }

  it('a schema release 0.1 made (no versions) is recognised, migrated, and its data kept', async () => {
    await withClient(async (c) => {
      await c.query('DROP SCHEMA IF EXISTS agentplane CASCADE');
      await c.query(fixture('agent-server-postgres-0.1.sql'));
      await c.query(
        `INSERT INTO agentplane.assistants VALUES ($1, 'agent', '{}', '{}', '{}', 'helper', NULL, 2, now(), now())`,
        [ASSISTANT],
      );
      await c.query(`INSERT INTO agentplane.threads (thread_id, metadata) VALUES ($1, '{"kept":true}')`, [THREAD]);
      expect(await postgresSchemaVersion(c, 'agentplane')).toBe(0);
    });
    const storage = await openPostgresStorage({ databaseUrl: db.url, poolSize: 2 });
    try {
      expect((await storage.threads.get(THREAD))?.metadata).toEqual({ kept: true });
    } finally {
      await storage.close();
    }
    await withClient(async (c) => {
      expect(await postgresSchemaVersion(c, 'agentplane')).toBe(POSTGRES_MIGRATIONS.length);
      const { rows } = await c.query('SELECT version, name FROM agentplane.schema_migrations ORDER BY version');
      expect(rows).toEqual(POSTGRES_MIGRATIONS.map((m) => ({ version: m.version, name: m.name })));
    });
  });

  it('a schema older still, without the columns added later, gets them', async () => {
    await withClient(async (c) => {
      await c.query('DROP SCHEMA IF EXISTS agentplane CASCADE');
      await c.query(fixture('agent-server-postgres-0.1.sql'));
      await c.query('ALTER TABLE agentplane.runs DROP COLUMN not_before');
      await c.query('ALTER TABLE agentplane.threads DROP COLUMN ttl_strategy, DROP COLUMN ttl_pruned_updated_at');
      const all = POSTGRES_MIGRATIONS.map((m) => m.version);
      expect(await migratePostgres(c, 'agentplane')).toEqual({ from: 0, to: all.length, applied: all });
      const { rows } = await c.query(
        `SELECT table_name || '.' || column_name AS col FROM information_schema.columns
          WHERE table_schema = 'agentplane' AND column_name IN ('not_before', 'ttl_strategy', 'ttl_pruned_updated_at')
          ORDER BY 1`,
      );
      expect(rows.map((r) => r.col)).toEqual([
        'runs.not_before',
        'threads.ttl_pruned_updated_at',
        'threads.ttl_strategy',
      ]);
    });
  });

  it('several connections migrating one new schema at once: all succeed, one applies each step', async () => {
    const schema = 'ap_race';
    const clients = await Promise.all(
      Array.from({ length: 5 }, async () => {
        const c = new pg.Client({ connectionString: db.url });
        await c.connect();
        return c;
      }),
    );
    try {
      const results = await Promise.all(clients.map((c) => migratePostgres(c, schema)));
      const applied = results.flatMap((r) => r.applied).sort();
      expect(applied).toEqual(POSTGRES_MIGRATIONS.map((m) => m.version));
      expect(results.every((r) => r.to === POSTGRES_MIGRATIONS.length)).toBe(true);
      expect(await postgresSchemaVersion(clients[0]!, schema)).toBe(POSTGRES_MIGRATIONS.length);
    } finally {
      await Promise.all(clients.map((c) => c.end()));
    }
  });

  it('a schema newer than this release is refused with a message naming its version', async () => {
    await withClient(async (c) => {
      await migratePostgres(c, 'ap_future');
      await c.query(`INSERT INTO ap_future.schema_migrations VALUES (99, 'from the future', '2030-01-01')`);
      await expect(migratePostgres(c, 'ap_future')).rejects.toThrow(/schema version 99, newer than this release knows/);
    });
  });
});

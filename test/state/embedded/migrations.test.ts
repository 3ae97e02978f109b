// The control plane's embedded store migrates from every earlier schema to the newest: a file release 0.1 left
// (no record of versions; test/fixtures/migrations/control-plane-0.1.sql), one older still (without the columns
// added later), and one stopped at each numbered step. Data survives; several processes opening one new file at
// once all succeed and apply each step once.
import { spawn } from 'node:child_process';
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import Database from 'better-sqlite3';
import { afterEach, describe, expect, it } from 'vitest';
import { embeddedStateFile, openEmbeddedPlatformState } from '../../../src/state/embedded/index.ts';
import { PLATFORM_STATE_MIGRATIONS } from '../../../src/state/embedded/migrations.ts';
import { migrateSqlite, sqliteSchemaVersion } from '../../../src/lib/migrations.ts';

const FIXTURES = join(import.meta.dirname, '../..', 'fixtures', 'migrations');
const RELEASE_0_1 = readFileSync(join(FIXTURES, 'control-plane-0.1.sql'), 'utf8');
const LATEST = PLATFORM_STATE_MIGRATIONS.length;
const KEY = Buffer.alloc(32, 7);

const dirs: string[] = [];
afterEach(() => {
  for (const d of dirs.splice(0)) rmSync(d, { recursive: true, force: true });
});
function tempDir(): string {
  const d = mkdtempSync(join(tmpdir(), 'ap-cp-migrations-'));
  dirs.push(d);
  return d;
}

/** A deployment row as any release wrote it: custom host, no host claim. */
function insertDeployment(db: Database.Database, n: number, customUrl: string | null, rv: number): string {
  const id = `00000000-0000-4000-8000-00000000000${n}`;
  const obj = {
    apiVersion: 'agentplane.dev/v1alpha1',
    kind: 'AgentDeployment',
    metadata: { name: `dep-${n}`, namespace: 'default', uid: `uid-${n}`, resourceVersion: String(rv) },
    spec: { deploymentId: id, tenantId: 't', displayName: `d${n}`, source: 'github', sourceConfig: { customUrl } },
  };
  db.prepare('INSERT INTO objects (kind, namespace, name, uid, rv, json) VALUES (?, ?, ?, ?, ?, ?)').run(
    'AgentDeployment',
    'default',
    `dep-${n}`,
    `uid-${n}`,
    rv,
    JSON.stringify(obj),
  );
  return `dep-${n}`;
}

function fill(db: Database.Database): void {
  insertDeployment(db, 1, 'https://bot.agents.example.com', 1);
  insertDeployment(db, 2, null, 2);
  // A later deployment naming the same host: the older one keeps it.
  insertDeployment(db, 3, 'BOT.agents.example.com', 3);
  db.prepare("UPDATE counters SET value = 3 WHERE name = 'rv'").run();
  db.prepare(
    "INSERT INTO api_keys (id, hash, name, tenants, created_at) VALUES ('k1', 'h1', 'ci', '[\"t\"]', '2026-01-01T00:00:00Z')",
  ).run();
}

async function expectLatest(dir: string): Promise<void> {
  const store = openEmbeddedPlatformState({ dataDir: dir, secretKey: KEY });
  try {
    expect((await store.list('AgentDeployment', 'default')).items.map((d) => d.metadata.name)).toEqual([
      'dep-1',
      'dep-2',
      'dep-3',
    ]);
    expect((await store.listApiKeys()).map((k) => k.name)).toEqual(['ci']);
    expect(await store.listHostClaims('default')).toEqual([
      { host: 'bot.agents.example.com', owner: { name: 'dep-1', uid: 'uid-1' } },
    ]);
  } finally {
    await store.close();
  }
  const db = new Database(embeddedStateFile(dir), { readonly: true });
  try {
    const steps = db.prepare('SELECT version, name FROM schema_migrations ORDER BY version').all();
    expect(steps).toEqual(PLATFORM_STATE_MIGRATIONS.map((m) => ({ version: m.version, name: m.name })));
    const columns = (table: string) =>
      (db.prepare(`PRAGMA table_info(${table})`).all() as { name: string }[]).map((c) => c.name);
    expect(columns('secrets')).toContain('enc');
    expect(columns('api_keys')).toContain('listener_id');
    expect(columns('integrations')).toEqual(expect.arrayContaining(['details', 'installation_id']));
  } finally {
    db.close();
  }
}

describe('control plane embedded store: schema migrations', () => {
  it('a file release 0.1 made (no versions) is recognised, migrated to the newest step, and its data kept', async () => {
    const dir = tempDir();
    const db = new Database(embeddedStateFile(dir));
    db.exec(RELEASE_0_1);
    fill(db);
    expect(sqliteSchemaVersion(db)).toBe(0);
    db.close();
    await expectLatest(dir);
  });

  it('a file older still, without the columns added on start later, gets them', async () => {
    const dir = tempDir();
    const db = new Database(embeddedStateFile(dir));
    db.exec(RELEASE_0_1);
    db.exec('ALTER TABLE secrets DROP COLUMN enc; ALTER TABLE api_keys DROP COLUMN listener_id;');
    db.exec('DROP INDEX integrations_by_installation; ALTER TABLE integrations DROP COLUMN installation_id;');
    db.exec('ALTER TABLE integrations DROP COLUMN details;');
    fill(db);
    db.close();
    await expectLatest(dir);
  });

  it.each(Array.from({ length: LATEST + 1 }, (_, v) => v))('a file at version %i migrates to the newest', async (v) => {
    const dir = tempDir();
    const db = new Database(embeddedStateFile(dir));
    if (v === 0) db.exec(RELEASE_0_1);
    else expect(migrateSqlite(db, PLATFORM_STATE_MIGRATIONS, 'test', v)).toMatchObject({ from: 0, to: v });
    fill(db);
    // From step 2 on, the store writes a deployment's host claim with it.
    if (v >= 2) db.exec("INSERT INTO host_claims VALUES ('default', 'bot.agents.example.com', 'dep-1', 'uid-1')");
    db.close();
    await expectLatest(dir);
  });

  it('a file newer than this release is refused with a message naming both versions', async () => {
    const dir = tempDir();
    const db = new Database(embeddedStateFile(dir));
    migrateSqlite(db, PLATFORM_STATE_MIGRATIONS, 'test');
    db.prepare("INSERT INTO schema_migrations VALUES (?, 'from the future', '2030-01-01')").run(LATEST + 1);
    db.close();
    expect(() => openEmbeddedPlatformState({ dataDir: dir, secretKey: KEY })).toThrow(
      new RegExp(`schema version ${LATEST + 1}, newer than this release knows \\(${LATEST}\\)`),
    );
  });

  it('several processes opening one new file at once: every one opens it, each step is applied once', async () => {
    const dir = tempDir();
    const go = join(dir, 'go');
    const script = join(FIXTURES, 'open-control-plane-store.ts');
    const children = Array.from({ length: 3 }, () =>
      spawn(process.execPath, ['--import', 'tsx', script, dir, go], { stdio: ['ignore', 'pipe', 'pipe'] }),
    );
    const outcomes = children.map(
      (child) =>
        new Promise<{ code: number | null; out: string }>((resolve) => {
          let out = '';
          child.stdout.on('data', (d) => (out += d));
          child.stderr.on('data', (d) => (out += d));
          child.on('close', (code) => resolve({ code, out }));
        }),
    );
    await Promise.all(
      children.map(
        (child) =>
          new Promise<void>((resolve) => {
            const ready = (d: Buffer) => {
              if (String(d).includes('ready')) {
                child.stdout.off('data', ready);
                resolve();
              }
            };
            child.stdout.on('data', ready);
            child.on('close', () => resolve());
          }),
      ),
    );
    writeFileSync(go, '');
    for (const { code, out } of await Promise.all(outcomes)) {
      // The whole output in the message: a process that failed printed why (CI logs show only the message).
      expect(out, `a process's output:\n${out}`).toContain('opened');
      expect(code).toBe(0);
    }
    const db = new Database(embeddedStateFile(dir), { readonly: true });
    try {
      expect(db.prepare('SELECT version FROM schema_migrations ORDER BY version').all()).toEqual(
        PLATFORM_STATE_MIGRATIONS.map((m) => ({ version: m.version })),
      );
    } finally {
      db.close();
    }
  }, 60_000);
});

// Secret values at rest in the embedded store: someone who can read the data dir's files (a backup, a copied disk)
// finds no value in them; the key file is private; a wrong or missing key fails clearly at open instead of giving
// garbage; stores written before encryption are still read, and encrypted in place on open.
import { mkdtempSync, readdirSync, readFileSync, rmSync, statSync } from 'node:fs';
import { randomBytes } from 'node:crypto';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import Database from 'better-sqlite3';
import { afterEach, describe, expect, it } from 'vitest';
import { createControlPlane } from '../../src/control-plane/app.ts';
import { openEmbeddedPlatformState } from '../../src/state/embedded/index.ts';
import { openPlatformState } from '../../src/state/index.ts';
import { silentLogger } from '../../src/lib/logger.ts';
import { deploymentName, secretsName } from '../../src/resources/index.ts';
import { githubBody } from '../control-plane/helpers/harness.ts';

const KEY = 'encryption-admin-key-0123456789';
const dirs: string[] = [];
const tempDir = () => {
  const d = mkdtempSync(join(tmpdir(), 'ap-cp-enc-'));
  dirs.push(d);
  return d;
};
afterEach(() => {
  for (const d of dirs.splice(0)) rmSync(d, { recursive: true, force: true });
});

/** Every byte the data dir holds (database, WAL, shared memory, key file). */
function filesContain(dir: string, needle: string): string[] {
  return readdirSync(dir).filter((f) => readFileSync(join(dir, f)).includes(Buffer.from(needle, 'utf8')));
}

describe('embedded store: secret values encrypted at rest', () => {
  it('a secret sent through the API is nowhere in the data dir, yet the runtime reads it back', async () => {
    const dir = tempDir();
    const value = `sk-live-${randomBytes(12).toString('hex')}`;
    const store = openEmbeddedPlatformState({ dataDir: dir });
    const app = await createControlPlane({
      store,
      logger: silentLogger(),
      bootstrapKeys: [{ key: KEY, tenants: ['*'] }],
    });
    const res = await app.inject({
      method: 'POST',
      url: '/v2/deployments',
      headers: { 'x-api-key': KEY, 'x-tenant-id': 'tenant-a' },
      payload: githubBody('encrypted', { secrets: [{ name: 'OPENAI_API_KEY', value }] }),
    });
    expect(res.statusCode, res.body).toBe(201);
    const set = secretsName(deploymentName(res.json().id), 1);
    expect(await store.getSecrets('default', set)).toEqual({ OPENAI_API_KEY: value });
    expect(await store.secretNames('default', set)).toEqual(['OPENAI_API_KEY']);
    expect(filesContain(dir, value)).toEqual([]);
    const raw = new Database(join(dir, 'control-plane.db'), { readonly: true });
    const row = raw.prepare('SELECT data FROM secrets WHERE name = ?').get(set) as { data: string };
    raw.close();
    expect(JSON.parse(row.data).OPENAI_API_KEY).toMatch(/^v1:[^:]+:[^:]+:[^:]+$/);
    await app.close();
    await store.close();
    expect(filesContain(dir, value)).toEqual([]);
    // The key file was made on first use, readable by its owner only.
    expect(statSync(join(dir, 'secret.key')).mode & 0o777).toBe(0o600);
  });

  it('a wrong key fails at open with a message naming the key, never garbage; the right key reads the values', async () => {
    const dir = tempDir();
    const key = randomBytes(32);
    const a = openEmbeddedPlatformState({ dataDir: dir, secretKey: key });
    await a.putSecrets('default', 's1', { kind: 'AgentDeployment', name: 'x', uid: 'u' }, { TOKEN: 'top-secret' });
    await a.close();
    expect(() => openEmbeddedPlatformState({ dataDir: dir, secretKey: randomBytes(32) })).toThrow(
      /AGENTPLANE_SECRET_KEY \(--secret-key\) is not the key the secret values in this store were encrypted with/,
    );
    // Without the env key, the key file (which does not exist: the env key was used) is missing.
    expect(() => openEmbeddedPlatformState({ dataDir: dir })).toThrow(
      /encrypted, but there is no key: set AGENTPLANE_SECRET_KEY/,
    );
    // Through the command's opener: one line naming the data dir and the problem.
    await expect(
      openPlatformState(
        { store: 'embedded', dataDir: dir, namespace: 'default', secretKey: randomBytes(32) },
        silentLogger(),
      ),
    ).rejects.toThrow(new RegExp(`cannot open the embedded store in --data-dir ${dir}: .*not the key`));
    const b = openEmbeddedPlatformState({ dataDir: dir, secretKey: key });
    expect(await b.getSecrets('default', 's1')).toEqual({ TOKEN: 'top-secret' });
    await b.close();
  });

  it('a ciphertext copied onto another variable does not decrypt (bound to its place)', async () => {
    const dir = tempDir();
    const s = openEmbeddedPlatformState({ dataDir: dir });
    await s.putSecrets('default', 'set-a', { kind: 'AgentDeployment', name: 'x', uid: 'u' }, { A: 'alpha', B: 'beta' });
    await s.close();
    const raw = new Database(join(dir, 'control-plane.db'));
    const row = raw.prepare("SELECT data FROM secrets WHERE name = 'set-a'").get() as { data: string };
    const data = JSON.parse(row.data);
    raw.prepare("UPDATE secrets SET data = ? WHERE name = 'set-a'").run(JSON.stringify({ A: data.B, B: data.B }));
    raw.close();
    const again = openEmbeddedPlatformState({ dataDir: dir });
    await expect(again.getSecrets('default', 'set-a')).rejects.toThrow(/cannot decrypt secret set "set-a"/);
    await again.close();
  });

  it('a store written before encryption: plaintext rows are still read, and encrypted on open', async () => {
    const dir = tempDir();
    // The secrets table as it was: no enc column, values as plain JSON.
    const old = new Database(join(dir, 'control-plane.db'));
    old.exec(`CREATE TABLE secrets (namespace TEXT NOT NULL, name TEXT NOT NULL, owner_uid TEXT NOT NULL,
      data TEXT NOT NULL, PRIMARY KEY (namespace, name))`);
    old
      .prepare('INSERT INTO secrets VALUES (?, ?, ?, ?)')
      .run('default', 'legacy-set', 'u1', JSON.stringify({ DB_PASSWORD: 'legacy-plaintext-password' }));
    old.close();
    expect(filesContain(dir, 'legacy-plaintext-password')).toEqual(['control-plane.db']);
    const store = openEmbeddedPlatformState({ dataDir: dir });
    expect(await store.getSecrets('default', 'legacy-set')).toEqual({ DB_PASSWORD: 'legacy-plaintext-password' });
    expect(filesContain(dir, 'legacy-plaintext-password')).toEqual([]);
    await store.close();
    const reopened = openEmbeddedPlatformState({ dataDir: dir });
    expect(await reopened.getSecrets('default', 'legacy-set')).toEqual({ DB_PASSWORD: 'legacy-plaintext-password' });
    await reopened.close();
  });
});

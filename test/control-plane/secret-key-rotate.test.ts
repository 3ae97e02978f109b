// `agentplane secret-key rotate`, run as the real binary on a real embedded store: every value sealed with the old
// key (deployment secrets, integration tokens, auth service records) is readable with the new key alone, the old key
// opens nothing any more; the rotation is refused while the store is open elsewhere (a running platform) and
// changes nothing then; a rotation interrupted after its commit is finished by the next run.
import { execFile } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { existsSync, mkdtempSync, readFileSync, renameSync, rmSync, statSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { promisify } from 'node:util';
import { afterEach, describe, expect, it } from 'vitest';
import { createControlPlane } from '../../src/control-plane/app.ts';
import { createApiKey } from '../../src/control-plane/api-keys/keys.ts';
import { derivedAuthKeyring } from '../../src/lib/auth-crypto.ts';
import { openEmbeddedPlatformState } from '../../src/state/embedded/index.ts';
import type { PlatformState } from '../../src/state/types.ts';
import { silentLogger } from '../../src/lib/logger.ts';

const ROOT = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '../..');
const OWNER = { kind: 'AgentDeployment' as const, name: 'd', uid: 'u-1' };
const INTEGRATION = {
  id: 'int-1',
  tenant: 'team-a',
  name: 'git',
  host: 'git.example.com',
  createdAt: new Date().toISOString(),
};

function agentplane(args: string[], env: NodeJS.ProcessEnv = {}) {
  const childEnv = { ...process.env, ...env };
  delete childEnv.AGENTPLANE_SECRET_KEY;
  delete childEnv.AGENTPLANE_DATA_DIR;
  if (env.AGENTPLANE_SECRET_KEY) childEnv.AGENTPLANE_SECRET_KEY = env.AGENTPLANE_SECRET_KEY;
  return promisify(execFile)(process.execPath, [path.join(ROOT, 'bin/agentplane.mjs'), 'secret-key', ...args], {
    cwd: ROOT,
    env: childEnv,
  }).then(
    (r) => ({ code: 0, ...r }),
    (e: { code: number; stdout: string; stderr: string }) => e,
  );
}

const dirs: string[] = [];
afterEach(() => {
  for (const d of dirs.splice(0)) rmSync(d, { recursive: true, force: true });
});

/** A store holding one secret set, one integration token and one OAuth provider sealed with the derived key. */
async function populatedStore(): Promise<{ dir: string; apiKey: string }> {
  const dir = mkdtempSync(path.join(tmpdir(), 'ap-rotate-'));
  dirs.push(dir);
  const store = openEmbeddedPlatformState({ dataDir: dir });
  await store.putSecrets('default', 'set-1', OWNER, { OPENAI_API_KEY: 'sk-before-rotation', OTHER: 'two' });
  await store.putIntegration(INTEGRATION, 'git-token-before-rotation');
  const apiKey = (await createApiKey(store, { tenants: ['team-a'] })).key;
  const app = await authApp(store, dir);
  const created = await app.inject({
    method: 'POST',
    url: '/v2/auth/providers',
    headers: { 'x-api-key': apiKey, 'x-tenant-id': 'team-a' },
    payload: {
      provider_id: 'gh',
      auth_url: 'https://idp.example.com/authorize',
      token_url: 'https://idp.example.com/token',
      client_id: 'c',
      client_secret: 'client-secret-before-rotation',
    },
  });
  expect(created.statusCode, created.body).toBe(201);
  await app.close();
  await store.close();
  return { dir, apiKey };
}

/** The control plane as `agentplane dev` makes it: the auth keyring derived from <dir>/secret.key. */
function authApp(store: PlatformState, dir: string) {
  return createControlPlane({
    store,
    logger: silentLogger(),
    consoleDir: false,
    auth: {
      keyring: derivedAuthKeyring(Buffer.from(readFileSync(path.join(dir, 'secret.key'), 'utf8').trim(), 'base64')),
      publicUrl: 'https://cp.example.com',
    },
  });
}

/** Everything sealed is read back with the key now in the data dir (and nothing else). */
async function expectReadable(dir: string, apiKey: string): Promise<void> {
  const store = openEmbeddedPlatformState({ dataDir: dir });
  try {
    expect(await store.getSecrets('default', 'set-1')).toEqual({ OPENAI_API_KEY: 'sk-before-rotation', OTHER: 'two' });
    expect(await store.integrationToken('team-a', 'int-1')).toBe('git-token-before-rotation');
    const app = await authApp(store, dir);
    const res = await app.inject({
      method: 'GET',
      url: '/v2/auth/providers/gh',
      headers: { 'x-api-key': apiKey, 'x-tenant-id': 'team-a' },
    });
    await app.close();
    expect(res.statusCode, res.body).toBe(200);
    expect(res.json()).toMatchObject({ provider_id: 'gh', has_client_secret: true });
  } finally {
    await store.close();
  }
}

const keyOf = (dir: string, file = 'secret.key') => readFileSync(path.join(dir, file), 'utf8').trim();

describe('agentplane secret-key rotate', () => {
  it('re-encrypts every secret with a new key; the old key is no longer needed and opens nothing', async () => {
    const { dir, apiKey } = await populatedStore();
    const oldKey = keyOf(dir);
    const r = await agentplane(['rotate', '--data-dir', dir, '--json']);
    expect(r.code, r.stderr).toBe(0);
    expect(JSON.parse(r.stdout)).toMatchObject({
      secretSets: 1,
      integrations: 1,
      authRecords: 1,
      keyFile: path.join(dir, 'secret.key'),
      oldKeyFile: path.join(dir, 'secret.key.old'),
      finishedInterrupted: false,
    });
    expect(keyOf(dir)).not.toBe(oldKey);
    expect(keyOf(dir, 'secret.key.old')).toBe(oldKey);
    expect(statSync(path.join(dir, 'secret.key')).mode & 0o777).toBe(0o600);
    expect(statSync(path.join(dir, 'secret.key.old')).mode & 0o777).toBe(0o600);
    expect(existsSync(path.join(dir, 'secret.key.new'))).toBe(false);

    rmSync(path.join(dir, 'secret.key.old'));
    await expectReadable(dir, apiKey);
    expect(() => openEmbeddedPlatformState({ dataDir: dir, secretKey: Buffer.from(oldKey, 'base64') })).toThrow(
      /is not the key the secret values in this store were encrypted with/,
    );
  });

  it('refuses while the store is open in another process (a running platform), changing nothing', async () => {
    const { dir, apiKey } = await populatedStore();
    const oldKey = keyOf(dir);
    const running = openEmbeddedPlatformState({ dataDir: dir });
    try {
      const r = await agentplane(['rotate', '--data-dir', dir]);
      expect(r.code).toBe(1);
      expect(r.stderr).toMatch(/is open in another process \(is the platform running on this data dir\?\)/);
      expect(await running.getSecrets('default', 'set-1')).toMatchObject({ OPENAI_API_KEY: 'sk-before-rotation' });
    } finally {
      await running.close();
    }
    expect(keyOf(dir)).toBe(oldKey);
    expect(existsSync(path.join(dir, 'secret.key.new'))).toBe(false);
    expect(existsSync(path.join(dir, 'secret.key.old'))).toBe(false);
    await expectReadable(dir, apiKey);
  });

  it('finishes a rotation interrupted between its commit and the swap of the key files', async () => {
    const { dir, apiKey } = await populatedStore();
    const oldKey = keyOf(dir);
    expect((await agentplane(['rotate', '--data-dir', dir])).code).toBe(0);
    const newKey = keyOf(dir);
    // The files as they were just after the commit: the new key beside the old one, not yet in place.
    renameSync(path.join(dir, 'secret.key'), path.join(dir, 'secret.key.new'));
    writeFileSync(path.join(dir, 'secret.key'), `${oldKey}\n`, { mode: 0o600 });
    rmSync(path.join(dir, 'secret.key.old'));
    expect(() => openEmbeddedPlatformState({ dataDir: dir })).toThrow(/is not the key/);

    const r = await agentplane(['rotate', '--data-dir', dir]);
    expect(r.code, r.stderr).toBe(0);
    expect(r.stdout).toMatch(/^Finished a rotation that had been interrupted after its commit/);
    expect(keyOf(dir)).toBe(newKey);
    expect(keyOf(dir, 'secret.key.old')).toBe(oldKey);
    await expectReadable(dir, apiKey);
  });

  it('with the key given by env, rotates to the --new-key given; the store opens with it alone', async () => {
    const dir = mkdtempSync(path.join(tmpdir(), 'ap-rotate-env-'));
    dirs.push(dir);
    const oldKey = randomBytes(32);
    const newKey = randomBytes(32);
    const store = openEmbeddedPlatformState({ dataDir: dir, secretKey: oldKey });
    await store.putSecrets('default', 'set-1', OWNER, { TOKEN: 'env-keyed' });
    await store.close();

    const missing = await agentplane(['rotate', '--data-dir', dir], {
      AGENTPLANE_SECRET_KEY: oldKey.toString('base64'),
    });
    expect(missing.code).toBe(2);
    expect(missing.stderr).toMatch(/pass the new key as --new-key/);
    const bad = await agentplane(['rotate', '--data-dir', dir, '--new-key', 'c2hvcnQ='], {
      AGENTPLANE_SECRET_KEY: oldKey.toString('base64'),
    });
    expect(bad.code).toBe(2);
    expect(bad.stderr).toMatch(/--new-key \(AGENTPLANE_NEW_SECRET_KEY\) must hold the base64 of exactly 32 bytes/);

    const r = await agentplane(['rotate', '--data-dir', dir, '--new-key', newKey.toString('base64')], {
      AGENTPLANE_SECRET_KEY: oldKey.toString('base64'),
    });
    expect(r.code, r.stderr).toBe(0);
    expect(r.stdout).toMatch(/Re-encrypted 1 secret set\(s\)/);
    expect(existsSync(path.join(dir, 'secret.key'))).toBe(false);
    const after = openEmbeddedPlatformState({ dataDir: dir, secretKey: newKey });
    expect(await after.getSecrets('default', 'set-1')).toEqual({ TOKEN: 'env-keyed' });
    await after.close();
    expect(() => openEmbeddedPlatformState({ dataDir: dir, secretKey: oldKey })).toThrow(/is not the key/);
  });

  it('names a folder with no store instead of making one', async () => {
    const dir = mkdtempSync(path.join(tmpdir(), 'ap-rotate-none-'));
    dirs.push(dir);
    const r = await agentplane(['rotate', '--data-dir', dir]);
    expect(r.code).toBe(1);
    expect(r.stderr).toMatch(/no control-plane store in .*: pass the folder of the store as --data-dir/);
    expect(existsSync(path.join(dir, 'control-plane.db'))).toBe(false);
  });
});

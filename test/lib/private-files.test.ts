// Another account on the same machine must not read the platform's store (API key hashes, sealed secrets, every
// workspace's deployments) or its data folders. Tried as that account would: with the default umask (022), the
// store made here and the one an older release left behind (0755 folder, 0644 database) are opened, and their
// files must not be readable by group or others; when this runs as root, a real unprivileged user tries to read.
import { spawnSync } from 'node:child_process';
import { chmodSync, mkdirSync, mkdtempSync, readdirSync, rmSync, statSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { privateDir } from '../../src/lib/private-files.ts';
import { embeddedStateFile, openEmbeddedPlatformState } from '../../src/state/embedded/index.ts';

const root = mkdtempSync(join(tmpdir(), 'ap-private-'));
// The test's own folder must be enterable by the other account, or its refusal would prove nothing.
chmodSync(root, 0o755);
const umask = process.umask(0o022);
afterAll(() => {
  process.umask(umask);
  rmSync(root, { recursive: true, force: true });
});

const OWNER = { kind: 'AgentDeployment' as const, name: 'dep-1', uid: 'uid-1' };
const modeOf = (path: string) => statSync(path).mode & 0o777;
const isRoot = process.getuid?.() === 0;

/** Whether user `nobody` (65534) can read `path` (only checked when this process may switch users). */
function nobodyReads(path: string): boolean {
  return spawnSync('setpriv', ['--reuid', '65534', '--regid', '65534', '--clear-groups', 'cat', path]).status === 0;
}

async function storeWithData(dir: string): Promise<void> {
  const store = openEmbeddedPlatformState({ dataDir: dir });
  await store.putSecrets('default', `s-${Date.now()}`, OWNER, { OPENAI_API_KEY: 'sk-private' });
  await store.close();
}

describe("the platform's files are its user's alone", () => {
  it('a new store: its folder 0700, control-plane.db and its -wal and -shm 0600, secret.key 0600', async () => {
    const dir = join(root, 'data', 'control-plane');
    const store = openEmbeddedPlatformState({ dataDir: dir });
    await store.putSecrets('default', 's-1', OWNER, { OPENAI_API_KEY: 'sk-private' });
    const files = readdirSync(dir);
    expect(files).toEqual(expect.arrayContaining(['control-plane.db', 'control-plane.db-wal', 'secret.key']));
    expect(modeOf(join(root, 'data'))).toBe(0o700);
    expect(modeOf(dir)).toBe(0o700);
    for (const f of files) expect([f, modeOf(join(dir, f)) & 0o077]).toEqual([f, 0]);
    if (isRoot) expect(nobodyReads(embeddedStateFile(dir))).toBe(false);
    await store.close();
  });

  it('a store an older release left readable (0755 folder, 0644 database) is tightened when opened', async () => {
    const dir = join(root, 'old-store');
    await storeWithData(dir);
    chmodSync(dir, 0o755);
    for (const f of readdirSync(dir)) chmodSync(join(dir, f), 0o644);
    if (isRoot) expect(nobodyReads(embeddedStateFile(dir))).toBe(true); // the attack works on such a store
    await storeWithData(dir);
    expect(modeOf(dir)).toBe(0o700);
    for (const f of readdirSync(dir)) expect([f, modeOf(join(dir, f)) & 0o077]).toEqual([f, 0]);
    if (isRoot) expect(nobodyReads(embeddedStateFile(dir))).toBe(false);
  });

  it('a data folder (builds, agents data, key files) is made 0700 and an existing one tightened', () => {
    const fresh = join(root, 'fresh', 'runtime');
    privateDir(fresh);
    expect([modeOf(join(root, 'fresh')), modeOf(fresh)]).toEqual([0o700, 0o700]);
    const old = join(root, 'old-data');
    mkdirSync(old, { mode: 0o755 });
    writeFileSync(join(old, 'file'), 'x');
    privateDir(old);
    expect(modeOf(old)).toBe(0o700);
  });
});

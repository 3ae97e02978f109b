// What `restore` does with a backup folder it is handed, tried as a careless or hostile user would: a folder that
// is no (complete) backup, a manifest naming paths outside it, a target that already holds a platform. Each is
// refused in one line before anything is written. The round trip itself is backup-restore.test.ts.
import { existsSync, mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, expect, it } from 'vitest';
import { backup, MANIFEST, restore } from '../../src/dev/backup.ts';
import { openEmbeddedPlatformState } from '../../src/state/embedded/index.ts';

let tmp: string;
let data: string;
let saved: string;

beforeAll(async () => {
  tmp = mkdtempSync(join(tmpdir(), 'ap-backup-unit-'));
  data = join(tmp, 'data');
  const store = openEmbeddedPlatformState({ dataDir: join(data, 'control-plane') });
  await store.putSecrets('default', 'some-secrets', { kind: 'AgentDeployment', name: 'd', uid: 'u' }, { TOKEN: 'v' });
  await store.close();
  saved = join(tmp, 'saved');
  await backup(data, saved);
});
afterAll(() => rmSync(tmp, { recursive: true, force: true }));

it('backs up into a new folder only', async () => {
  await expect(backup(data, saved)).rejects.toThrow(`${saved} is not empty: back up into a new or empty folder`);
  await expect(backup(join(tmp, 'nothing'), join(tmp, 'b2'))).rejects.toThrow(/no platform data in .*nothing/);
});

it('refuses a folder without a manifest (not a backup, or one that was cut short)', () => {
  const partial = join(tmp, 'partial');
  mkdirSync(join(partial, 'control-plane'), { recursive: true });
  writeFileSync(join(partial, 'control-plane', 'control-plane.db'), '');
  expect(() => restore(partial, join(tmp, 'r1'))).toThrow(`${partial} holds no complete backup`);
  expect(existsSync(join(tmp, 'r1'))).toBe(false);
});

it.each(['../../../etc/cron.d/x', '/etc/cron.d/x', 'control-plane/../../../x'])(
  'refuses a manifest that names %s, outside the backup',
  (path) => {
    const evil = join(tmp, `evil-${Math.random().toString(36).slice(2)}`);
    mkdirSync(evil);
    const manifest = JSON.parse(readFileSync(join(saved, MANIFEST), 'utf8')) as { files: unknown[] };
    manifest.files.push({ path, kind: 'file' });
    writeFileSync(join(evil, MANIFEST), JSON.stringify(manifest));
    expect(() => restore(evil, join(tmp, 'r2'))).toThrow(`lists a path outside the backup: ${path}`);
  },
);

it('restores into a new folder, and never over a folder that holds a platform', async () => {
  const target = join(tmp, 'restored');
  restore(saved, target);
  const store = openEmbeddedPlatformState({ dataDir: join(target, 'control-plane') });
  expect(await store.getSecrets('default', 'some-secrets')).toEqual({ TOKEN: 'v' });
  await store.close();
  expect(() => restore(saved, target)).toThrow(`${target} already holds a platform`);
});

// One process per embedded data dir. Tried the way it went wrong: the local runtime starts every agent server as
// PID 1 of its own sandbox, so two agent servers on one folder have the same PID; the second must still be refused,
// with a line naming the first. And an owner killed with SIGKILL leaves nothing behind that blocks the next one.
import { spawn, type ChildProcess } from 'node:child_process';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, expect, it } from 'vitest';
import { openEmbeddedStorage } from '../../../../src/agent-server/storage/embedded/index.ts';
import { hasTool } from '../../../support/system-tools.ts';

const HOLDER = join(import.meta.dirname, '../../fixtures', 'hold-embedded-store.ts');
const dirs: string[] = [];
const children: ChildProcess[] = [];
afterAll(() => {
  for (const c of children) c.kill('SIGKILL');
  for (const d of dirs) rmSync(d, { recursive: true, force: true });
});

function dataDir(): string {
  const dir = mkdtempSync(join(tmpdir(), 'ap-owner-'));
  dirs.push(dir);
  return dir;
}

/** Starts the holder (optionally wrapped, e.g. in bwrap), resolves with its first line. */
function holder(dir: string, wrap: string[] = []): { child: ChildProcess; line: Promise<string> } {
  const argv = [...wrap, process.execPath, '--import', 'tsx', HOLDER, dir];
  const child = spawn(argv[0]!, argv.slice(1), { stdio: ['ignore', 'pipe', 'inherit'] });
  children.push(child);
  const line = new Promise<string>((resolve, reject) => {
    let out = '';
    child.stdout!.on('data', (d: Buffer) => {
      out += d.toString();
      if (out.includes('\n')) resolve(out.split('\n')[0]!);
    });
    child.once('error', reject);
    child.once('exit', () => resolve(out));
  });
  return { child, line };
}

it('refuses a second store on a folder a live process has open, naming it', async () => {
  const dir = dataDir();
  const first = holder(dir);
  expect(await first.line).toBe('open');
  expect(() => openEmbeddedStorage({ dataDir: dir })).toThrow(
    new RegExp(`data folder ${dir} is in use by agentplane agent-server \\(pid ${first.child.pid}, started .*\\)`),
  );
});

it('refuses a second store in the same process until the first is closed', async () => {
  const dir = dataDir();
  const storage = openEmbeddedStorage({ dataDir: dir });
  expect(() => openEmbeddedStorage({ dataDir: dir })).toThrow(
    `is in use by agentplane agent-server (pid ${process.pid}`,
  );
  await storage.close();
  await openEmbeddedStorage({ dataDir: dir }).close();
});

it('takes over at once from an owner killed with SIGKILL', async () => {
  const dir = dataDir();
  const first = holder(dir);
  expect(await first.line).toBe('open');
  const gone = new Promise((r) => first.child.once('exit', r));
  first.child.kill('SIGKILL');
  await gone;
  await openEmbeddedStorage({ dataDir: dir }).close();
});

it.runIf(process.platform === 'linux' && hasTool('bwrap', 'the sandboxed case of embedded-owner.test.ts'))(
  'refuses a second agent server when both are PID 1 of their own sandbox',
  async () => {
    const dir = dataDir();
    const sandbox = ['bwrap', '--dev-bind', '/', '/', '--unshare-pid', '--as-pid-1', '--die-with-parent'];
    const first = holder(dir, sandbox);
    expect(await first.line).toBe('open');
    const second = holder(dir, sandbox);
    expect(await second.line).toMatch(
      new RegExp(`^data folder ${dir} is in use by agentplane agent-server \\(pid 1 in its sandbox, started `),
    );
    expect(second.child.exitCode ?? (await new Promise((r) => second.child.once('exit', r)))).toBe(3);
  },
);

// One process per embedded data dir: a live owner blocks a second one; an owner that has ended does not, even when
// it is a zombie nobody reaps (its parent never waits for it, or was killed and the container's PID 1 does not
// collect orphans).
import { spawn, type ChildProcess } from 'node:child_process';
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, expect, it } from 'vitest';
import { openEmbeddedStorage } from '../../src/agent-server/storage/embedded/index.ts';

const dirs: string[] = [];
const children: ChildProcess[] = [];
afterAll(() => {
  for (const c of children) c.kill('SIGKILL');
  for (const d of dirs) rmSync(d, { recursive: true, force: true });
});

function dataDirOwnedBy(pid: number): string {
  const dir = mkdtempSync(join(tmpdir(), 'ap-owner-'));
  dirs.push(dir);
  writeFileSync(join(dir, 'owner.pid'), String(pid));
  return dir;
}

/** Spawns `sh -c script`, resolves with the first line it prints. */
function firstLine(script: string): Promise<string> {
  const child = spawn('sh', ['-c', script], { stdio: ['ignore', 'pipe', 'inherit'] });
  children.push(child);
  return new Promise((resolve, reject) => {
    let out = '';
    child.stdout.on('data', (d: Buffer) => {
      out += d.toString();
      if (out.includes('\n')) resolve(out.split('\n')[0]!);
    });
    child.once('error', reject);
  });
}

const state = (pid: number) => {
  const stat = readFileSync(`/proc/${pid}/stat`, 'utf8');
  return stat.slice(stat.lastIndexOf(')') + 2)[0];
};

it('refuses a data dir whose owner still runs', async () => {
  const pid = Number(await firstLine('echo $$; exec sleep 30'));
  expect(() => openEmbeddedStorage({ dataDir: dataDirOwnedBy(pid) })).toThrow(`is in use by process ${pid}`);
});

it.runIf(process.platform === 'linux')('takes over from an owner that has exited but was never reaped', async () => {
  // A parent made here that never reaps: the shell starts a long `sleep` and then becomes another `sleep` (exec),
  // which never waits for children. Only once it has become that is the child killed, so no shell (bash reaps in
  // its SIGCHLD handler) and no init process (it adopts orphans only) can collect it: it stays a zombie, wherever
  // this runs.
  const [parent, pid] = (await firstLine('sleep 60 & echo $$ $!; exec sleep 61')).split(' ').map(Number) as [
    number,
    number,
  ];
  await expect.poll(() => readFileSync(`/proc/${parent}/cmdline`, 'utf8')).toBe('sleep\u000061\u0000');
  process.kill(pid, 'SIGKILL');
  await expect.poll(() => state(pid)).toBe('Z');
  expect(readFileSync(`/proc/${pid}/stat`, 'utf8').split(') ')[1]!.split(' ')[1]).toBe(String(parent));
  const storage = openEmbeddedStorage({ dataDir: dataDirOwnedBy(pid) });
  await storage.close();
});

it('takes over from an owner that is gone', async () => {
  const child = spawn('true');
  const pid = child.pid!;
  await new Promise((r) => child.once('exit', r));
  const storage = openEmbeddedStorage({ dataDir: dataDirOwnedBy(pid) });
  await storage.close();
});

// Two platforms on one data folder, tried as a user following the old busy-port hint would: start `agentplane dev`,
// then start it again on the same --data-dir with another port. The second would have started a second agent
// server on each deployment's data and rewritten the ports file; it must stop at once with one line naming the
// first. `control-plane` on the same store and a `listener` on its folder are refused the same way, and a platform
// killed with SIGKILL leaves nothing that blocks the next start.
import { spawn } from 'node:child_process';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join, resolve } from 'node:path';
import { afterAll, expect, it } from 'vitest';
import { startControlPlaneProcess } from '../control-plane/helpers/process.ts';
import { startDev, stopDev, type DevProcess } from './helpers.ts';

const BIN = resolve(import.meta.dirname, '../../bin/agentplane.mjs');
const dataDir = mkdtempSync(join(tmpdir(), 'ap-owner-dev-'));
const running: DevProcess[] = [];
afterAll(async () => {
  for (const dev of running) await stopDev(dev, 'SIGKILL');
  rmSync(dataDir, { recursive: true, force: true });
});

function agentplane(args: string[]): Promise<{ code: number | null; stdout: string; stderr: string }> {
  const child = spawn(process.execPath, [BIN, ...args], {
    env: { ...process.env, AGENTPLANE_BOOTSTRAP_API_KEY: 'second-instance-key-0123456789' },
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  let stdout = '';
  let stderr = '';
  child.stdout.on('data', (d: Buffer) => (stdout += d.toString()));
  child.stderr.on('data', (d: Buffer) => (stderr += d.toString()));
  return new Promise((r) => child.once('close', (code) => r({ code, stdout, stderr })));
}

it('refuses a second dev, a control-plane and a listener on the folder of a running dev, in one line', async () => {
  const first = await startDev(dataDir, 0, ['--sandbox', 'none']);
  running.push(first);
  const owner = `agentplane dev \\(pid ${first.child.pid} at ${first.url.replace(/\./g, '\\.')}, started [^)]+\\)`;

  const second = await agentplane(['dev', '--port', '0', '--data-dir', dataDir, '--sandbox', 'none']);
  expect(second.code).toBe(1);
  expect(second.stderr).toMatch(
    new RegExp(
      `^agentplane dev: data folder ${dataDir} is in use by ${owner}: stop that process or pass another --data-dir\\n$`,
    ),
  );
  expect(second.stdout).not.toContain('is running');

  const cp = await agentplane(['control-plane', '--port', '0', '--data-dir', join(dataDir, 'control-plane')]);
  expect(cp.code).toBe(1);
  expect(cp.stderr).toMatch(
    new RegExp(`^agentplane control-plane: data folder ${dataDir}/control-plane is in use by ${owner}`),
  );

  const listener = await agentplane([
    'listener',
    '--control-plane-url',
    first.url,
    '--api-key',
    'second-instance-key-0123456789',
    '--tenant',
    't1',
    '--listener-id',
    '6f1c1c55-58a3-4c38-9d3b-0b7c1f0f4c11',
    '--runtime',
    'local',
    '--data-dir',
    dataDir,
    '--port',
    '0',
  ]);
  expect(listener.code).toBe(1);
  expect(listener.stderr).toMatch(new RegExp(`^agentplane listener: data folder ${dataDir} is in use by ${owner}`));

  // The first is untouched and still answers.
  expect((await fetch(`${first.url}/ok`)).status).toBeLessThan(500);
});

it('lets control-plane replicas share a store, and refuses a dev on the folder they serve', async () => {
  const other = mkdtempSync(join(tmpdir(), 'ap-owner-cp-'));
  const replicas = await Promise.all(
    [0, 1].map(() => startControlPlaneProcess(['--data-dir', join(other, 'control-plane')])),
  );
  try {
    const dev = await agentplane(['dev', '--port', '0', '--data-dir', other, '--sandbox', 'none']);
    expect(dev.code).toBe(1);
    expect(dev.stderr).toMatch(
      new RegExp(
        `^agentplane dev: data folder ${other}/control-plane is in use by agentplane control-plane \\(pid (${replicas.map((r) => r.child.pid).join('|')}) at http`,
      ),
    );
  } finally {
    await Promise.all(replicas.map((r) => r.stop()));
    rmSync(other, { recursive: true, force: true });
  }
});

it('starts again at once on the folder of a dev killed with SIGKILL', async () => {
  const first = running.pop()!;
  await stopDev(first, 'SIGKILL');
  const again = await startDev(dataDir, 0, ['--sandbox', 'none']);
  running.push(again);
  expect(again.output()).toContain('agentplane dev is running');
});

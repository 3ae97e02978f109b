// Day two on one machine, the way it went wrong for a user: back up a running platform, lose the data folder, and
// restore the backup into a fresh one. Before, the folder held no recipe for the builds it did not keep, every
// serving deployment stayed "NotServing: the build of this revision is not on disk", and without the ports file
// every URL moved. Here: two deployments (one with a secret that decides its answers), threads on both; then
// `agentplane backup` while it runs, `agentplane restore` refused over the running platform, the old folder deleted,
// a restore into a new folder, and a platform started on it that serves the same threads on the same URLs, the
// secret still read with the restored key.
import { execFile } from 'node:child_process';
import { existsSync, mkdtempSync, readdirSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join, resolve } from 'node:path';
import { Client } from '@langchain/langgraph-sdk';
import { afterAll, beforeAll, expect, it } from 'vitest';
import { makeExampleRepo, type ExampleRepo } from '../operator/helpers/example-repo.ts';
import {
  API_KEY,
  LINKED_INSTALL,
  TENANT,
  startDev,
  stopDev,
  waitFor,
  workspaceKey,
  type DevProcess,
} from '../dev/helpers.ts';

const BIN = resolve(import.meta.dirname, '../../bin/agentplane.mjs');
const SECRET_GREETING = 'Greetings-from-a-secret';

let tmp: string;
let repo: ExampleRepo;
const running: DevProcess[] = [];

function cli(args: string[], env: Record<string, string> = {}, url = running[0]?.url ?? '') {
  return new Promise<{ code: number; stdout: string; stderr: string }>((res) => {
    execFile(
      process.execPath,
      [BIN, ...args],
      {
        cwd: tmp,
        env: { ...process.env, AGENTPLANE_URL: url, AGENTPLANE_API_KEY: API_KEY, AGENTPLANE_TENANT: TENANT, ...env },
        maxBuffer: 16 * 1024 * 1024,
      },
      (err, stdout, stderr) => res({ code: err ? ((err as { code?: number }).code ?? 1) : 0, stdout, stderr }),
    );
  });
}

beforeAll(() => {
  tmp = mkdtempSync(join(tmpdir(), 'ap-backup-'));
  repo = makeExampleRepo(tmp);
});

afterAll(async () => {
  for (const dev of running) await stopDev(dev, 'SIGKILL');
  rmSync(tmp, { recursive: true, force: true });
});

type Dep = { id: string; url: string; health?: { ready: boolean } };

async function lastAnswer(client: Client, threadId: string): Promise<string> {
  const state = await client.threads.getState<{ messages: { type: string; content: unknown }[] }>(threadId);
  const last = state.values.messages.at(-1)!;
  return typeof last.content === 'string' ? last.content : JSON.stringify(last.content);
}

it('restores a running platform into a new folder: same deployments, threads, URLs and secrets', async () => {
  const first = join(tmp, 'data');
  const dev = await startDev(first);
  running.push(dev);
  const agentKey = await workspaceKey(dev.url);

  const made: Record<string, { dep: Dep; thread: string; answer: string }> = {};
  for (const [name, ref, env] of [
    ['with-secret', 'main', { AGENT_GREETING: SECRET_GREETING }],
    ['plain', 'v2', {}],
  ] as const) {
    const args = ['deploy', '--name', name, '--repo-url', repo.path, '--ref', ref, '--wait', '--json'];
    args.push('--install-command', LINKED_INSTALL); // the restore rebuilds from this recipe too
    const out = await cli(name === 'with-secret' ? [...args, '--secret-from-env', 'AGENT_GREETING'] : args, env);
    expect(out.code, out.stderr).toBe(0);
    const got = await cli(['deployments', 'get', name, '--json']);
    const dep = JSON.parse(got.stdout) as Dep;
    const client = new Client({ apiUrl: dep.url, apiKey: agentKey, callerOptions: { maxRetries: 0 } });
    const thread = await client.threads.create();
    await client.runs.wait(thread.thread_id, 'agent', {
      input: { messages: [{ role: 'user', content: 'greet Ada' }] },
    });
    made[name] = { dep, thread: thread.thread_id, answer: await lastAnswer(client, thread.thread_id) };
  }
  expect(made['with-secret']!.answer).toContain(SECRET_GREETING);
  expect(made.plain!.answer).toContain('Howdy');

  // Online: the platform keeps running and writing while the copy is taken.
  const backupDir = join(tmp, 'backup');
  const backedUp = await cli(['backup', '--to', backupDir, '--data-dir', first]);
  expect(backedUp.code, backedUp.stderr).toBe(0);
  expect(backedUp.stdout).toMatch(/Backed up .*: 3 SQLite store\(s\) and 2 file\(s\)/);
  expect(readdirSync(join(backupDir, 'control-plane')).sort()).toEqual(['control-plane.db', 'secret.key']);

  // Never over a running platform, whatever the folder holds.
  const over = await cli(['restore', '--from', backupDir, '--data-dir', first]);
  expect(over.code).toBe(1);
  expect(over.stderr).toMatch(
    new RegExp(`^agentplane restore: ${first} is in use by agentplane dev \\(pid ${dev.child.pid}\\)`),
  );

  await stopDev(running.pop()!);
  rmSync(first, { recursive: true, force: true });

  const second = join(tmp, 'restored');
  const restored = await cli(['restore', '--from', backupDir, '--data-dir', second]);
  expect(restored.code, restored.stderr).toBe(0);
  // Nothing of the builds came back: the platform has to build each serving revision again from its commit.
  expect(existsSync(join(second, 'runtime', 'deployments', made.plain!.dep.id, 'builds'))).toBe(false);

  const again = await startDev(second);
  running.push(again);
  for (const [name, { dep, thread, answer }] of Object.entries(made)) {
    let last = '';
    const now = await waitFor(`${name} to serve again`, async () => {
      const got = await cli(['deployments', 'get', name, '--json'], {}, again.url);
      last = got.stdout + got.stderr;
      const d = JSON.parse(got.stdout) as Dep;
      return d.health?.ready ? d : undefined;
    }).catch((err: Error) => {
      throw new Error(`${err.message}; it says ${last}\n${again.output()}`);
    });
    expect(now.url).toBe(dep.url);
    const client = new Client({ apiUrl: now.url, apiKey: agentKey, callerOptions: { maxRetries: 0 } });
    expect(await lastAnswer(client, thread)).toBe(answer);
    // And it still runs: the secret decrypted with the restored key decides the new answer as it did the old one.
    await client.runs.wait(thread, 'agent', { input: { messages: [{ role: 'user', content: 'greet Ada' }] } });
    expect(await lastAnswer(client, thread)).toBe(answer);
  }
}, 600_000);

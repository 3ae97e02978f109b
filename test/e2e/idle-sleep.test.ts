// The idle policy through the whole platform, as a user meets it: a deployment asking for idle_timeout_minutes falls
// asleep once idle (its agent server process gone), and the API (health, status_summary, the Sleeping condition's
// words) and `agentplane deployments get|list` say so; the first call with the SDK wakes it and is answered, and the
// status turns back to serving. An idle "minute" lasts two seconds here (AGENTPLANE_IDLE_MINUTE_MS, the test knob).
import { execFile } from 'node:child_process';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join, resolve } from 'node:path';
import { Client } from '@langchain/langgraph-sdk';
import { afterAll, beforeAll, expect, it } from 'vitest';
import { makeExampleRepo, type ExampleRepo } from '../operator/helpers/example-repo.ts';
import {
  api,
  API_KEY,
  childProcesses,
  LINKED_INSTALL,
  startDev,
  stopDev,
  TENANT,
  waitFor,
  workspaceKey,
  type DevProcess,
} from '../dev/helpers.ts';

const BIN = resolve(import.meta.dirname, '../../bin/agentplane.mjs');
let tmp: string;
let repo: ExampleRepo;
let dev: DevProcess;
/** The first test's deployment and thread, for the restart test. */
let sleepy: { id: string; url: string; threadId: string; agentKey: string } | undefined;

function cli(args: string[]) {
  return new Promise<{ code: number; stdout: string; stderr: string }>((res) => {
    execFile(
      process.execPath,
      [BIN, ...args],
      {
        cwd: tmp,
        env: { ...process.env, AGENTPLANE_URL: dev.url, AGENTPLANE_API_KEY: API_KEY, AGENTPLANE_TENANT: TENANT },
      },
      (err, stdout, stderr) => res({ code: err ? ((err as { code?: number }).code ?? 1) : 0, stdout, stderr }),
    );
  });
}

beforeAll(async () => {
  tmp = mkdtempSync(join(tmpdir(), 'ap-idle-dev-'));
  repo = makeExampleRepo(tmp);
  process.env.AGENTPLANE_IDLE_MINUTE_MS = '2000';
  dev = await startDev(join(tmp, 'data'), 0, ['--sandbox', 'none']);
}, 120_000);

afterAll(async () => {
  if (dev) await stopDev(dev);
  delete process.env.AGENTPLANE_IDLE_MINUTE_MS;
  rmSync(tmp, { recursive: true, force: true });
});

const agentServers = () => childProcesses(dev.child.pid!).filter((p) => p.includes('agent-server'));

it('shows a sleeping deployment in the API and the CLI, and wakes it on the first call', async () => {
  const http = api(dev.url);
  const agentKey = await workspaceKey(dev.url);
  const created = await http.post('/v2/deployments', {
    name: 'sleepy',
    source: 'github',
    source_config: { repo_url: repo.path, install_command: LINKED_INSTALL, resource_spec: { idle_timeout_minutes: 2 } },
    source_revision_config: { repo_ref: 'main', graph_config_path: 'langgraph.json' },
  });
  expect(created.status, JSON.stringify(created.body)).toBe(201);
  const id = created.body.id as string;
  expect(created.body.source_config.resource_spec).toMatchObject({ idle_timeout_minutes: 2 });

  const dep = await waitFor('the deployment to sleep', async () => {
    const got = await http.get(`/v2/deployments/${id}`);
    return got.body.health?.reason === 'Sleeping' ? got.body : undefined;
  });
  expect(dep.health).toMatchObject({ ready: true, reason: 'Sleeping' });
  expect(dep.health.message).toMatch(/the first request starts it/);
  expect(dep.status_summary).toMatchObject({ state: 'serving', reason: 'Sleeping', serving_revision_number: 1 });
  expect(agentServers()).toEqual([]);

  const got = await cli(['deployments', 'get', 'sleepy']);
  expect(got.code, got.stderr).toBe(0);
  expect(got.stdout).toMatch(/status:\s+sleeping \(serving rev 1\)/);
  expect(got.stdout).toMatch(/health:\s+ready \(Sleeping\)/);
  const list = await cli(['deployments', 'list']);
  expect(list.stdout).toMatch(/sleepy\s+\S+\s+sleeping \(serving rev 1\)/);

  // The first call wakes it (the SDK does not retry here: it is held, not refused).
  const client = new Client({ apiUrl: dep.url, apiKey: agentKey, callerOptions: { maxRetries: 0 } });
  const thread = await client.threads.create();
  await client.runs.wait(thread.thread_id, 'agent', { input: { messages: [{ role: 'user', content: 'Ada' }] } });
  const state = await client.threads.getState<{ messages: { content: unknown }[] }>(thread.thread_id);
  expect(String(state.values.messages.at(-1)!.content)).toContain('Hello, Ada!');
  expect(agentServers()).toHaveLength(1);
  const awake = await waitFor('the status to say it serves', async () => {
    const d = (await http.get(`/v2/deployments/${id}`)).body;
    return d.health?.reason !== 'Sleeping' ? d : undefined;
  });
  expect(awake.status_summary).toMatchObject({ state: 'serving', reason: 'Serving' });
  expect(awake.health).toMatchObject({ ready: true });
  sleepy = { id, url: dep.url, threadId: thread.thread_id, agentKey };
}, 600_000);

it('keeps a sleeping deployment asleep across a restart of the platform, and wakes it with its threads', async () => {
  expect(sleepy).toBeDefined();
  const { id, url, threadId, agentKey } = sleepy!;
  const http = () => api(dev.url);
  await waitFor('the deployment to sleep again', async () => {
    const got = await http().get(`/v2/deployments/${id}`);
    return got.body.health?.reason === 'Sleeping' && agentServers().length === 0 ? got.body : undefined;
  });
  const revId = String((await http().get(`/v2/deployments/${id}`)).body.latest_revision_id);
  const deployLog = async () =>
    (
      (await http().get(`/v2/deployments/${id}/revisions/${revId}/logs?type=deploy&limit=1000`)).body.logs as {
        message: string;
      }[]
    ).map((l) => l.message);
  const linesBefore = (await deployLog()).length;
  await stopDev(dev);
  dev = await startDev(join(tmp, 'data'), 0, ['--sandbox', 'none']);

  // The controllers reconcile it again: the runtime either finds its sleep written down, or starts a server.
  const said = await waitFor('the restarted platform to reconcile it', async () => {
    const fresh = (await deployLog()).slice(linesBefore);
    return fresh.find((l) => /stays asleep|starting agent server/.test(l));
  });
  expect(said).toMatch(/the platform started again: the agent server stays asleep/);
  expect(agentServers()).toEqual([]);
  const dep = (await http().get(`/v2/deployments/${id}`)).body;
  expect(dep.health).toMatchObject({ ready: true, reason: 'Sleeping' });
  expect(dep.status_summary).toMatchObject({ state: 'serving', reason: 'Sleeping' });
  // Several of the runtime's idle checks and reconciles later, still no agent server.
  await new Promise((r) => setTimeout(r, 3000));
  expect(agentServers()).toEqual([]);

  // The first call wakes it, on the same URL, with the thread it had before the restart.
  expect(dep.url).toBe(url);
  const client = new Client({ apiUrl: dep.url, apiKey: agentKey, callerOptions: { maxRetries: 0 } });
  const state = await client.threads.getState<{ messages: { content: unknown }[] }>(threadId);
  expect(String(state.values.messages.at(-1)!.content)).toContain('Hello, Ada!');
  expect(agentServers()).toHaveLength(1);
  await waitFor('the status to say it serves', async () => {
    const d = (await http().get(`/v2/deployments/${id}`)).body;
    return d.health?.ready && d.health.reason !== 'Sleeping' ? d : undefined;
  });
}, 600_000);

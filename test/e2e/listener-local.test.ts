// Issue 16 "Done means", local runtime: a control plane process (`agentplane dev`, whose own operator must leave the
// deployment alone) and a listener process with its own data dir. Create on the listener -> DEPLOYED with its URL,
// the agent answers through the real SDK, logs through the control plane; patch -> new revision on the data plane;
// kill -9 mid-build and restart -> converges with no duplicate; control plane stopped -> the agent keeps answering and
// status catches up; delete -> gone on the data plane. Faults: a wrong key (401, one clear line, retries) and a
// listener that never connects (waiting, not FAILED).
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { Client } from '@langchain/langgraph-sdk';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { openEmbeddedPlatformState } from '../../src/state/embedded/index.ts';
import { makeExampleRepo, type ExampleRepo } from '../operator/helpers/example-repo.ts';
import {
  LINKED_INSTALL,
  TENANT,
  api,
  startDev,
  stopDev,
  waitFor,
  workspaceKey,
  type DevProcess,
} from '../dev/helpers.ts';
import { startListener, stopListener, type ListenerProcess } from '../listener/helpers.ts';

let tmp: string;
let repo: ExampleRepo;
let dev: DevProcess | undefined;
const listeners: ListenerProcess[] = [];

beforeAll(() => {
  tmp = mkdtempSync(join(tmpdir(), 'ap-listener-e2e-'));
  repo = makeExampleRepo(tmp);
});

afterAll(async () => {
  for (const l of listeners) await stopListener(l, 'SIGKILL');
  if (dev) await stopDev(dev, 'SIGKILL');
  rmSync(tmp, { recursive: true, force: true });
});

type Rev = { id: string; status: string; status_message: string | null };

async function revision(base: string, depId: string, revId: string): Promise<Rev> {
  const { status, body } = await api(base).get(`/v2/deployments/${depId}/revisions/${revId}`);
  expect(status).toBe(200);
  return body as Rev;
}

async function deployed(base: string, depId: string, revId: string): Promise<Rev> {
  const rev = await waitFor(`revision ${revId} to finish`, async () => {
    const r = await revision(base, depId, revId);
    return r.status === 'DEPLOYED' || r.status.includes('FAILED') ? r : undefined;
  });
  expect(`${rev.status} ${rev.status === 'DEPLOYED' ? '' : rev.status_message}`.trim()).toBe('DEPLOYED');
  return rev;
}

/** A key of the workspace (agents refuse the bootstrap key), made once the control plane runs. */
let agentKey = '';

async function greet(url: string): Promise<string> {
  const client = new Client({ apiUrl: url, apiKey: agentKey });
  const thread = await client.threads.create();
  const run = await client.runs.create(thread.thread_id, 'agent', {
    input: { messages: [{ role: 'human', content: 'Ada' }] },
  });
  await client.runs.join(thread.thread_id, run.run_id);
  const state = await client.threads.getState<{ messages: { content: unknown }[] }>(thread.thread_id);
  return String(state.values.messages.at(-1)!.content);
}

/** What the listener's own store holds (opened read-only in spirit: the test only lists). */
async function dataPlane(dir: string) {
  const store = openEmbeddedPlatformState({ dataDir: join(dir, 'store') });
  try {
    const [deps, revs] = await Promise.all([store.list('AgentDeployment'), store.list('AgentRevision')]);
    return { deployments: deps.items, revisions: revs.items.map((r) => r.metadata.name).sort() };
  } finally {
    await store.close();
  }
}

// The two tests share nothing (each its own control plane, listener and data dirs) and run at once: the second one
// mostly waits through the listener's retries.
describe.concurrent('a deployment on a listener with the local runtime', () => {
  it('is built, served and reported by the listener; converges after crashes of either side', async ({ expect }) => {
    dev = await startDev(join(tmp, 'cp'));
    const cp = api(dev.url);
    agentKey = await workspaceKey(dev.url);

    const created = await cp.post('/v2/listeners', { compute_type: 'local', compute_id: 'laptop-1' });
    expect(created.status).toBe(201);
    const lid = String(created.body.id);
    expect(created.body).toMatchObject({ connected: false, deployment_count: 0, last_seen_at: null });
    expect((await cp.post('/v2/listeners', { compute_type: 'local', compute_id: 'laptop-1' })).status).toBe(409);
    const keyRes = await cp.post(`/v2/listeners/${lid}/keys`, {});
    expect(keyRes.status).toBe(201);
    const listenerKey = String(keyRes.body.key);

    // Created before the listener ever connected: waiting, not FAILED, and the dev operator does not take it.
    const dep = await cp.post('/v2/deployments', {
      name: 'on-listener',
      source: 'github',
      source_config: { repo_url: repo.path, deployment_type: 'dev', listener_id: lid, install_command: LINKED_INSTALL },
      source_revision_config: { repo_ref: 'main', graph_config_path: 'langgraph.json' },
      secrets: [{ name: 'E2E_SECRET', value: 'listener-secret-77' }],
    });
    expect(dep.status).toBe(201);
    const depId = String(dep.body.id);
    const r1 = String(dep.body.latest_revision_id);
    expect(await revision(dev.url, depId, r1)).toMatchObject({
      status: 'QUEUED',
      status_message: `waiting for listener ${lid} to connect`,
    });
    // A later write the dev operator sees (a second, ordinary deployment) gets reconciled; ours stays waiting.
    const plain = await cp.post('/v2/deployments', {
      name: 'plain',
      source: 'external_docker',
      source_config: { deployment_type: 'dev' },
      source_revision_config: { image_uri: 'example/agent:1' },
      secrets: [],
    });
    await waitFor('the dev operator to act on the ordinary deployment', async () => {
      const r = await revision(dev!.url, String(plain.body.id), String(plain.body.latest_revision_id));
      return r.status === 'CREATE_FAILED' ? r : undefined;
    });
    expect(await revision(dev.url, depId, r1)).toMatchObject({ status: 'QUEUED' });

    const lisDir = join(tmp, 'listener');
    // Retries of an unreachable control plane capped at 2 s: the test stops it below for as long as a build takes,
    // and must not then sit out a retry delay grown to 16 s or 30 s before the listener sees it back.
    const retries = ['--max-retry-delay', '2'];
    let lis = await startListener({
      controlPlaneUrl: dev.url,
      apiKey: listenerKey,
      tenant: TENANT,
      listenerId: lid,
      dataDir: lisDir,
      extraArgs: retries,
    });
    listeners.push(lis);
    const lisUrl = lis.url!;
    // The workspace declares where this listener serves; the URLs it reports must lie under it.
    expect((await cp.patch(`/v2/listeners/${lid}`, { base_url: lisUrl })).status).toBe(200);
    await deployed(dev.url, depId, r1);
    const shown = (await cp.get(`/v2/deployments/${depId}`)).body;
    expect(shown).toMatchObject({ url: `${lisUrl}/deployments/${depId}`, active_revision_id: r1 });
    expect(shown.source_config.listener_id).toBe(lid);
    expect(await greet(String(shown.url))).toContain('Hello');
    const buildLogs = await cp.get(`/v2/deployments/${depId}/revisions/${r1}/logs?type=build&limit=1000`);
    expect(buildLogs.status).toBe(200);
    expect(buildLogs.body.logs.length).toBeGreaterThan(0);
    const deployLogs = await cp.get(`/v2/deployments/${depId}/revisions/${r1}/logs?type=deploy&limit=1000`);
    expect(deployLogs.body.logs.length).toBeGreaterThan(0);
    expect(JSON.stringify([buildLogs.body, deployLogs.body])).not.toContain('listener-secret-77');
    expect(lis.output()).not.toContain('listener-secret-77');
    const record = (await cp.get(`/v2/listeners/${lid}`)).body;
    expect(record).toMatchObject({ connected: true, deployment_count: 1, agent_version: expect.any(String) });
    expect(record.last_seen_at).not.toBeNull();
    // listener_id is immutable.
    const moved = await cp.patch(`/v2/deployments/${depId}`, { source_config: { listener_id: null } });
    expect(moved.status).toBe(400);

    // Patch -> a new revision, built on the data plane.
    const patched = await cp.patch(`/v2/deployments/${depId}`, { source_revision_config: { repo_ref: 'v2' } });
    expect(patched.status).toBe(200);
    const r2 = String(patched.body.latest_revision_id);
    expect(r2).not.toBe(r1);
    await deployed(dev.url, depId, r2);
    expect(await greet(String(shown.url))).toContain('Howdy');

    // kill -9 the listener while it builds r3; a restart converges with no duplicate revision.
    const r3 = String(
      (await cp.patch(`/v2/deployments/${depId}`, { source_revision_config: { repo_ref: 'v1' } })).body
        .latest_revision_id,
    );
    await waitFor('the listener to report r3 building', async () => {
      const r = await revision(dev!.url, depId, r3);
      return ['AWAITING_BUILD', 'BUILDING', 'AWAITING_DEPLOY', 'DEPLOYING'].includes(r.status) ? r : undefined;
    });
    await stopListener(lis, 'SIGKILL');
    lis = await startListener({
      controlPlaneUrl: dev.url,
      apiKey: listenerKey,
      tenant: TENANT,
      listenerId: lid,
      dataDir: lisDir,
      port: Number(new URL(lisUrl).port),
      extraArgs: retries,
    });
    listeners.push(lis);
    await deployed(dev.url, depId, r3);
    const revs = (await cp.get(`/v2/deployments/${depId}/revisions`)).body.resources as Rev[];
    expect(revs.map((r) => r.id).sort()).toEqual([r1, r2, r3].sort());
    const plane = await dataPlane(lisDir);
    expect(plane.revisions).toHaveLength(3);
    expect(new Set(plane.revisions).size).toBe(3);
    expect(plane.deployments).toHaveLength(1);

    // The control plane goes away: the agent keeps answering; a revision it handed over before leaving is built
    // meanwhile and its status reaches the control plane once it is back.
    const r4 = String((await cp.post(`/v2/deployments/${depId}/revisions`)).body.id);
    await waitFor('the listener to take r4', async () => {
      const r = await revision(dev!.url, depId, r4);
      return r.status !== 'QUEUED' ? r : undefined;
    });
    const cpPort = dev.port;
    await stopDev(dev);
    expect(await greet(String(shown.url))).toContain('Hello');
    await waitFor('r4 to be deployed on the data plane', async () => {
      const p = await dataPlane(lisDir);
      const d = p.deployments[0]!;
      return d.status?.activeRevisionName?.endsWith('-r4') ? d : undefined;
    });
    expect(await greet(String(shown.url))).toContain('Hello');
    dev = await startDev(join(tmp, 'cp'), cpPort);
    await deployed(dev.url, depId, r4);

    // Delete on the control plane -> gone on the data plane.
    expect((await cp.delete(`/v2/deployments/${depId}`)).status).toBe(204);
    await waitFor('the data plane to drop the deployment', async () =>
      (await dataPlane(lisDir)).deployments.length === 0 ? true : undefined,
    );
    await waitFor('the URL to stop answering', async () =>
      (await fetch(`${String(shown.url)}/ok`)).status === 404 ? true : undefined,
    );
    expect((await cp.get(`/v2/listeners/${lid}`)).body.deployment_count).toBe(0);
  }, 900_000);

  it('a wrong key: 401, one clear line, retries with backoff; a listener that never connects leaves work waiting', async ({
    expect,
    onTestFinished,
  }) => {
    const cpDev = await startDev(join(tmp, 'cp-wrong-key'));
    onTestFinished(() => stopDev(cpDev, 'SIGKILL').then(() => undefined));
    const cp = api(cpDev.url);
    const lid = String((await cp.post('/v2/listeners', { compute_type: 'local', compute_id: 'never' })).body.id);
    const dep = await cp.post('/v2/deployments', {
      name: 'waits',
      source: 'github',
      source_config: { repo_url: repo.path, deployment_type: 'dev', listener_id: lid, install_command: LINKED_INSTALL },
      source_revision_config: { repo_ref: 'main', graph_config_path: 'langgraph.json' },
      secrets: [],
    });
    expect(dep.status).toBe(201);
    const lis = await startListener({
      controlPlaneUrl: cpDev.url,
      apiKey: 'apk_wrong-key-000000000000000000000000000000',
      tenant: TENANT,
      listenerId: lid,
      dataDir: join(tmp, 'listener-wrong'),
    });
    listeners.push(lis);
    await waitFor('the refusal line', async () => (lis.output().includes('(401') ? true : undefined), 30_000);
    // Several retries later (backoff 0.5 s, 1 s, 2 s, ...) there is still exactly one line about it.
    await new Promise((r) => setTimeout(r, 4_000));
    const lines = lis
      .output()
      .split('\n')
      .filter((l) => l.includes('refused the listener key'));
    expect(lines).toHaveLength(1);
    expect(lines[0]).toContain('Invalid API key');
    expect(lines[0]).not.toContain('wrong-key');
    const rev = await revision(cpDev.url, String(dep.body.id), String(dep.body.latest_revision_id));
    expect(rev).toMatchObject({ status: 'QUEUED', status_message: `waiting for listener ${lid} to connect` });
    expect((await cp.get(`/v2/listeners/${lid}`)).body).toMatchObject({ connected: false, last_seen_at: null });
    await stopListener(lis);
  }, 120_000);
});

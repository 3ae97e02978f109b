// Issue 4 "Done means": `agentplane dev` as a real process, a real git repo made from examples/agent, the quick
// flow over HTTP, the real SDK against the deployment URL, failures that keep the live revision serving, restart
// after a crash, redeploy without rebuild, DELETE with no child process left.
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { Client } from '@langchain/langgraph-sdk';
import { Client as McpClient } from '@modelcontextprotocol/sdk/client/index.js';
import { StreamableHTTPClientTransport } from '@modelcontextprotocol/sdk/client/streamableHttp.js';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { makeExampleRepo, type ExampleRepo } from '../operator/helpers/example-repo.ts';
import {
  API_KEY,
  workspaceKey,
  alive,
  api,
  childPids,
  childProcesses,
  startDev,
  stopDev,
  waitFor,
  type DevProcess,
} from '../dev/helpers.ts';

let tmp: string;
let repo: ExampleRepo;
let dev: DevProcess | undefined;

beforeAll(() => {
  tmp = mkdtempSync(join(tmpdir(), 'ap-dev-e2e-'));
  repo = makeExampleRepo(tmp);
});

afterAll(async () => {
  if (dev) await stopDev(dev, 'SIGKILL');
  rmSync(tmp, { recursive: true, force: true });
});

type Rev = { id: string; status: string; status_message: string | null; repo_commit_sha: string | null };

async function revisionDone(base: string, depId: string, revId: string): Promise<Rev> {
  const cp = api(base);
  return waitFor(`revision ${revId} to finish`, async () => {
    const { status, body } = await cp.get(`/v2/deployments/${depId}/revisions/${revId}`);
    expect(status).toBe(200);
    const s = String(body.status);
    return s === 'DEPLOYED' || s.includes('FAILED') ? (body as Rev) : undefined;
  });
}

/** Waits for DEPLOYED; on failure the assertion shows the status message and the deploy log. */
async function expectDeployed(base: string, depId: string, revId: string): Promise<Rev> {
  const rev = await revisionDone(base, depId, revId);
  const why = rev.status === 'DEPLOYED' ? '' : ` ${rev.status_message}\n${await logText(base, depId, revId, 'deploy')}`;
  expect(`${rev.status}${why}`).toBe('DEPLOYED');
  return rev;
}

/** A key of the workspace: agents refuse the bootstrap key. */
let agentKey = '';

async function greet(url: string, threadId?: string): Promise<{ text: string; threadId: string }> {
  const client = new Client({ apiUrl: url, apiKey: agentKey });
  const thread = threadId ? { thread_id: threadId } : await client.threads.create();
  const run = await client.runs.create(thread.thread_id, 'agent', {
    input: { messages: [{ role: 'human', content: 'Ada' }] },
  });
  await client.runs.join(thread.thread_id, run.run_id);
  const fetched = await client.runs.get(thread.thread_id, run.run_id);
  expect(fetched.status).toBe('success');
  const state = await client.threads.getState<{ messages: { content: unknown }[] }>(thread.thread_id);
  expect(state.next).toEqual([]);
  return { text: String(state.values.messages.at(-1)!.content), threadId: thread.thread_id };
}

/** Hits the deployment URL continuously; returns the failures seen until stopped. */
function probeContinuously(url: string) {
  let stop = false;
  const failures: string[] = [];
  let ok = 0;
  const loop = (async () => {
    while (!stop) {
      try {
        const res = await fetch(`${url}/ok`);
        if (res.status === 200) ok++;
        else failures.push(`HTTP ${res.status}`);
        await res.arrayBuffer();
      } catch (err) {
        failures.push(String(err));
      }
    }
  })();
  return {
    async end() {
      stop = true;
      await loop;
      return { ok, failures };
    },
  };
}

async function logText(base: string, depId: string, revId: string, type: 'build' | 'deploy'): Promise<string> {
  const { status, body } = await api(base).get(
    `/v2/deployments/${depId}/revisions/${revId}/logs?type=${type}&limit=1000`,
  );
  expect(status).toBe(200);
  return (body.logs as { message: string }[]).map((l) => l.message).join('\n');
}

describe('agentplane dev end to end', () => {
  it('deploys from git, switches revisions on one URL, survives failures and a crash, cleans up', async () => {
    const dataDir = join(tmp, 'data');
    dev = await startDev(dataDir);
    const cp = api(dev.url);
    expect((await cp.get('/ok')).status).toBe(200);
    agentKey = await workspaceKey(dev.url);

    // Create (quick flow), poll to DEPLOYED.
    const created = await cp.post('/v2/deployments', {
      name: 'hello-agent',
      source: 'github',
      source_config: { repo_url: repo.path, deployment_type: 'dev' },
      source_revision_config: { repo_ref: 'main', graph_config_path: 'langgraph.json' },
      secrets: [{ name: 'E2E_SECRET', value: 'do-not-log-me-42' }],
    });
    expect(created.status).toBe(201);
    const depId = String(created.body.id);
    const r1 = String(created.body.latest_revision_id);
    const rev1 = await expectDeployed(dev.url, depId, r1);
    expect(rev1.repo_commit_sha).toBe(repo.sha('main'));
    const dep = (await cp.get(`/v2/deployments/${depId}`)).body;
    const url = String(dep.url);
    // An origin of its own: never the console's.
    expect(url).toMatch(/^http:\/\/127\.0\.0\.1:\d+$/);
    expect(new URL(url).origin).not.toBe(new URL(dev.url).origin);
    expect((await fetch(`${dev.url}/deployments/${depId}/ok`)).status).toBe(404);
    expect(dep.active_revision_id).toBe(r1);

    // The real SDK against the deployment URL.
    const first = await greet(url);
    expect(first.text).toBe('The greeting tool says: Hello, Ada!');

    // The same agent through the one-machine proxy as an MCP server (the official SDK client) and an A2A agent, with
    // the workspace key; the bootstrap key is refused there as everywhere on the agent.
    const mcp = new McpClient({ name: 'e2e', version: '1.0.0' });
    await mcp.connect(
      new StreamableHTTPClientTransport(new URL(`${url}/mcp`), { requestInit: { headers: { 'X-Api-Key': agentKey } } }),
    );
    try {
      expect((await mcp.listTools()).tools.map((t) => t.name)).toEqual(['agent']);
      const called = await mcp.callTool({
        name: 'agent',
        arguments: { messages: [{ role: 'human', content: 'Ada' }] },
      });
      const messages = (called.structuredContent as { messages: Array<{ content: unknown }> }).messages;
      expect(messages.at(-1)!.content).toBe('The greeting tool says: Hello, Ada!');
    } finally {
      await mcp.close();
    }
    const a2a = await fetch(`${url}/a2a/agent`, {
      method: 'POST',
      headers: { 'content-type': 'application/json', 'X-Api-Key': agentKey },
      body: JSON.stringify({
        jsonrpc: '2.0',
        id: 1,
        method: 'message/send',
        params: { message: { kind: 'message', messageId: 'm1', role: 'user', parts: [{ kind: 'text', text: 'Ada' }] } },
      }),
    }).then((r) => r.json() as Promise<{ result: { status: { state: string }; artifacts: unknown[] } }>);
    expect(a2a.result.status.state).toBe('completed');
    expect(JSON.stringify(a2a.result.artifacts)).toContain('Hello, Ada!');
    // Its card names the deployment's URL (the runtime tells the server), not the agent server's own port.
    const card = (await fetch(`${url}/a2a/agent/.well-known/agent-card.json`, {
      headers: { 'X-Api-Key': agentKey },
    }).then((r) => r.json())) as { url: string; supportedInterfaces: Array<{ url: string }> };
    expect(card.url).toMatch(new RegExp(`^${url}/a2a/[0-9a-f-]{36}$`));
    expect(card.supportedInterfaces.map((i) => i.url)).toEqual([card.url, card.url]);
    const refused = await fetch(`${url}/a2a/agent/.well-known/agent-card.json`, { headers: { 'X-Api-Key': API_KEY } });
    expect(refused.status).toBe(403);

    // PATCH to a ref that answers differently: same URL, new answers, old thread still there, no failed requests.
    const probe = probeContinuously(url);
    const patched = await cp.patch(`/v2/deployments/${depId}`, { source_revision_config: { repo_ref: 'v2' } });
    expect(patched.status).toBe(200);
    const r2 = String((await cp.get(`/v2/deployments/${depId}`)).body.latest_revision_id);
    expect(r2).not.toBe(r1);
    await expectDeployed(dev.url, depId, r2);
    await waitFor('traffic on r2', async () =>
      (await cp.get(`/v2/deployments/${depId}`)).body.active_revision_id === r2 ? true : undefined,
    );
    const during = await probe.end();
    expect(during.failures).toEqual([]);
    expect(during.ok).toBeGreaterThan(0);
    expect((await greet(url)).text).toBe('The greeting tool says: Howdy, Ada!');
    const old = await new Client({ apiUrl: url, apiKey: agentKey }).threads.getState<{ messages: unknown[] }>(
      first.threadId,
    );
    expect(old.values.messages).toHaveLength(4);
    expect((await greet(url, first.threadId)).text).toBe('The greeting tool says: Howdy, Ada!');

    // Broken refs fail with a one-line message and logs, while r2 keeps serving.
    for (const [ref, status, type] of [
      ['broken-install', 'BUILD_FAILED', 'build'],
      // Its graph module throws when imported: the build's import check says so, before any start.
      ['broken-server', 'BUILD_FAILED', 'build'],
    ] as const) {
      await cp.patch(`/v2/deployments/${depId}`, { source_revision_config: { repo_ref: ref } });
      const rid = String((await cp.get(`/v2/deployments/${depId}`)).body.latest_revision_id);
      const failed = await revisionDone(dev.url, depId, rid);
      expect(failed.status).toBe(status);
      expect(failed.status_message).toBeTruthy();
      expect(failed.status_message).not.toContain('\n');
      expect((await logText(dev.url, depId, rid, type)).length).toBeGreaterThan(0);
      expect((await greet(url)).text).toBe('The greeting tool says: Howdy, Ada!');
      expect((await cp.get(`/v2/deployments/${depId}`)).body.active_revision_id).toBe(r2);
    }
    // A ref the local repository lacks is refused before any revision is made, naming it and the near one.
    const latestBefore = (await cp.get(`/v2/deployments/${depId}`)).body.latest_revision_id;
    const unknownRef = await cp.patch(`/v2/deployments/${depId}`, {
      source_revision_config: { repo_ref: 'broken-instal' },
    });
    expect(unknownRef.status).toBe(422);
    expect(unknownRef.body.detail).toEqual([
      {
        loc: ['body', 'source_revision_config', 'repo_ref'],
        msg: expect.stringMatching(
          /^"broken-instal" is not a branch, tag or commit of .* \(did you mean "broken-install"\?\)$/,
        ),
        type: 'value_error',
      },
    ]);
    expect((await cp.get(`/v2/deployments/${depId}`)).body.latest_revision_id).toBe(latestBefore);
    const allLogs = [r1, r2].map((r) => logText(dev!.url, depId, r, 'deploy'));
    for (const text of await Promise.all(allLogs)) expect(text).not.toContain('do-not-log-me-42');

    // external_docker cannot run here.
    const docker = await cp.post('/v2/deployments', {
      name: 'docker-agent',
      source: 'external_docker',
      source_config: { deployment_type: 'dev' },
      source_revision_config: { image_uri: 'example/agent:1' },
      secrets: [],
    });
    expect(docker.status).toBe(201);
    const dockerRev = await revisionDone(dev.url, String(docker.body.id), String(docker.body.latest_revision_id));
    expect(dockerRev).toMatchObject({
      status: 'CREATE_FAILED',
      status_message: expect.stringContaining('container runtime'),
    });

    // Start a new revision (tag v1) and crash the dev process while it builds, with r2 live.
    await cp.patch(`/v2/deployments/${depId}`, { source_revision_config: { repo_ref: 'v1' } });
    const r6 = String((await cp.get(`/v2/deployments/${depId}`)).body.latest_revision_id);
    await waitFor('r6 building', async () =>
      (await cp.get(`/v2/deployments/${depId}/revisions/${r6}`)).body.status === 'BUILDING' ? true : undefined,
    );
    const revisionsBefore = (await cp.get(`/v2/deployments/${depId}/revisions`)).body.resources as Rev[];
    const r2BuildLog = await logText(dev.url, depId, r2, 'build');
    const servers = childPids(dev.child.pid!);
    expect(servers.length).toBeGreaterThan(0);
    await stopDev(dev, 'SIGKILL');
    await waitFor('agent servers to exit', async () => (servers.some(alive) ? undefined : true), 30_000);

    // Restart on the same port: the same URL answers (r2 again, at once), the interrupted build runs again and
    // r6 takes over; no revision is added.
    dev = await startDev(dataDir, dev.port);
    const cp2 = api(dev.url);
    await waitFor('deployment to serve again', async () =>
      (await fetch(`${url}/ok`)).status === 200 ? true : undefined,
    );
    await expectDeployed(dev.url, depId, r6);
    await waitFor('traffic on r6', async () =>
      (await cp2.get(`/v2/deployments/${depId}`)).body.active_revision_id === r6 ? true : undefined,
    );
    expect((await greet(url)).text).toBe('The greeting tool says: Hello, Ada!');
    const revisionsAfter = (await cp2.get(`/v2/deployments/${depId}/revisions`)).body.resources as Rev[];
    expect(revisionsAfter.map((r) => r.id)).toEqual(revisionsBefore.map((r) => r.id));
    expect(revisionsAfter.filter((r) => r.id !== r6).map((r) => r.status)).toEqual(
      revisionsBefore.filter((r) => r.id !== r6).map((r) => r.status),
    );

    // Redeploy r2: its build is on disk, so it only restarts.
    expect((await cp2.post(`/v2/deployments/${depId}/revisions/${r2}/redeploy`)).status).toBe(200);
    await waitFor('traffic back on r2', async () =>
      (await cp2.get(`/v2/deployments/${depId}`)).body.active_revision_id === r2 ? true : undefined,
    );
    expect((await greet(url)).text).toBe('The greeting tool says: Howdy, Ada!');
    expect(await logText(dev.url, depId, r2, 'build')).toBe(r2BuildLog);

    // DELETE: 204, record gone, no child process left, URL 404.
    expect((await cp2.delete(`/v2/deployments/${depId}`)).status).toBe(204);
    await waitFor('deployment record gone', async () =>
      (await cp2.get(`/v2/deployments/${depId}`)).status === 404 ? true : undefined,
    );
    expect(childProcesses(dev.child.pid!)).toEqual([]);
    // Its origin is closed with it (a dev process of another test may take the freed port later: then it is not this
    // agent, which would answer this workspace's key).
    const after = await fetch(`${url}/assistants/search`, {
      method: 'POST',
      headers: { 'X-Api-Key': agentKey, 'content-type': 'application/json' },
      body: '{}',
    }).then(
      (r) => r.status,
      () => 'refused',
    );
    expect(after).not.toBe(200);

    expect(await stopDev(dev)).toBe(0);
    dev = undefined;
  }, 600_000);
});

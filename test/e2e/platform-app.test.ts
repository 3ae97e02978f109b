// Issue 10 "Done means": an app written for the hosted LangGraph platform, deployed unchanged through the control
// plane of a real `agentplane dev` process from a real git repository. Its langgraph.json uses custom auth, a
// Hono app and the memory store; behind the deployment's stable URL the real SDK sees per-user isolation, the
// custom route answers, and a node writes and reads the store. Custom auth replaces the workspace API key
// (docs/agent-server.md, "Access and auth").
import { execFileSync } from 'node:child_process';
import { cpSync, mkdirSync, mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join, resolve } from 'node:path';
import { Client } from '@langchain/langgraph-sdk';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { API_KEY, api, startDev, stopDev, waitFor, type DevProcess } from '../dev/helpers.ts';

const FIXTURE = resolve(import.meta.dirname, '../dev/fixtures/platform-app');
const EXAMPLE_AGENT = resolve(import.meta.dirname, '../../examples/agent/src/agent.ts');

let tmp: string;
let repoPath: string;
let dev: DevProcess;

function git(cwd: string, ...args: string[]): void {
  execFileSync('git', args, {
    cwd,
    env: {
      ...process.env,
      GIT_AUTHOR_NAME: 't',
      GIT_AUTHOR_EMAIL: 't@example.com',
      GIT_COMMITTER_NAME: 't',
      GIT_COMMITTER_EMAIL: 't@example.com',
    },
  });
}

beforeAll(async () => {
  tmp = mkdtempSync(join(tmpdir(), 'ap-dev-platform-app-'));
  repoPath = join(tmp, 'platform-app');
  mkdirSync(repoPath, { recursive: true });
  cpSync(FIXTURE, repoPath, { recursive: true });
  cpSync(EXAMPLE_AGENT, join(repoPath, 'src/agent.ts'));
  git(repoPath, 'init', '--quiet', '-b', 'main');
  git(repoPath, 'add', '-A');
  git(repoPath, 'commit', '--quiet', '-m', 'platform app');
  dev = await startDev(join(tmp, 'data'));
}, 120_000);

afterAll(async () => {
  if (dev) await stopDev(dev, 'SIGKILL');
  rmSync(tmp, { recursive: true, force: true });
});

const as = (url: string, token?: string) =>
  new Client({
    apiUrl: url,
    callerOptions: { maxRetries: 0 },
    ...(token ? { defaultHeaders: { authorization: `Bearer ${token}` } } : {}),
  });

describe('a platform app deployed through agentplane dev', () => {
  it('keeps users apart, serves its custom route and its nodes use the store, behind the stable URL', async () => {
    const cp = api(dev.url);
    const created = await cp.post('/v2/deployments', {
      name: 'platform-app',
      source: 'github',
      source_config: { repo_url: repoPath },
      source_revision_config: { repo_ref: 'main', graph_config_path: 'langgraph.json' },
    });
    expect(created.status, JSON.stringify(created.body)).toBe(201);
    expect(created.body.source_config.access_mode).toBe('api_key');
    const depId = String(created.body.id);
    const revId = String(created.body.latest_revision_id);
    const rev = await waitFor(
      `revision ${revId}`,
      async () => {
        const { body } = await cp.get(`/v2/deployments/${depId}/revisions/${revId}`);
        const s = String(body.status);
        return s === 'DEPLOYED' || s.includes('FAILED') ? body : undefined;
      },
      300_000,
    );
    expect(rev.status, String(rev.status_message)).toBe('DEPLOYED');
    const url = String((await cp.get(`/v2/deployments/${depId}`)).body.url);

    // Custom auth decides: no token is 401; a user token needs no workspace key. The bootstrap key never gets as far
    // as the app's own auth (which reads every header): the proxy refuses it (403).
    const search = (headers: Record<string, string>) =>
      fetch(`${url}/threads/search`, {
        method: 'POST',
        headers: { 'content-type': 'application/json', ...headers },
        body: '{}',
      }).then(async (r) => (await r.arrayBuffer(), r.status));
    expect(await search({})).toBe(401);
    expect(await search({ 'x-api-key': API_KEY })).toBe(403);
    expect(await search({ authorization: 'Bearer token-nobody' })).toBe(401);
    expect(await search({ authorization: 'Bearer token-ann' })).toBe(200);

    // User A's threads are A's alone.
    const ann = as(url, 'token-ann');
    const ben = as(url, 'token-ben');
    const annThread = await ann.threads.create();
    expect(annThread.metadata).toMatchObject({ owner: 'ann' });
    const reply = await ann.runs.wait(annThread.thread_id, 'agent', {
      input: { messages: [{ role: 'human', content: 'Ada' }] },
    });
    expect(JSON.stringify(reply)).toContain('Hello, Ada!');
    const benThread = await ben.threads.create();
    expect((await ann.threads.search()).map((t) => t.thread_id)).toEqual([annThread.thread_id]);
    expect((await ben.threads.search()).map((t) => t.thread_id)).toEqual([benThread.thread_id]);
    await expect(ben.threads.get(annThread.thread_id)).rejects.toMatchObject({ status: 404 });
    await expect(ben.threads.getState(annThread.thread_id)).rejects.toMatchObject({ status: 404 });
    await expect(ben.runs.create(annThread.thread_id, 'agent', { input: { messages: [] } })).rejects.toMatchObject({
      status: 404,
    });
    await expect(as(url).threads.search()).rejects.toMatchObject({ status: 401 });

    // The Hono app's route answers through the same URL, its middleware stamps built-in routes too.
    const status = await fetch(`${url}/app/status`);
    expect(status.status).toBe(200);
    expect(await status.json()).toEqual({ app: 'platform-app', greeting: 'Hello' });
    const ok = await fetch(`${url}/threads/search`, {
      method: 'POST',
      headers: { 'content-type': 'application/json', authorization: 'Bearer token-ann' },
      body: '{}',
    });
    expect(ok.headers.get('x-app')).toBe('platform-app');

    // A node writes and reads the store; each user's memory is their own, and the store API shows it to them.
    const remember = async (client: Client, note: string) => {
      const t = await client.threads.create();
      return (await client.runs.wait(t.thread_id, 'memory', { input: { note } })) as { previous: string | null };
    };
    expect((await remember(ann, 'ann-1')).previous).toBeNull();
    expect((await remember(ann, 'ann-2')).previous).toBe('ann-1');
    expect((await remember(ben, 'ben-1')).previous).toBeNull();
    expect((await ann.store.getItem(['notes'], 'last'))?.value).toEqual({ text: 'ann-2' });
    expect((await ben.store.getItem(['notes'], 'last'))?.value).toEqual({ text: 'ben-1' });
  }, 420_000);
});

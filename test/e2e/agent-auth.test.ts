// Deployed agents behind `agentplane dev` answer only their workspace's keys, tried as an outsider would: no key,
// another workspace's key, a revoked key; and a deployment is public only when it says so.
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { execFile } from 'node:child_process';
import { promisify } from 'node:util';
import { Client } from '@langchain/langgraph-sdk';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { makeExampleRepo, type ExampleRepo } from '../operator/helpers/example-repo.ts';
import { API_KEY, LINKED_INSTALL, TENANT, api, startDev, stopDev, waitFor, type DevProcess } from '../dev/helpers.ts';

const run = promisify(execFile);
const BIN = join(import.meta.dirname, '../../bin/agentplane.mjs');

let tmp: string;
let dataDir: string;
let repo: ExampleRepo;
let dev: DevProcess;

async function keyFor(tenant: string): Promise<{ key: string; id: string }> {
  const { stdout } = await run(process.execPath, [
    BIN,
    'api-key',
    'create',
    '--tenant',
    tenant,
    '--json',
    '--data-dir',
    join(dataDir, 'control-plane'),
  ]);
  return JSON.parse(stdout) as { key: string; id: string };
}

async function status(url: string, key?: string): Promise<number> {
  const res = await fetch(`${url}/threads/search`, {
    method: 'POST',
    headers: { 'content-type': 'application/json', ...(key === undefined ? {} : { 'x-api-key': key }) },
    body: '{}',
  });
  await res.arrayBuffer();
  return res.status;
}

async function deployedRevision(depId: string, revId: string): Promise<void> {
  const cp = api(dev.url);
  const rev = await waitFor(`revision ${revId}`, async () => {
    const { body } = await cp.get(`/v2/deployments/${depId}/revisions/${revId}`);
    const s = String(body.status);
    return s === 'DEPLOYED' || s.includes('FAILED') ? body : undefined;
  });
  expect(rev.status, String(rev.status_message)).toBe('DEPLOYED');
}

beforeAll(async () => {
  tmp = mkdtempSync(join(tmpdir(), 'ap-dev-auth-'));
  dataDir = join(tmp, 'data');
  repo = makeExampleRepo(tmp);
  dev = await startDev(dataDir);
});

afterAll(async () => {
  if (dev) await stopDev(dev, 'SIGKILL');
  rmSync(tmp, { recursive: true, force: true });
});

describe('agents behind agentplane dev', () => {
  it('need a key of their workspace; a revoked key stops working within seconds; public only when asked', async () => {
    const cp = api(dev.url);
    const own = await keyFor(TENANT);
    const other = await keyFor('another-workspace');
    const created = await cp.post('/v2/deployments', {
      name: 'locked',
      source: 'github',
      source_config: { repo_url: repo.path, install_command: LINKED_INSTALL },
      source_revision_config: { repo_ref: 'main', graph_config_path: 'langgraph.json' },
    });
    expect(created.status).toBe(201);
    expect(created.body.source_config.access_mode).toBe('api_key');
    const depId = String(created.body.id);
    await deployedRevision(depId, String(created.body.latest_revision_id));
    const url = String((await cp.get(`/v2/deployments/${depId}`)).body.url);

    expect(await status(url)).toBe(401);
    expect(await status(url, '')).toBe(401);
    // Another workspace's key never reaches the agent: the proxy refuses it (403) before tenant code could read it.
    expect(await status(url, other.key)).toBe(403);
    expect(await status(url, 'apk_guessed')).toBe(401);
    expect(await status(url, own.key)).toBe(200);
    // The bootstrap admin key acts for every workspace on the control plane, and for none on agents.
    expect(await status(url, API_KEY)).toBe(403);
    expect((await fetch(`${url}/ok`)).status).toBe(200);

    // The real SDK with the workspace's key.
    const client = new Client({ apiUrl: url, apiKey: own.key, callerOptions: { maxRetries: 0 } });
    const thread = await client.threads.create();
    const values = await client.runs.wait(thread.thread_id, 'agent', {
      input: { messages: [{ role: 'human', content: 'Ada' }] },
    });
    expect(JSON.stringify(values)).toContain('Ada');

    // A key created after the agent started works without a restart; a revoked one stops working.
    const later = await keyFor(TENANT);
    await waitFor(
      'the new key to be accepted',
      async () => ((await status(url, later.key)) === 200 ? true : undefined),
      20_000,
    );
    await run(process.execPath, [BIN, 'api-key', 'revoke', own.id, '--data-dir', join(dataDir, 'control-plane')]);
    await waitFor(
      'the revoked key to be refused',
      async () => ((await status(url, own.key)) === 401 ? true : undefined),
      20_000,
    );
    expect(await status(url, later.key)).toBe(200);

    // Public only by an explicit switch, which the record shows.
    const patched = await cp.patch(`/v2/deployments/${depId}`, { source_config: { access_mode: 'public' } });
    expect(patched.status).toBe(200);
    expect(patched.body.source_config.access_mode).toBe('public');
    await deployedRevision(depId, String(patched.body.latest_revision_id));
    expect(await status(url)).toBe(200);
  }, 180_000); // two deploys and a key-publish interval: minutes on a loaded two-core machine
});

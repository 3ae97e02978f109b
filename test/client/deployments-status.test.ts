// `agentplane deployments list|get` say in one STATUS phrase what a person looks for first: what serves, what is on
// its way, what failed and why. The real CLI in a child process against a real control plane (embedded store) whose
// revision statuses the test writes as the operator would.
import { execFile } from 'node:child_process';
import { resolve } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { apiHarness, githubBody, type ApiHarness } from '../control-plane/helpers/harness.ts';
import { serve, setRevision } from '../control-plane/helpers/operator-role.ts';
import { deploymentName } from '../../src/resources/index.ts';

const BIN = resolve(import.meta.dirname, '../../bin/agentplane.mjs');
let h: ApiHarness;
let url: string;

function cli(
  args: string[],
  env: Record<string, string> = {},
): Promise<{ code: number; stdout: string; stderr: string }> {
  return new Promise((res) => {
    execFile(
      process.execPath,
      [BIN, ...args],
      {
        env: { ...process.env, AGENTPLANE_URL: url, AGENTPLANE_API_KEY: h.key, AGENTPLANE_TENANT: 'tenant-a', ...env },
      },
      (err, stdout, stderr) => res({ code: err ? ((err as { code?: number }).code ?? 1) : 0, stdout, stderr }),
    );
  });
}

async function create(name: string): Promise<string> {
  const res = await h.app.inject({
    method: 'POST',
    url: '/v2/deployments',
    headers: { 'x-api-key': h.key, 'x-tenant-id': 'tenant-a' },
    payload: githubBody(name),
  });
  expect(res.statusCode, res.body).toBe(201);
  return (res.json() as { id: string }).id;
}

beforeAll(async () => {
  h = await apiHarness();
  url = await h.app.listen({ host: '127.0.0.1', port: 0 });
});
afterAll(async () => {
  await h.close();
});

describe('deployments list/get STATUS', () => {
  it('serving, building next to what serves, failed with the reason, failed with nothing serving', async () => {
    const live = await create('live');
    await setRevision(h.store, live, 1, 'DEPLOYED');
    await serve(h.store, live, 1);

    const next = await create('next');
    await setRevision(h.store, next, 1, 'DEPLOYED');
    await serve(h.store, next, 1);
    await h.app.inject({
      method: 'PATCH',
      url: `/v2/deployments/${next}`,
      headers: { 'x-api-key': h.key, 'x-tenant-id': 'tenant-a' },
      payload: { source_revision_config: { repo_ref: 'feature' } },
    });
    await setRevision(h.store, next, 2, 'BUILDING');

    const broke = await create('broke');
    await setRevision(h.store, broke, 1, 'DEPLOYED');
    await serve(h.store, broke, 1);
    await h.app.inject({
      method: 'PATCH',
      url: `/v2/deployments/${broke}`,
      headers: { 'x-api-key': h.key, 'x-tenant-id': 'tenant-a' },
      payload: { source_revision_config: { repo_ref: 'broken' } },
    });
    await setRevision(h.store, broke, 2, 'BUILD_FAILED', 'npm ci exited with code 1');

    const never = await create('never');
    await setRevision(h.store, never, 1, 'DEPLOY_FAILED', 'the agent server exited before answering');

    const listed = await cli(['deployments', 'list']);
    expect(listed.code, listed.stderr).toBe(0);
    const lines = listed.stdout.trimEnd().split('\n');
    expect(lines[0]).toMatch(/^NAME\s+ID\s+STATUS\s+REF\s+URL$/);
    const status = (name: string, id: string) => {
      const line = lines.find((l) => l.startsWith(`${name} `))!;
      return line
        .slice(line.indexOf(id) + id.length)
        .trim()
        .split(/\s{2,}/)[0];
    };
    expect(status('live', live)).toBe('serving rev 1');
    expect(status('next', next)).toBe('building rev 2 (serving rev 1)');
    expect(status('broke', broke)).toBe('failed: BUILD_FAILED, rev 2 (serving rev 1)');
    expect(status('never', never)).toBe('failed: DEPLOY_FAILED, rev 1');

    const got = await cli(['deployments', 'get', 'broke']);
    expect(got.code, got.stderr).toBe(0);
    expect(got.stdout).toMatch(/^status:\s+failed: BUILD_FAILED, rev 2 \(serving rev 1\)$/m);
    expect(got.stdout).toMatch(/^why:\s+npm ci exited with code 1$/m);
    expect(got.stdout).toContain('Call it (LangGraph SDK or HTTP):'); // revision 1 still serves
    // Nothing serves: the URL the runtime reserved is shown as such, and not offered as the way to call the agent.
    const neverDep = await h.store.get('AgentDeployment', 'default', deploymentName(never));
    await h.store.updateStatus('AgentDeployment', {
      ...neverDep,
      status: { ...neverDep.status, url: 'http://127.0.0.1:8123' },
    });
    const gotNever = await cli(['deployments', 'get', 'never']);
    expect(gotNever.stdout).toMatch(/^why:\s+the agent server exited before answering$/m);
    expect(gotNever.stdout).toMatch(/^url:\s+http:\/\/127\.0\.0\.1:8123 \(answers once a revision serves\)$/m);
    expect(gotNever.stdout).not.toContain('Call it');
    const gotLive = await cli(['deployments', 'get', 'live']);
    expect(gotLive.stdout).toMatch(/^status:\s+serving rev 1$/m);
    expect(gotLive.stdout).not.toMatch(/^why:/m);

    // --json carries the API's status_summary as is.
    const json = JSON.parse((await cli(['deployments', 'list', '--json'])).stdout) as {
      name: string;
      status_summary: { state: string; reason: string | null };
    }[];
    expect(json.find((d) => d.name === 'never')!.status_summary).toMatchObject({
      state: 'failed',
      reason: 'DEPLOY_FAILED',
    });
  }, 120_000);
});

describe('the workspace of a key', () => {
  it('a key of one workspace needs no --tenant; a key of several must name one, and is told so', async () => {
    const mine = await h.app.inject({
      method: 'POST',
      url: '/v2/deployments',
      headers: { 'x-api-key': h.otherKey, 'x-tenant-id': 'tenant-c' },
      payload: githubBody('only-c'),
    });
    expect(mine.statusCode, mine.body).toBe(201);
    const one = await cli(['deployments', 'list', '--json'], { AGENTPLANE_API_KEY: h.otherKey, AGENTPLANE_TENANT: '' });
    expect(one.code, one.stderr).toBe(0);
    expect((JSON.parse(one.stdout) as { name: string }[]).map((d) => d.name)).toEqual(['only-c']);
    const several = await cli(['deployments', 'list'], { AGENTPLANE_TENANT: '' });
    expect(several).toMatchObject({
      code: 1,
      stdout: '',
      stderr:
        'agentplane deployments list: HTTP 403: Missing tenant (X-Tenant-Id header): this API key acts for several workspaces; name one.\n',
    });
  });
});

// Service tests of the Deployments v2 API through app.inject on a real embedded store.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { createControlPlane } from '../../../src/control-plane/app.ts';
import { openEmbeddedPlatformState } from '../../../src/state/embedded/index.ts';
import { loadKubeConfig, openKubernetesPlatformState } from '../../../src/state/kubernetes/index.ts';
import type { PlatformState } from '../../../src/state/types.ts';
import { silentLogger } from '../../../src/lib/logger.ts';
import { startKube } from '../helpers/kube.ts';
import { FINALIZER_RUNTIME, deploymentName } from '../../../src/resources/index.ts';
import { apiHarness, githubBody, type ApiHarness } from '../helpers/harness.ts';

let h: ApiHarness;
type Res = { statusCode: number; body: string; json: () => any };

function call(
  method: string,
  url: string,
  opts: { body?: unknown; tenant?: string; key?: string | null } = {},
): Promise<Res> {
  const headers: Record<string, string> = {};
  if (opts.key !== null) headers['x-api-key'] = opts.key ?? h.key;
  if (opts.tenant !== '') headers['x-tenant-id'] = opts.tenant ?? 'tenant-a';
  return h.app.inject({
    method: method as 'GET',
    url,
    headers,
    ...(opts.body !== undefined ? { payload: opts.body as object } : {}),
  }) as Promise<Res>;
}

async function create(name: string, extra: Record<string, unknown> = {}, tenant = 'tenant-a') {
  const res = await call('POST', '/v2/deployments', { body: githubBody(name, extra), tenant });
  expect(res.statusCode, res.body).toBe(201);
  return res.json();
}

beforeAll(async () => {
  h = await apiHarness();
});
afterAll(async () => {
  await h.close();
});

describe('probes and docs', () => {
  it('GET /ok needs no key, also under /api-host', async () => {
    for (const url of ['/ok', '/api-host/ok']) {
      const res = await h.app.inject({ method: 'GET', url });
      expect(res.statusCode).toBe(200);
      expect(res.json()).toEqual({ ok: true });
    }
  });
  it('serves the OpenAPI document and the docs UI', async () => {
    const doc = (await h.app.inject({ method: 'GET', url: '/openapi.json' })).json();
    expect(doc.paths['/v2/deployments'].post).toBeTruthy();
    expect(doc.paths['/v2/deployments/{deployment_id}/revisions/{revision_id}/logs'].get).toBeTruthy();
    expect((await h.app.inject({ method: 'GET', url: '/docs/' })).statusCode).toBe(200);
  });
});

describe('auth', () => {
  it('401 without a key or with an unknown key', async () => {
    const none = await call('GET', '/v2/deployments', { key: null });
    expect(none.statusCode).toBe(401);
    expect(none.json().detail).toMatch(/X-Api-Key/);
    expect((await call('GET', '/v2/deployments', { key: 'apk_wrong' })).statusCode).toBe(401);
  });
  it('403 for a tenant the key does not belong to, or no tenant', async () => {
    const res = await call('GET', '/v2/deployments', { tenant: 'tenant-c' });
    expect(res.statusCode).toBe(403);
    expect((await call('GET', '/v2/deployments', { tenant: '' })).statusCode).toBe(403);
  });
  it("another tenant's deployment is 404, indistinguishable from a missing one", async () => {
    const dep = await create('isolated');
    const other = await call('GET', `/v2/deployments/${dep.id}`, { key: h.otherKey, tenant: 'tenant-c' });
    const sibling = await call('GET', `/v2/deployments/${dep.id}`, { tenant: 'tenant-b' });
    const missing = await call('GET', '/v2/deployments/00000000-0000-4000-8000-000000000000', { tenant: 'tenant-b' });
    expect(other.statusCode).toBe(404);
    expect(sibling.statusCode).toBe(404);
    expect(sibling.json()).toEqual({ detail: `Deployment ID ${dep.id} not found.` });
    expect(missing.json()).toEqual({ detail: 'Deployment ID 00000000-0000-4000-8000-000000000000 not found.' });
    for (const [m, u] of [
      ['PATCH', ''],
      ['DELETE', ''],
      ['GET', '/revisions'],
    ] as const) {
      const r = await call(m, `/v2/deployments/${dep.id}${u}`, {
        tenant: 'tenant-b',
        body: m === 'PATCH' ? { name: 'x' } : undefined,
      });
      expect(r.statusCode).toBe(404);
    }
    const list = await call('GET', '/v2/deployments', { tenant: 'tenant-b' });
    expect(list.json().resources.map((d: { id: string }) => d.id)).not.toContain(dep.id);
    expect((await call('GET', `/v2/deployments/${dep.id}`)).statusCode).toBe(200);
  });
});

describe('create and read', () => {
  it('201 with the whole record; secret values are never returned', async () => {
    const res = await call('POST', '/v2/deployments', { body: githubBody('first') });
    expect(res.statusCode).toBe(201);
    expect(res.body).not.toContain('sk-very-secret-value');
    const dep = res.json();
    expect(dep).toMatchObject({
      name: 'first',
      tenant_id: 'tenant-a',
      source: 'github',
      status: 'AWAITING_DATABASE',
      source_config: {
        repo_url: 'https://github.com/example/agent',
        deployment_type: 'dev',
        build_on_push: false,
        custom_url: null,
        resource_spec: { min_scale: 1, max_scale: 3, cpu: 1, memory_mb: 1024 },
      },
      source_revision_config: {
        repo_ref: 'main',
        graph_config_path: 'langgraph.json',
        langgraph_config_path: 'langgraph.json',
        image_uri: null,
        repo_commit_sha: null,
      },
      secrets: [{ name: 'OPENAI_API_KEY' }],
      secret_references: [],
      active_revision_id: null,
      url: null,
    });
    expect(dep.id).toMatch(/^[0-9a-f-]{36}$/);
    expect(dep.latest_revision_id).toMatch(/^[0-9a-f-]{36}$/);
    const got = await call('GET', `/v2/deployments/${dep.id}`);
    expect(got.statusCode).toBe(200);
    expect(got.json()).toEqual(dep);
    const rev = (await call('GET', `/v2/deployments/${dep.id}/revisions/${dep.latest_revision_id}`)).json();
    expect(rev).toMatchObject({
      id: dep.latest_revision_id,
      deployment_id: dep.id,
      status: 'CREATING',
      revision_number: 1,
      status_message: null,
    });
    // The runtime reads the values through the store.
    const stored = await h.store.get('AgentDeployment', 'default', deploymentName(dep.id));
    expect(JSON.stringify(stored)).not.toContain('sk-very-secret-value');
    expect(await h.store.getSecrets('default', stored.spec.secretsName!)).toEqual({
      OPENAI_API_KEY: 'sk-very-secret-value',
    });
  });

  it('accepts langgraph_config_path as an alias and external_docker with image_uri', async () => {
    const a = await create('alias', {
      source_revision_config: { repo_ref: 'dev', langgraph_config_path: 'agents/langgraph.json' },
    });
    expect(a.source_revision_config).toMatchObject({
      graph_config_path: 'agents/langgraph.json',
      langgraph_config_path: 'agents/langgraph.json',
    });
    const res = await call('POST', '/v2/deployments', {
      body: {
        name: 'docker',
        source: 'external_docker',
        source_config: {},
        source_revision_config: { image_uri: 'ghcr.io/x/agent:1' },
        secrets: [],
      },
    });
    expect(res.statusCode).toBe(201);
    expect(res.json().source_revision_config.image_uri).toBe('ghcr.io/x/agent:1');
  });

  it('409 for a duplicate name in the same tenant; the same name is fine in another tenant', async () => {
    await create('dup');
    const again = await call('POST', '/v2/deployments', { body: githubBody('dup') });
    expect(again.statusCode).toBe(409);
    expect(again.json().detail).toMatch(/dup/);
    await create('dup', {}, 'tenant-b');
  });

  it('422 with field paths for invalid bodies, writing nothing', async () => {
    const before = (await h.store.list('AgentDeployment')).items.length;
    const cases: [unknown, string][] = [
      [{ ...githubBody('x'), name: '' }, 'name'],
      [{ ...githubBody('x'), source: 'svn' }, 'source'],
      [
        { ...githubBody('x'), source_config: { deployment_type: 'staging', repo_url: 'u' } },
        'source_config.deployment_type',
      ],
      [{ ...githubBody('x'), source_config: {} }, 'source_config.repo_url'],
      [{ ...githubBody('x'), source_revision_config: {} }, 'source_revision_config.repo_ref'],
      [{ ...githubBody('x'), secrets: [{ name: '1BAD', value: 'v' }] }, 'secrets.0.name'],
      [
        {
          ...githubBody('x'),
          secrets: [
            { name: 'A', value: '1' },
            { name: 'A', value: '2' },
          ],
        },
        'secrets.1.name',
      ],
      [
        { ...githubBody('x'), source_config: { repo_url: 'u', resource_spec: { min_scale: 3, max_scale: 1 } } },
        'source_config.resource_spec.max_scale',
      ],
      [
        {
          ...githubBody('x'),
          source_config: { repo_url: 'u', build_on_push: true },
          source_revision_config: { repo_ref: 'refs/tags/v1' },
        },
        'source_config.build_on_push',
      ],
      [{ name: 'x', source: 'external_docker' }, 'source_revision_config.image_uri'],
    ];
    for (const [body, field] of cases) {
      const res = await call('POST', '/v2/deployments', { body });
      expect(res.statusCode, `${field}: ${res.body}`).toBe(422);
      const detail = res.json().detail as { loc: (string | number)[]; msg: string; type: string }[];
      expect(
        detail.map((d) => d.loc.slice(1).join('.')),
        res.body,
      ).toContain(field);
      expect(detail[0]).toHaveProperty('msg');
      expect(detail[0]).toHaveProperty('type');
    }
    const malformed = await h.app.inject({
      method: 'POST',
      url: '/v2/deployments',
      headers: { 'x-api-key': h.key, 'x-tenant-id': 'tenant-a', 'content-type': 'application/json' },
      payload: '{"name":',
    });
    expect(malformed.statusCode).toBe(422);
    expect((await h.store.list('AgentDeployment')).items.length).toBe(before);
  });

  it('lists newest first with filters and paging; limit outside 1-100 is 422', async () => {
    await create(
      'list-one',
      { source_config: { ...githubBody('').source_config, deployment_type: 'prod' } },
      'tenant-b',
    );
    const all = (await call('GET', '/v2/deployments?limit=100', { tenant: 'tenant-b' })).json();
    expect(all.resources.length).toBeGreaterThanOrEqual(2);
    const created = all.resources.map((d: { created_at: string }) => d.created_at);
    expect([...created].sort().reverse()).toEqual(created);
    const prod = (await call('GET', '/v2/deployments?deployment_type=prod', { tenant: 'tenant-b' })).json();
    expect(prod.resources.map((d: { name: string }) => d.name)).toEqual(['list-one']);
    const named = (await call('GET', '/v2/deployments?name_contains=LIST', { tenant: 'tenant-b' })).json();
    expect(named.resources.map((d: { name: string }) => d.name)).toEqual(['list-one']);
    const page = (await call('GET', '/v2/deployments?limit=1&offset=1', { tenant: 'tenant-b' })).json();
    expect(page.resources).toHaveLength(1);
    expect(page.offset).toBe(2);
    expect(
      (await call('GET', '/v2/deployments?status=AWAITING_DATABASE', { tenant: 'tenant-b' })).json().resources.length,
    ).toBe(all.resources.length);
    expect((await call('GET', '/v2/deployments?status=READY', { tenant: 'tenant-b' })).json().resources).toEqual([]);
    expect((await call('GET', '/v2/deployments?status=BOGUS')).statusCode).toBe(422);
    expect((await call('GET', '/v2/deployments?limit=0')).statusCode).toBe(422);
    expect((await call('GET', '/v2/deployments?limit=101')).statusCode).toBe(422);
  });
});

describe('patch', () => {
  it('merges source_config key by key without a new revision', async () => {
    const dep = await create('patch-merge');
    const res = await call('PATCH', `/v2/deployments/${dep.id}`, {
      body: { source_config: { build_on_push: true, custom_url: 'https://a.example' } },
    });
    expect(res.statusCode, res.body).toBe(200);
    const p = res.json();
    expect(p.source_config).toMatchObject({
      build_on_push: true,
      custom_url: 'https://a.example',
      repo_url: dep.source_config.repo_url,
      resource_spec: dep.source_config.resource_spec,
    });
    expect(p.latest_revision_id).toBe(dep.latest_revision_id);
    expect(new Date(p.updated_at).getTime()).toBeGreaterThanOrEqual(new Date(dep.updated_at).getTime());
  });

  it('replaces resource_spec whole and starts a revision; new repo_ref too, newest first', async () => {
    const dep = await create('patch-rev');
    const r1 = await call('PATCH', `/v2/deployments/${dep.id}`, {
      body: { source_config: { resource_spec: { cpu: 2 } } },
    });
    expect(r1.json().source_config.resource_spec).toEqual({ cpu: 2 });
    expect(r1.json().latest_revision_id).not.toBe(dep.latest_revision_id);
    const r2 = (
      await call('PATCH', `/v2/deployments/${dep.id}`, { body: { source_revision_config: { repo_ref: 'feature' } } })
    ).json();
    expect(r2.source_revision_config.repo_ref).toBe('feature');
    const list = (await call('GET', `/v2/deployments/${dep.id}/revisions`)).json();
    expect(list.resources.map((r: { id: string }) => r.id)).toEqual([
      r2.latest_revision_id,
      r1.json().latest_revision_id,
      dep.latest_revision_id,
    ]);
    expect(list.resources[0].source_revision_config.repo_ref).toBe('feature');
    expect(list.resources[2].source_revision_config.repo_ref).toBe('main');
    // source_revision_config present starts a revision even when it changes nothing (a rebuild of the same ref).
    const r3 = (await call('PATCH', `/v2/deployments/${dep.id}`, { body: { source_revision_config: {} } })).json();
    expect(r3.latest_revision_id).not.toBe(r2.latest_revision_id);
    expect(r3.source_revision_config.repo_ref).toBe('feature');
    const r4 = (
      await call('PATCH', `/v2/deployments/${dep.id}`, { body: { source_revision_config: { repo_ref: 'feature' } } })
    ).json();
    expect(r4.latest_revision_id).not.toBe(r3.latest_revision_id);
    // Without it (and without resource_spec or secrets) no revision starts.
    const r5 = (
      await call('PATCH', `/v2/deployments/${dep.id}`, { body: { source_config: { build_on_push: true } } })
    ).json();
    expect(r5.latest_revision_id).toBe(r4.latest_revision_id);
  });

  it('answers the name exactly as given; surrounding whitespace is a 422, not trimmed away', async () => {
    for (const name of [' padded', 'padded ', '\tpadded', '   ']) {
      const res = await call('POST', '/v2/deployments', { body: githubBody(name) });
      expect(res.statusCode, name).toBe(422);
      expect(JSON.stringify(res.json().detail)).toMatch(/name/);
    }
    const dep = await create('inner spaces kept');
    expect(dep.name).toBe('inner spaces kept');
    const renamed = await call('PATCH', `/v2/deployments/${dep.id}`, { body: { name: 'trailing ' } });
    expect(renamed.statusCode).toBe(422);
    expect((await call('GET', `/v2/deployments/${dep.id}`)).json().name).toBe('inner spaces kept');
  });

  it('secrets on PATCH replace the environment in a new revision; an empty list changes nothing', async () => {
    const dep = await create('patch-secrets');
    const same = (await call('PATCH', `/v2/deployments/${dep.id}`, { body: { secrets: [] } })).json();
    expect(same.latest_revision_id).toBe(dep.latest_revision_id);
    const res = await call('PATCH', `/v2/deployments/${dep.id}`, {
      body: { secrets: [{ name: 'NEW_ONE', value: 'v2-secret' }] },
    });
    expect(res.body).not.toContain('v2-secret');
    expect(res.json().secrets).toEqual([{ name: 'NEW_ONE' }]);
    expect(res.json().latest_revision_id).not.toBe(dep.latest_revision_id);
    const revs = await h.store.list('AgentRevision', 'default', {
      labelSelector: `agentplane.dev/deployment=${deploymentName(dep.id)}`,
    });
    const byNumber = Object.fromEntries(revs.items.map((r) => [r.spec.revisionNumber, r]));
    expect(await h.store.getSecrets('default', byNumber[2]!.spec.secretsName!)).toEqual({ NEW_ONE: 'v2-secret' });
    expect(await h.store.getSecrets('default', byNumber[1]!.spec.secretsName!)).toEqual({
      OPENAI_API_KEY: 'sk-very-secret-value',
    });
  });

  it('concurrent PATCHes each get their own revision (optimistic retries, no lost update)', async () => {
    const dep = await create('patch-concurrent');
    const refs = ['c1', 'c2', 'c3', 'c4', 'c5'];
    const results = await Promise.all(
      refs.map((r) =>
        call('PATCH', `/v2/deployments/${dep.id}`, { body: { source_revision_config: { repo_ref: r } } }),
      ),
    );
    expect(results.map((r) => r.statusCode)).toEqual([200, 200, 200, 200, 200]);
    const list = (await call('GET', `/v2/deployments/${dep.id}/revisions`)).json();
    expect(list.resources.map((r: { revision_number: number }) => r.revision_number)).toEqual([6, 5, 4, 3, 2, 1]);
    expect(
      list.resources
        .slice(0, 5)
        .map((r: { source_revision_config: { repo_ref: string } }) => r.source_revision_config.repo_ref)
        .sort(),
    ).toEqual(refs);
    const final = (await call('GET', `/v2/deployments/${dep.id}`)).json();
    expect(final.latest_revision_id).toBe(list.resources[0].id);
    expect(final.source_revision_config.repo_ref).toBe(list.resources[0].source_revision_config.repo_ref);
  });

  it('400 naming an immutable field; 409 renaming onto a taken name', async () => {
    const dep = await create('patch-immutable');
    // Nothing served yet (a failed first build): the source can change, as a new revision.
    const moved = await call('PATCH', `/v2/deployments/${dep.id}`, {
      body: { source_config: { repo_url: 'https://github.com/other/first' } },
    });
    expect(moved.statusCode, moved.body).toBe(200);
    expect(moved.json()).toMatchObject({ source_config: { repo_url: 'https://github.com/other/first' } });
    expect(moved.json().latest_revision_id).not.toBe(dep.latest_revision_id);
    // Once a revision served, it stays: the answer says to delete and create again.
    const stored = await h.store.get('AgentDeployment', 'default', deploymentName(dep.id));
    await h.store.updateStatus('AgentDeployment', {
      ...stored,
      status: { ...stored.status, activeRevisionName: `${deploymentName(dep.id)}-r2` },
    });
    for (const [body, field] of [
      [{ source: 'external_docker' }, 'source'],
      [{ source_config: { repo_url: 'https://github.com/other/repo' } }, 'repo_url'],
      [{ source_config: { integration_id: 'int-2' } }, 'integration_id'],
      [{ source_config: { deployment_type: 'prod' } }, 'deployment_type'],
      [{ source_config: { listener_id: 'l-1' } }, 'listener_id'],
    ] as const) {
      const res = await call('PATCH', `/v2/deployments/${dep.id}`, { body });
      expect(res.statusCode).toBe(400);
      expect(res.json().detail).toContain(field);
      if (field !== 'source') expect(res.json().detail).toContain('delete the deployment and create it again');
    }
    // The same value is not a change.
    expect(
      (
        await call('PATCH', `/v2/deployments/${dep.id}`, {
          body: { source: 'github', source_config: { repo_url: 'https://github.com/other/first' } },
        })
      ).statusCode,
    ).toBe(200);
    await create('taken');
    expect((await call('PATCH', `/v2/deployments/${dep.id}`, { body: { name: 'taken' } })).statusCode).toBe(409);
    expect((await call('PATCH', `/v2/deployments/${dep.id}`, { body: { name: 'renamed-ok' } })).json().name).toBe(
      'renamed-ok',
    );
    expect(
      (
        await call('PATCH', `/v2/deployments/${dep.id}`, {
          body: { source_config: { min: 1, resource_spec: { cpu: -1 } } },
        })
      ).statusCode,
    ).toBe(422);
  });
});

describe('revisions', () => {
  it('list limits, status filter, get, POST, redeploy, 404s', async () => {
    const dep = await create('revs');
    const base = `/v2/deployments/${dep.id}/revisions`;
    expect((await call('GET', `${base}?limit=0`)).statusCode).toBe(422);
    expect((await call('GET', `${base}?limit=101`)).statusCode).toBe(422);
    expect((await call('GET', `${base}?status=NOPE`)).statusCode).toBe(422);
    const posted = await call('POST', base);
    expect(posted.statusCode).toBe(201);
    expect(posted.json()).toMatchObject({ revision_number: 2, status: 'CREATING' });
    // The operator writes status; here the test does, through the store.
    const r1 = await h.store.get('AgentRevision', 'default', `${deploymentName(dep.id)}-r1`);
    await h.store.updateStatus('AgentRevision', {
      ...r1,
      status: { phase: 'DEPLOYED', image: 'img:1', repoCommitSha: 'abc123' },
    });
    const deployed = (await call('GET', `${base}?status=DEPLOYED`)).json();
    expect(deployed.resources.map((r: { id: string }) => r.id)).toEqual([dep.latest_revision_id]);
    expect(deployed.resources[0]).toMatchObject({
      image: 'img:1',
      repo_commit_sha: 'abc123',
      source_revision_config: { repo_commit_sha: 'abc123' },
    });
    expect((await call('GET', `${base}?limit=1`)).json().resources[0].id).toBe(posted.json().id);
    expect((await call('GET', `${base}?limit=1&offset=1`)).json().resources[0].id).toBe(dep.latest_revision_id);
    const redeploy = await h.app.inject({
      method: 'POST',
      url: `${base}/${dep.latest_revision_id}/redeploy`,
      headers: { 'x-api-key': h.key, 'x-tenant-id': 'tenant-a', 'content-type': 'application/json' },
      payload: '',
    });
    expect(redeploy.statusCode).toBe(200);
    expect((await h.store.get('AgentDeployment', 'default', deploymentName(dep.id))).spec.targetRevisionName).toBe(
      `${deploymentName(dep.id)}-r1`,
    );
    const missing = await call('GET', `${base}/00000000-0000-4000-8000-000000000000`);
    expect(missing.statusCode).toBe(404);
    expect(missing.json().detail).toBe('Revision ID 00000000-0000-4000-8000-000000000000 not found.');
    expect((await call('GET', `${base}/not-a-uuid`)).statusCode).toBe(404);
    // A revision of another deployment is not found under this one.
    const other = await create('revs-other');
    expect((await call('GET', `${base}/${other.latest_revision_id}`)).statusCode).toBe(404);
  });

  it('logs: empty until a runtime writes, then cursor-paged by type', async () => {
    const dep = await create('logs');
    const url = `/v2/deployments/${dep.id}/revisions/${dep.latest_revision_id}/logs`;
    expect((await call('GET', url)).json()).toEqual({ logs: [], next_offset: null });
    await h.store.appendLogs('default', `${deploymentName(dep.id)}-r1`, 'build', ['step 1', 'step 2', 'step 3']);
    await h.store.appendLogs('default', `${deploymentName(dep.id)}-r1`, 'deploy', ['listening']);
    const p1 = (await call('GET', `${url}?type=build&limit=2`)).json();
    expect(p1.logs.map((l: { message: string }) => l.message)).toEqual(['step 1', 'step 2']);
    const p2 = (await call('GET', `${url}?type=build&limit=2&offset=${p1.next_offset}`)).json();
    expect(p2).toMatchObject({ logs: [{ message: 'step 3', type: 'build' }], next_offset: null });
    expect((await call('GET', `${url}?type=deploy`)).json().logs.map((l: { message: string }) => l.message)).toEqual([
      'listening',
    ]);
    expect((await call('GET', `${url}?type=other`)).statusCode).toBe(422);
    expect((await call('GET', `${url}?limit=1001`)).statusCode).toBe(422);
  });
});

describe('delete', () => {
  it('204 then 404 with no runtime attached; under /api-host too', async () => {
    const dep = await create('gone');
    const del = await call('DELETE', `/api-host/v2/deployments/${dep.id}`);
    expect(del.statusCode).toBe(204);
    expect(del.body).toBe('');
    expect((await call('GET', `/api-host/v2/deployments/${dep.id}`)).statusCode).toBe(404);
    expect(
      (
        await h.store.list('AgentRevision', 'default', {
          labelSelector: `agentplane.dev/deployment=${deploymentName(dep.id)}`,
        })
      ).items,
    ).toEqual([]);
    expect((await call('DELETE', `/v2/deployments/${dep.id}`)).statusCode).toBe(404);
  });

  it('with a runtime finalizer: AWAITING_DELETE until the runtime lets go', async () => {
    const dep = await create('finalized');
    const obj = await h.store.get('AgentDeployment', 'default', deploymentName(dep.id));
    await h.store.update('AgentDeployment', { ...obj, metadata: { ...obj.metadata, finalizers: [FINALIZER_RUNTIME] } });
    expect((await call('DELETE', `/v2/deployments/${dep.id}`)).statusCode).toBe(204);
    expect((await call('GET', `/v2/deployments/${dep.id}`)).json().status).toBe('AWAITING_DELETE');
    expect((await call('PATCH', `/v2/deployments/${dep.id}`, { body: { name: 'late' } })).statusCode).toBe(409);
    const marked = await h.store.get('AgentDeployment', 'default', deploymentName(dep.id));
    await h.store.update('AgentDeployment', { ...marked, metadata: { ...marked.metadata, finalizers: [] } });
    expect((await call('GET', `/v2/deployments/${dep.id}`)).statusCode).toBe(404);
  });

  it('bulk delete: 200 when all went, 207 on partial', async () => {
    const a = await create('bulk-a');
    const b = await create('bulk-b');
    const ok = await call('DELETE', `/v2/deployments?deployment_ids=${a.id},${b.id}`);
    expect(ok.statusCode).toBe(200);
    expect(ok.json()).toEqual({ deleted: [a.id, b.id], errors: [] });
    const c = await create('bulk-c');
    const partial = await call('DELETE', `/v2/deployments?deployment_ids=${c.id},${a.id}`);
    expect(partial.statusCode).toBe(207);
    expect(partial.json()).toEqual({
      deleted: [c.id],
      errors: [{ id: a.id, detail: `Deployment ID ${a.id} not found.` }],
    });
    expect((await call('DELETE', '/v2/deployments')).statusCode).toBe(422);
  });
});

describe('nothing is half-created', () => {
  const stores: Record<string, () => Promise<{ store: PlatformState; close: () => Promise<void> }>> = {
    embedded: async () => {
      const dir = mkdtempSync(join(tmpdir(), 'ap-cp-half-'));
      const store = openEmbeddedPlatformState({ dataDir: dir });
      return {
        store,
        close: async () => {
          await store.close();
          rmSync(dir, { recursive: true, force: true });
        },
      };
    },
    kubernetes: async () => {
      const kube = await startKube();
      const store = openKubernetesPlatformState({
        kubeConfig: loadKubeConfig(kube.kubeconfig),
        namespace: 'half',
        logger: silentLogger(),
      });
      return {
        store,
        close: async () => {
          await store.close();
          await kube.stop();
        },
      };
    },
  };
  for (const [name, open] of Object.entries(stores)) {
    it(`${name}: a failure after the deployment was written removes it and its revision`, async () => {
      const { store, close } = await open();
      // Wrap the real store so that writing the secret set fails: the deployment exists by then.
      const failing = new Proxy(store, {
        get(target, prop, receiver) {
          if (prop === 'putSecrets')
            return async () => {
              throw new Error('injected failure');
            };
          const v = Reflect.get(target, prop, receiver) as unknown;
          return typeof v === 'function' ? v.bind(target) : v;
        },
      });
      const app = await createControlPlane({
        store: failing,
        logger: silentLogger(),
        bootstrapKeys: [{ key: 'boot-key-0123456789abcdef', tenants: ['*'] }],
      });
      try {
        const headers = { 'x-api-key': 'boot-key-0123456789abcdef', 'x-tenant-id': 'tenant-a' };
        const res = await app.inject({ method: 'POST', url: '/v2/deployments', headers, payload: githubBody('half') });
        expect(res.statusCode).toBe(500);
        expect((await store.list('AgentDeployment')).items).toEqual([]);
        expect((await store.list('AgentRevision')).items).toEqual([]);
        // Without secrets the same create goes through (the failure was the injected one).
        const ok = await app.inject({
          method: 'POST',
          url: '/v2/deployments',
          headers,
          payload: { ...githubBody('whole'), secrets: [] },
        });
        expect(ok.statusCode).toBe(201);
        expect((await store.list('AgentRevision')).items).toHaveLength(1);
      } finally {
        await app.close();
        await close();
      }
    });
  }
});

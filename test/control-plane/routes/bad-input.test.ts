// Issue 3's "Bad input", line by line, each with an assertion that fails if it breaks: exact 404 bodies on every
// route, 422 field paths on PATCH and queries, and nothing half-written by a failed create or PATCH, on both stores.
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import type { FastifyInstance } from 'fastify';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createControlPlane } from '../../../src/control-plane/app.ts';
import { openEmbeddedPlatformState } from '../../../src/state/embedded/index.ts';
import { loadKubeConfig, openKubernetesPlatformState } from '../../../src/state/kubernetes/index.ts';
import type { PlatformState } from '../../../src/state/types.ts';
import { NotFoundError } from '../../../src/lib/errors.ts';
import { silentLogger } from '../../../src/lib/logger.ts';
import { deploymentName } from '../../../src/resources/index.ts';
import { githubBody } from '../helpers/harness.ts';
import { startKube } from '../helpers/kube.ts';

const KEY = 'bad-input-admin-key-0123456789';
type Res = { statusCode: number; body: string; json: () => any };

/** `collected`: resolves once objects whose owner is gone are collected (Kubernetes does that after the delete). */
const stores: Record<
  string,
  () => Promise<{ store: PlatformState; ns: string; close: () => Promise<void>; collected?: () => Promise<void> }>
> = {
  embedded: async () => {
    const dir = mkdtempSync(join(tmpdir(), 'ap-cp-bad-'));
    const store = openEmbeddedPlatformState({ dataDir: dir });
    return {
      store,
      ns: 'default',
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
      namespace: 'bad',
      logger: silentLogger(),
    });
    return {
      store,
      ns: 'bad',
      collected: () => kube.server.gcIdle(),
      close: async () => {
        await store.close();
        await kube.stop();
      },
    };
  },
};

/** Wraps a real store so that one method fails (after the deployment exists), recording the secret sets written. */
function failing(
  store: PlatformState,
  fail: (prop: string, args: unknown[]) => boolean,
  secretSets: string[],
): PlatformState {
  return new Proxy(store, {
    get(target, prop, receiver) {
      const v = Reflect.get(target, prop, receiver) as unknown;
      if (typeof v !== 'function') return v;
      return async (...args: unknown[]) => {
        if (fail(String(prop), args)) throw new Error(`injected failure in ${String(prop)}`);
        if (prop === 'putSecrets') secretSets.push(args[1] as string);
        return (v as (...a: unknown[]) => unknown).apply(target, args);
      };
    },
  });
}

for (const [kind, open] of Object.entries(stores)) {
  describe(`bad input: ${kind} store`, () => {
    let s: Awaited<ReturnType<(typeof stores)[string]>>;
    let app: FastifyInstance;
    beforeAll(async () => {
      s = await open();
      app = await createControlPlane({
        store: s.store,
        logger: silentLogger(),
        bootstrapKeys: [{ key: KEY, tenants: ['*'] }],
      });
    });
    afterAll(async () => {
      await app?.close();
      await s?.close();
    });

    const call = (method: string, url: string, body?: unknown, a: FastifyInstance = app): Promise<Res> =>
      a.inject({
        method: method as 'GET',
        url,
        headers: { 'x-api-key': KEY, 'x-tenant-id': 'tenant-a' },
        ...(body !== undefined ? { payload: body as object } : {}),
      }) as Promise<Res>;

    it('unknown deployment ids: 404 {"detail": "Deployment ID <id> not found."} on every route, under /api-host too', async () => {
      const real = (await call('POST', '/v2/deployments', githubBody('real'))).json();
      for (const id of ['00000000-0000-4000-8000-000000000000', 'not-a-uuid']) {
        const routes: [string, string, unknown?][] = [
          ['GET', `/deployments/${id}`],
          ['PATCH', `/deployments/${id}`, { name: 'x' }],
          ['DELETE', `/deployments/${id}`],
          ['GET', `/deployments/${id}/revisions`],
          ['POST', `/deployments/${id}/revisions`],
          ['GET', `/deployments/${id}/revisions/${real.latest_revision_id}`],
          ['POST', `/deployments/${id}/revisions/${real.latest_revision_id}/redeploy`],
          ['GET', `/deployments/${id}/revisions/${real.latest_revision_id}/logs`],
        ];
        for (const prefix of ['/v2', '/api-host/v2']) {
          for (const [m, path, body] of routes) {
            const res = await call(m, prefix + path, body);
            expect(res.statusCode, `${m} ${prefix}${path}: ${res.body}`).toBe(404);
            expect(res.json(), `${m} ${prefix}${path}`).toEqual({ detail: `Deployment ID ${id} not found.` });
          }
        }
      }
      // Bulk delete names the unknown id the same way.
      const bulk = await call('DELETE', '/v2/deployments?deployment_ids=00000000-0000-4000-8000-000000000000');
      expect(bulk.json()).toEqual({
        deleted: [],
        errors: [
          {
            id: '00000000-0000-4000-8000-000000000000',
            detail: 'Deployment ID 00000000-0000-4000-8000-000000000000 not found.',
          },
        ],
      });
    });

    it('422 with field paths for invalid PATCH bodies and queries; the deployment is unchanged', async () => {
      const dep = (await call('POST', '/v2/deployments', githubBody('patch-me'))).json();
      const before = await s.store.get('AgentDeployment', s.ns, deploymentName(dep.id));
      const cases: [unknown, string][] = [
        [{ name: '' }, 'body.name'],
        [{ source_config: { resource_spec: { cpu: -1 } } }, 'body.source_config.resource_spec.cpu'],
        [{ secrets: [{ name: '1BAD', value: 'v' }] }, 'body.secrets.0.name'],
        [{ secrets: 'not a list' }, 'body.secrets'],
      ];
      for (const [body, loc] of cases) {
        const res = await call('PATCH', `/v2/deployments/${dep.id}`, body);
        expect(res.statusCode, `${loc}: ${res.body}`).toBe(422);
        expect(
          (res.json().detail as { loc: string[] }[]).map((d) => d.loc.join('.')),
          res.body,
        ).toContain(loc);
      }
      const malformed = await app.inject({
        method: 'PATCH',
        url: `/v2/deployments/${dep.id}`,
        headers: { 'x-api-key': KEY, 'x-tenant-id': 'tenant-a', 'content-type': 'application/json' },
        payload: '{"name":',
      });
      expect(malformed.statusCode).toBe(422);
      for (const [url, loc] of [
        ['/v2/deployments?limit=0', 'query.limit'],
        ['/v2/deployments?limit=101', 'query.limit'],
        ['/v2/deployments?limit=ten', 'query.limit'],
        ['/v2/deployments?offset=-1', 'query.offset'],
        ['/v2/deployments?deployment_type=staging', 'query.deployment_type'],
        [`/v2/deployments/${dep.id}/revisions?limit=0`, 'query.limit'],
        [`/v2/deployments/${dep.id}/revisions?limit=101`, 'query.limit'],
      ] as const) {
        const res = await call('GET', url);
        expect(res.statusCode, url).toBe(422);
        expect(
          (res.json().detail as { loc: string[] }[]).map((d) => d.loc.join('.')),
          res.body,
        ).toContain(loc);
      }
      for (const limit of [1, 100]) expect((await call('GET', `/v2/deployments?limit=${limit}`)).statusCode).toBe(200);
      const after = await s.store.get('AgentDeployment', s.ns, deploymentName(dep.id));
      expect(after.metadata.resourceVersion).toBe(before.metadata.resourceVersion);
      expect((await call('GET', `/v2/deployments/${dep.id}/revisions`)).json().resources).toHaveLength(1);
    });

    it('a PATCH failing after its secret set was written leaves no set, no revision, no change', async () => {
      const dep = (await call('POST', '/v2/deployments', githubBody('repatch'))).json();
      const before = await s.store.get('AgentDeployment', s.ns, deploymentName(dep.id));
      const sets: string[] = [];
      // Writing the deployment fails (injected) after the new secret set was stored.
      const broken = await createControlPlane({
        store: failing(s.store, (p) => p === 'update', sets),
        logger: silentLogger(),
        bootstrapKeys: [{ key: KEY, tenants: ['*'] }],
      });
      try {
        const res = await call(
          'PATCH',
          `/v2/deployments/${dep.id}`,
          { secrets: [{ name: 'NEW', value: 'new-secret-value' }] },
          broken,
        );
        expect(res.statusCode, res.body).toBe(500);
        expect(res.body).not.toContain('new-secret-value');
      } finally {
        await broken.close();
      }
      expect(sets).toHaveLength(1);
      await expect(s.store.getSecrets(s.ns, sets[0]!)).rejects.toBeInstanceOf(NotFoundError);
      const after = await s.store.get('AgentDeployment', s.ns, deploymentName(dep.id));
      expect(after.metadata.resourceVersion).toBe(before.metadata.resourceVersion);
      expect((await call('GET', `/v2/deployments/${dep.id}/revisions`)).json().resources).toHaveLength(1);
      // A PATCH refused by a rule across fields (build_on_push with a tag) writes nothing either.
      const tagged = (
        await call(
          'POST',
          '/v2/deployments',
          githubBody('tagged', { source_config: { ...githubBody('x').source_config, build_on_push: true } }),
        )
      ).json();
      const t0 = await s.store.get('AgentDeployment', s.ns, deploymentName(tagged.id));
      const refused = await call('PATCH', `/v2/deployments/${tagged.id}`, {
        secrets: [{ name: 'NEW', value: 'v' }],
        source_revision_config: { repo_ref: 'refs/tags/v1' },
      });
      expect(refused.statusCode, refused.body).toBe(422);
      expect(refused.json().detail.map((d: { loc: string[] }) => d.loc.join('.'))).toContain(
        'body.source_config.build_on_push',
      );
      expect((await s.store.get('AgentDeployment', s.ns, deploymentName(tagged.id))).metadata.resourceVersion).toBe(
        t0.metadata.resourceVersion,
      );
      expect((await call('GET', `/v2/deployments/${tagged.id}/revisions`)).json().resources).toHaveLength(1);
    });

    it('a create failing at any step after the deployment was written leaves no deployment, revision, claim or secret set', async () => {
      const steps: [string, (prop: string, args: unknown[]) => boolean][] = [
        ['claiming the name', (p) => p === 'claimName'],
        ['writing the secret set', (p) => p === 'putSecrets'],
        ['creating the first revision', (p, a) => p === 'create' && a[0] === 'AgentRevision'],
      ];
      for (const [step, fail] of steps) {
        const sets: string[] = [];
        const broken = await createControlPlane({
          store: failing(s.store, fail, sets),
          logger: silentLogger(),
          bootstrapKeys: [{ key: KEY, tenants: ['*'] }],
        });
        const name = `half-${step.split(' ')[0]}`;
        try {
          const res = await call('POST', '/v2/deployments', githubBody(name), broken);
          expect(res.statusCode, `${step}: ${res.body}`).toBe(500);
          expect(res.body, step).not.toContain('sk-very-secret-value');
        } finally {
          await broken.close();
        }
        await s.collected?.();
        const deps = (await s.store.list('AgentDeployment', s.ns)).items.filter((d) => d.spec.displayName === name);
        expect(deps, step).toEqual([]);
        const live = new Set((await s.store.list('AgentDeployment', s.ns)).items.map((d) => d.metadata.name));
        expect(
          (await s.store.list('AgentRevision', s.ns)).items.filter((r) => !live.has(r.spec.deploymentName)),
          step,
        ).toEqual([]);
        expect(
          (await s.store.listNameClaims(s.ns)).filter((c) => c.name === name),
          step,
        ).toEqual([]);
        for (const set of sets) await expect(s.store.getSecrets(s.ns, set), step).rejects.toBeInstanceOf(NotFoundError);
        // The name is free afterwards.
        expect((await call('POST', '/v2/deployments', githubBody(name))).statusCode, step).toBe(201);
      }
    });
  });
}

// Deployment names are unique within a tenant across processes: two store instances (two client-node clients
// against one API-server double / two SQLite handles on one file), each under its own control plane app, race.
// Also two real control-plane processes over HTTP.
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import Database from 'better-sqlite3';
import { CoreV1Api } from '@kubernetes/client-node';
import type { FastifyInstance } from 'fastify';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createControlPlane } from '../../src/control-plane/app.ts';
import { openEmbeddedPlatformState } from '../../src/state/embedded/index.ts';
import { loadKubeConfig, openKubernetesPlatformState } from '../../src/state/kubernetes/index.ts';
import type { PlatformState } from '../../src/state/types.ts';
import { silentLogger } from '../../src/lib/logger.ts';
import { FINALIZER_RUNTIME, deploymentName } from '../../src/resources/index.ts';
import { githubBody } from '../control-plane/helpers/harness.ts';
import { startKube } from '../control-plane/helpers/kube.ts';
import { startControlPlaneProcess, type ControlPlaneProcess } from '../control-plane/helpers/process.ts';

const KEY = 'name-claims-admin-key-0123456789';
const headers = (tenant = 'tenant-a') => ({ 'x-api-key': KEY, 'x-tenant-id': tenant });

/** Objects a store keeps beside deployments whose owner no longer exists (should be none once requests answered). */
type Leftovers = () => Promise<{ secrets: string[]; claims: string[] }>;

type Shared = {
  /** Two independent handles on the same data: what two processes see. */
  stores: [PlatformState, PlatformState];
  ns: string;
  leftovers: Leftovers;
  /** CLI flags and environment that point a process at the same data. */
  args: string[];
  env: NodeJS.ProcessEnv;
  close(): Promise<void>;
};

const setups: Record<string, () => Promise<Shared>> = {
  embedded: async () => {
    const dir = mkdtempSync(join(tmpdir(), 'ap-cp-claims-'));
    const stores: [PlatformState, PlatformState] = [
      openEmbeddedPlatformState({ dataDir: dir }),
      openEmbeddedPlatformState({ dataDir: dir }),
    ];
    const file = join(dir, 'control-plane.db');
    return {
      stores,
      ns: 'default',
      args: ['--data-dir', dir],
      env: {},
      leftovers: async () => {
        const db = new Database(file, { readonly: true });
        try {
          const live = `SELECT uid FROM objects WHERE kind = 'AgentDeployment'`;
          const secrets = db
            .prepare(`SELECT name FROM secrets WHERE owner_uid NOT IN (SELECT uid FROM objects)`)
            .all() as { name: string }[];
          const claims = db.prepare(`SELECT name FROM name_claims WHERE owner_uid NOT IN (${live})`).all() as {
            name: string;
          }[];
          return { secrets: secrets.map((r) => r.name), claims: claims.map((r) => r.name) };
        } finally {
          db.close();
        }
      },
      close: async () => {
        await Promise.all(stores.map((s) => s.close()));
        rmSync(dir, { recursive: true, force: true });
      },
    };
  },
  kubernetes: async () => {
    const kube = await startKube();
    const open = () =>
      openKubernetesPlatformState({
        kubeConfig: loadKubeConfig(kube.kubeconfig),
        namespace: 'agents',
        logger: silentLogger(),
      });
    const stores: [PlatformState, PlatformState] = [open(), open()];
    const core = loadKubeConfig(kube.kubeconfig).makeApiClient(CoreV1Api);
    return {
      stores,
      ns: 'agents',
      args: ['--store', 'kubernetes', '--namespace', 'agents'],
      env: { KUBECONFIG: kube.kubeconfig },
      leftovers: async () => {
        await kube.server.gcIdle(); // dependents go after their owner, as on a real cluster
        const { items } = await stores[0].list('AgentDeployment', 'agents');
        const live = new Set(items.map((d) => d.metadata.uid));
        const orphan = (o: { metadata?: { name?: string; ownerReferences?: { kind: string; uid: string }[] } }) =>
          o.metadata?.ownerReferences?.some((r) => r.kind === 'AgentDeployment' && !live.has(r.uid))
            ? [o.metadata.name!]
            : [];
        const secrets = (await core.listNamespacedSecret({ namespace: 'agents' })).items.flatMap(orphan);
        const claims = (
          await core.listNamespacedConfigMap({ namespace: 'agents', labelSelector: 'agentplane.dev/name-claim-of' })
        ).items.flatMap(orphan);
        return { secrets, claims };
      },
      close: async () => {
        await Promise.all(stores.map((s) => s.close()));
        await kube.stop();
      },
    };
  },
};

for (const [kind, setup] of Object.entries(setups)) {
  describe(`deployment names across processes: ${kind} store`, () => {
    let shared: Shared;
    let apps: FastifyInstance[];

    beforeAll(async () => {
      shared = await setup();
      const bootstrapKeys = [{ key: KEY, tenants: ['*'] }];
      apps = await Promise.all(
        shared.stores.map((store) => createControlPlane({ store, logger: silentLogger(), bootstrapKeys })),
      );
    });
    afterAll(async () => {
      await Promise.all((apps ?? []).map((a) => a.close()));
      await shared?.close();
    });

    const post = (app: number, name: string, tenant = 'tenant-a') =>
      apps[app]!.inject({
        method: 'POST',
        url: '/v2/deployments',
        headers: headers(tenant),
        payload: githubBody(name),
      });
    const named = async (name: string, tenant = 'tenant-a') =>
      (await shared.stores[0].list('AgentDeployment', shared.ns)).items.filter(
        (d) => d.spec.tenantId === tenant && d.spec.displayName === name,
      );
    const claimsOn = async (name: string) =>
      (await shared.stores[0].listNameClaims(shared.ns)).filter((c) => c.name === name);

    it('racing creates of one name through two instances: exactly one 201, the rest 409, nothing left behind', async () => {
      for (const round of [1, 2, 3]) {
        const name = `race-${round}`;
        const answers = await Promise.all(Array.from({ length: 8 }, (_, i) => post(i % 2, name)));
        const codes = answers.map((r) => r.statusCode).sort();
        expect(codes, answers.map((r) => r.body).join('\n')).toEqual([201, 409, 409, 409, 409, 409, 409, 409]);
        for (const r of answers.filter((x) => x.statusCode === 409))
          expect(r.json().detail).toBe(`A deployment named "${name}" already exists in this workspace.`);
        const winner = answers.find((r) => r.statusCode === 201)!.json() as { id: string; latest_revision_id: string };
        const deps = await named(name);
        expect(deps.map((d) => d.spec.deploymentId)).toEqual([winner.id]);
        expect(await claimsOn(name)).toEqual([
          { tenant: 'tenant-a', name, owner: { name: deploymentName(winner.id), uid: deps[0]!.metadata.uid } },
        ]);
        const revisions = (await shared.stores[1].list('AgentRevision', shared.ns)).items;
        expect(
          revisions.filter((r) => r.spec.deploymentName === deploymentName(winner.id)).map((r) => r.metadata.uid),
        ).toEqual([winner.latest_revision_id]);
      }
      // Every revision belongs to a deployment that exists; no secret set or claim outlived its deployment.
      const live = new Set(
        (await shared.stores[0].list('AgentDeployment', shared.ns)).items.map((d) => d.metadata.name),
      );
      const revisions = (await shared.stores[0].list('AgentRevision', shared.ns)).items;
      expect(revisions.filter((r) => !live.has(r.spec.deploymentName)).map((r) => r.metadata.name)).toEqual([]);
      expect(await shared.leftovers()).toEqual({ secrets: [], claims: [] });
    });

    it('the same name in another tenant is not a conflict', async () => {
      const answers = await Promise.all([post(0, 'shared-name', 'tenant-a'), post(1, 'shared-name', 'tenant-b')]);
      expect(answers.map((r) => r.statusCode)).toEqual([201, 201]);
    });

    it('a stale claim does not block re-creating a deleted name', async () => {
      // Deleted for good: the claim went with it (the garbage collector's, once it has run).
      const first = (await post(0, 'reborn')).json() as { id: string };
      expect(
        (await apps[1]!.inject({ method: 'DELETE', url: `/v2/deployments/${first.id}`, headers: headers() }))
          .statusCode,
      ).toBe(204);
      await shared.leftovers();
      expect(await claimsOn('reborn')).toEqual([]);
      expect((await post(1, 'reborn')).statusCode).toBe(201);

      // Being deleted (a runtime still cleaning up): its name is free for a new deployment, which takes the claim over.
      const dying = (await post(0, 'phoenix')).json() as { id: string };
      const obj = await shared.stores[0].get('AgentDeployment', shared.ns, deploymentName(dying.id));
      await shared.stores[0].update('AgentDeployment', {
        ...obj,
        metadata: { ...obj.metadata, finalizers: [FINALIZER_RUNTIME] },
      });
      expect(
        (await apps[0]!.inject({ method: 'DELETE', url: `/v2/deployments/${dying.id}`, headers: headers() }))
          .statusCode,
      ).toBe(204);
      const again = await post(1, 'phoenix');
      expect(again.statusCode, again.body).toBe(201);
      const reborn = again.json() as { id: string };
      // The runtime lets go of the old one: the claim (now the new deployment's) stays, and still guards the name.
      const marked = await shared.stores[1].get('AgentDeployment', shared.ns, deploymentName(dying.id));
      await shared.stores[1].update('AgentDeployment', { ...marked, metadata: { ...marked.metadata, finalizers: [] } });
      expect((await claimsOn('phoenix')).map((c) => c.owner.name)).toEqual([deploymentName(reborn.id)]);
      expect((await post(0, 'phoenix')).statusCode).toBe(409);

      // Its deployment gone but the claim not yet collected (a real cluster garbage-collects later): taken over.
      await shared.stores[0].claimName(shared.ns, 'tenant-a', 'orphaned', {
        name: 'ag-00000000-0000-4000-8000-00000000dead',
        uid: '00000000-0000-4000-8000-00000000beef',
      });
      const taken = await post(1, 'orphaned');
      expect(taken.statusCode, taken.body).toBe(201);
      expect((await claimsOn('orphaned')).map((c) => c.owner.name)).toEqual([
        deploymentName((taken.json() as { id: string }).id),
      ]);
    });

    it('rename claims the new name and frees the old one; racing renames onto one name: one wins', async () => {
      const a = (await post(0, 'before')).json() as { id: string };
      const patch = (app: number, id: string, name: string) =>
        apps[app]!.inject({ method: 'PATCH', url: `/v2/deployments/${id}`, headers: headers(), payload: { name } });
      expect((await patch(1, a.id, 'after')).statusCode).toBe(200);
      expect(await claimsOn('before')).toEqual([]);
      expect((await post(0, 'after')).statusCode).toBe(409);
      expect((await post(1, 'before')).statusCode).toBe(201);

      const x = (await post(0, 'x-name')).json() as { id: string };
      const y = (await post(1, 'y-name')).json() as { id: string };
      const answers = await Promise.all([patch(0, x.id, 'target'), patch(1, y.id, 'target')]);
      expect(answers.map((r) => r.statusCode).sort()).toEqual([200, 409]);
      const won = answers[0]!.statusCode === 200 ? x : y;
      const lost = won === x ? { id: y.id, name: 'y-name' } : { id: x.id, name: 'x-name' };
      expect((await named('target')).map((d) => d.spec.deploymentId)).toEqual([won.id]);
      expect((await claimsOn('target')).map((c) => c.owner.name)).toEqual([deploymentName(won.id)]);
      // The loser keeps its name and its claim.
      expect((await claimsOn(lost.name)).map((c) => c.owner.name)).toEqual([deploymentName(lost.id)]);
      expect(await shared.leftovers()).toEqual({ secrets: [], claims: [] });
    });

    it('a rename that fails after claiming releases the new name', async () => {
      const dep = (await post(0, 'steady')).json() as { id: string };
      // The deployment write fails (injected) after the new name was claimed.
      const failing = new Proxy(shared.stores[1], {
        get(target, prop, receiver) {
          if (prop === 'update')
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
        bootstrapKeys: [{ key: KEY, tenants: ['*'] }],
      });
      try {
        const res = await app.inject({
          method: 'PATCH',
          url: `/v2/deployments/${dep.id}`,
          headers: headers(),
          payload: { name: 'wanted' },
        });
        expect(res.statusCode).toBe(500);
      } finally {
        await app.close();
      }
      expect(await claimsOn('wanted')).toEqual([]);
      expect((await claimsOn('steady')).map((c) => c.owner.name)).toEqual([deploymentName(dep.id)]);
      expect((await post(1, 'wanted')).statusCode).toBe(201);
    });
  });

  describe(`two control-plane processes on one ${kind} store`, () => {
    let shared: Shared;
    let procs: ControlPlaneProcess[] = [];

    beforeAll(async () => {
      shared = await setup();
      procs = await Promise.all(
        [0, 1].map(() => startControlPlaneProcess(shared.args, { ...shared.env, AGENTPLANE_BOOTSTRAP_API_KEY: KEY })),
      );
    }, 60_000);
    afterAll(async () => {
      await Promise.all(procs.map((p) => p.stop()));
      await shared?.close();
    });

    it('racing POSTs of one name over HTTP: one 201, the rest 409', async () => {
      const answers = await Promise.all(
        Array.from({ length: 6 }, (_, i) =>
          fetch(`${procs[i % 2]!.url}/v2/deployments`, {
            method: 'POST',
            headers: { ...headers(), 'content-type': 'application/json' },
            body: JSON.stringify(githubBody('over-http')),
          }),
        ),
      );
      expect(answers.map((r) => r.status).sort()).toEqual([201, 409, 409, 409, 409, 409]);
      const deps = (await shared.stores[0].list('AgentDeployment', shared.ns)).items.filter(
        (d) => d.spec.displayName === 'over-http',
      );
      expect(deps).toHaveLength(1);
      expect(await shared.leftovers()).toEqual({ secrets: [], claims: [] });
    });
  });
}

// The seed's quick flow with plain fetch against a running `agentplane control-plane` process, on both stores.
// Revision status is advanced through the store, as the operator would.
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { openEmbeddedPlatformState } from '../../src/state/embedded/index.ts';
import { loadKubeConfig, openKubernetesPlatformState } from '../../src/state/kubernetes/index.ts';
import type { PlatformState } from '../../src/state/types.ts';
import { silentLogger } from '../../src/lib/logger.ts';
import { deploymentName } from '../../src/resources/index.ts';
import { githubBody } from '../control-plane/helpers/harness.ts';
import { startKube } from '../control-plane/helpers/kube.ts';
import { cli, cliFails, startControlPlaneProcess, type ControlPlaneProcess } from '../control-plane/helpers/process.ts';

type Setup = {
  args: string[];
  env: NodeJS.ProcessEnv;
  store: () => PlatformState;
  cleanup: () => Promise<void>;
  /** Resolves once objects whose owner is gone have been collected (Kubernetes collects them after the delete). */
  collected?: () => Promise<void>;
};

const setups: Record<string, () => Promise<Setup>> = {
  embedded: async () => {
    const dir = mkdtempSync(join(tmpdir(), 'ap-cp-e2e-'));
    return {
      args: ['--data-dir', dir],
      env: {},
      store: () => openEmbeddedPlatformState({ dataDir: dir }),
      cleanup: async () => rmSync(dir, { recursive: true, force: true }),
    };
  },
  kubernetes: async () => {
    const kube = await startKube();
    return {
      args: ['--store', 'kubernetes', '--namespace', 'agents'],
      env: { KUBECONFIG: kube.kubeconfig },
      store: () =>
        openKubernetesPlatformState({
          kubeConfig: loadKubeConfig(kube.kubeconfig),
          namespace: 'agents',
          logger: silentLogger(),
        }),
      cleanup: () => kube.stop(),
      collected: () => kube.server.gcIdle(),
    };
  },
};

for (const [name, make] of Object.entries(setups)) {
  describe(`quick flow over HTTP: ${name} store`, () => {
    let setup: Setup;
    let proc: ControlPlaneProcess;
    let store: PlatformState;
    let key: string;
    const BOOT = 'bootstrap-key-for-tests-0123456789';

    beforeAll(async () => {
      setup = await make();
      key = (
        await cli(['api-key', 'create', '--tenant', 'team-1', '--name', 'ci', '--init', ...setup.args], setup.env)
      ).stdout.trim();
      proc = await startControlPlaneProcess(setup.args, {
        ...setup.env,
        AGENTPLANE_BOOTSTRAP_API_KEY: BOOT,
        AGENTPLANE_BOOTSTRAP_TENANTS: 'team-2',
      });
      store = setup.store();
    }, 60_000);
    afterAll(async () => {
      await proc?.stop();
      await store?.close();
      await setup?.cleanup();
    });

    const api = async (method: string, path: string, body?: unknown, headers: Record<string, string> = {}) => {
      const res = await fetch(`${proc.url}${path}`, {
        method,
        headers: {
          'x-api-key': key,
          'x-tenant-id': 'team-1',
          ...(body ? { 'content-type': 'application/json' } : {}),
          ...headers,
        },
        body: body ? JSON.stringify(body) : undefined,
      });
      const text = await res.text();
      return { status: res.status, body: text ? JSON.parse(text) : undefined, text };
    };

    it('create -> revision DEPLOYED -> patch -> new latest revision -> delete -> 404', async () => {
      expect(key).toMatch(/^apk_/);
      const created = await api('POST', '/v2/deployments', githubBody('quick-flow'));
      expect(created.status).toBe(201);
      expect(created.text).not.toContain('sk-very-secret-value');
      const dep = created.body;
      const first = dep.latest_revision_id as string;
      expect(first).toBeTruthy();

      const rev = await api('GET', `/v2/deployments/${dep.id}/revisions/${first}`);
      expect(rev.status).toBe(200);
      expect(rev.body.status).toBe('CREATING');

      // The operator's part, done here through the store.
      const r1 = await store.get('AgentRevision', store.namespace, `${deploymentName(dep.id)}-r1`);
      expect(r1.metadata.uid).toBe(first);
      for (const phase of ['BUILDING', 'DEPLOYING', 'DEPLOYED'] as const) {
        const cur = await store.get('AgentRevision', store.namespace, r1.metadata.name);
        await store.updateStatus('AgentRevision', { ...cur, status: { ...cur.status, phase } });
      }
      expect((await api('GET', `/v2/deployments/${dep.id}/revisions/${first}`)).body.status).toBe('DEPLOYED');

      const patched = await api('PATCH', `/v2/deployments/${dep.id}`, {
        source_revision_config: { repo_ref: 'release-2' },
      });
      expect(patched.status).toBe(200);
      const second = patched.body.latest_revision_id as string;
      expect(second).not.toBe(first);
      const list = await api('GET', `/v2/deployments/${dep.id}/revisions`);
      expect(list.status).toBe(200);
      expect(list.body.resources.map((r: { id: string }) => r.id)).toEqual([second, first]);
      expect(list.body.resources[0].source_revision_config.repo_ref).toBe('release-2');

      const del = await api('DELETE', `/v2/deployments/${dep.id}`);
      expect(del.status).toBe(204);
      expect(del.text).toBe('');
      const gone = await api('GET', `/v2/deployments/${dep.id}`);
      expect(gone.status).toBe(404);
      expect(gone.body).toEqual({ detail: `Deployment ID ${dep.id} not found.` });
      await setup.collected?.();
      await expect(store.get('AgentRevision', store.namespace, r1.metadata.name)).rejects.toThrow(/not found/);
    });

    it('keys: 401 without or with a bad key, 403 for another tenant, bootstrap key from the environment', async () => {
      expect((await api('GET', '/v2/deployments', undefined, { 'x-api-key': '' })).status).toBe(401);
      expect((await api('GET', '/v2/deployments', undefined, { 'x-api-key': 'apk_nope' })).status).toBe(401);
      expect((await api('GET', '/v2/deployments', undefined, { 'x-tenant-id': 'team-2' })).status).toBe(403);
      const boot = await api('POST', '/v2/deployments', githubBody('boot'), {
        'x-api-key': BOOT,
        'x-tenant-id': 'team-2',
      });
      expect(boot.status).toBe(201);
      expect((await api('GET', `/v2/deployments/${boot.body.id}`)).status).toBe(404);
      expect(
        (await api('GET', '/v2/deployments', undefined, { 'x-api-key': BOOT, 'x-tenant-id': 'team-1' })).status,
      ).toBe(403);
      expect((await fetch(`${proc.url}/ok`)).status).toBe(200);
      expect(proc.logs()).not.toContain('sk-very-secret-value');
    });
  });
}

describe('embedded store survives a restart', () => {
  it('deployments, revisions, secrets and keys are all still there', async () => {
    const dir = mkdtempSync(join(tmpdir(), 'ap-cp-restart-'));
    try {
      const key = (await cli(['api-key', 'create', '--tenant', 'team-r', '--init', '--data-dir', dir])).stdout.trim();
      const headers = { 'x-api-key': key, 'x-tenant-id': 'team-r', 'content-type': 'application/json' };
      let proc = await startControlPlaneProcess(['--data-dir', dir]);
      const dep = (await (
        await fetch(`${proc.url}/v2/deployments`, {
          method: 'POST',
          headers,
          body: JSON.stringify(githubBody('durable')),
        })
      ).json()) as { id: string };
      await fetch(`${proc.url}/v2/deployments/${dep.id}`, {
        method: 'PATCH',
        headers,
        body: JSON.stringify({ source_revision_config: { repo_ref: 'v2' } }),
      });
      const before = (await (await fetch(`${proc.url}/v2/deployments/${dep.id}/revisions`, { headers })).json()) as {
        resources: unknown[];
      };
      await proc.stop();
      proc = await startControlPlaneProcess(['--data-dir', dir]);
      try {
        const after = await fetch(`${proc.url}/v2/deployments/${dep.id}`, { headers });
        expect(after.status).toBe(200);
        expect(((await after.json()) as { secrets: unknown }).secrets).toEqual([{ name: 'OPENAI_API_KEY' }]);
        expect(await (await fetch(`${proc.url}/v2/deployments/${dep.id}/revisions`, { headers })).json()).toEqual(
          before,
        );
        expect(before.resources).toHaveLength(2);
        // Its name is still taken (the claim survived too), and the key made by the CLI still works.
        const dup = await fetch(`${proc.url}/v2/deployments`, {
          method: 'POST',
          headers,
          body: JSON.stringify(githubBody('durable')),
        });
        expect(dup.status).toBe(409);
      } finally {
        await proc.stop();
      }
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  }, 60_000);
});

describe('kubernetes store without the CRDs', () => {
  it('the control plane refuses to start and says how to install them', async () => {
    const kube = await startKube({ crdDir: undefined });
    try {
      await expect(
        startControlPlaneProcess(['--store', 'kubernetes'], { KUBECONFIG: kube.kubeconfig }),
      ).rejects.toThrow(/kubectl apply -f crds/);
    } finally {
      await kube.stop();
    }
  }, 60_000);
});

describe('CLI usage errors', () => {
  it('api-key create needs a tenant; bad flags are usage errors with exit code 2', async () => {
    expect((await cliFails(['api-key', 'create'])).code).toBe(2);
    expect(
      (await cliFails(['api-key', 'create', '--tenant', 'bad tenant!', '--data-dir', join(tmpdir(), 'ap-cp-unused')]))
        .stderr,
    ).toMatch(/tenant/);
    expect((await cliFails(['control-plane', '--store', 'mongo'])).stderr).toMatch(/--store/);
    expect((await cli(['control-plane', '--help'])).stdout).toMatch(/--namespace/);
    expect((await cli(['api-key', '--help'])).stdout).toMatch(/--tenant/);
  });
});

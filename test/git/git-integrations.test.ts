// Integration credentials on Kubernetes, checked in the objects the operator sends to the API-server double (RBAC
// enforced, run as the chart's operator ServiceAccount): a build of a GitHub integration gets an installation token
// minted for it (by a local GitHub stand-in), a plain git integration its stored token; either reaches the clone
// step only through a Secret owned by the build Job, never in the Job itself. Another tenant naming the
// integration gets no Job and no Secret; GitHub refusing fails the revision with one line and no token. In a
// data-plane-only install the operator asks the listener's control plane (a real one) for each build's token.
import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { CustomObjectsApi } from '@kubernetes/client-node';
import { parse } from 'yaml';
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import { createLogger } from '../../src/lib/logger.ts';
import { createControlPlane } from '../../src/control-plane/app.ts';
import { createApiKey } from '../../src/control-plane/api-keys/keys.ts';
import { createGitHubApp } from '../../src/git/github-app.ts';
import { createIntegrationService } from '../../src/control-plane/services/integrations/index.ts';
import { openEmbeddedPlatformState } from '../../src/state/embedded/index.ts';
import { openKubernetesPlatformState } from '../../src/state/kubernetes/index.ts';
import type { PlatformState } from '../../src/state/types.ts';
import { parseOperatorConfig } from '../../src/operator/config.ts';
import { startKubernetesOperator, type RunningOperator } from '../../src/operator/kubernetes.ts';
import { startFakeGitHub, type FakeGitHub } from '../support/github-api.ts';
import { operatorTestFlags, startCluster, until, type TestCluster } from '../support/kubernetes/cluster.ts';

const NS = 'agents';
const logger = createLogger({ level: 'silent', name: 'test' });
const GIT_TOKEN = 'gitea-token-k8s-0c9d8e7f6a';
type Json = Record<string, any>;

let cluster: TestCluster;
let op: RunningOperator;
let custom: CustomObjectsApi;
let gh: FakeGitHub;
let store: PlatformState;
let githubIntegration: string;
let gitIntegration: string;

/** The operator flags every operator of this file starts with (its own settings follow). */
const operatorArgs = () => [...operatorTestFlags(cluster, NS), '--log-level', 'silent', '--health-port', '0'];

beforeAll(async () => {
  gh = await startFakeGitHub();
  gh.installations.set(8101, {
    id: 8101,
    account: 'acme',
    createdAt: new Date().toISOString(),
    repos: [{ id: 1, owner: 'acme', name: 'agent', default_branch: 'main' }],
  });
  cluster = await startCluster(NS, { rbac: true });
  cluster.installChartRbac({});
  custom = cluster.kubeConfig.makeApiClient(CustomObjectsApi);
  // The control plane's side: integrations as its store keeps them (Secrets in the namespace).
  store = openKubernetesPlatformState({ kubeConfig: cluster.kubeConfig, namespace: NS, logger });
  const settings = { appId: gh.appId, privateKey: gh.privateKey, apiUrl: gh.apiUrl, webUrl: gh.url };
  const service = createIntegrationService(store, createGitHubApp(settings));
  githubIntegration = (await service.registerGitHub('team-a', 8101)).id;
  gitIntegration = (await service.create('team-a', { name: 'gitea', host: 'git.example.com', token: GIT_TOKEN })).id;

  const config = parseOperatorConfig(
    [...operatorArgs(), '--github-app-id', gh.appId, '--github-api-url', gh.apiUrl, '--github-web-url', gh.url],
    { AGENTPLANE_GITHUB_APP_PRIVATE_KEY: gh.privateKey },
  )!;
  op = startKubernetesOperator(config, logger);
});
afterEach(() => {
  expect([...new Set(cluster.api.denied)]).toEqual([]);
});
afterAll(async () => {
  await op?.close();
  await store?.close();
  await cluster?.close();
  await gh?.close();
});

async function deploy(id: string, tenant: string, repoUrl: string, integrationId: string): Promise<string> {
  const manifest = parse(
    readFileSync(join(import.meta.dirname, '../../examples/k8s/agentdeployment-source.yaml'), 'utf8'),
  ) as Json;
  const name = `ag-${id}`;
  manifest.metadata = { name, labels: { 'agentplane.dev/tenant': tenant } };
  manifest.spec = {
    ...manifest.spec,
    deploymentId: id,
    tenantId: tenant,
    targetRevisionName: `${name}-r1`,
    sourceConfig: { repoUrl, integrationId, deploymentType: 'dev' },
  };
  await custom.createNamespacedCustomObject({
    group: 'agentplane.dev',
    version: 'v1alpha1',
    namespace: NS,
    plural: 'agentdeployments',
    body: manifest,
  });
  return `${name}-r1`;
}

const peek = (group: string, plural: string, name: string): Json | undefined =>
  cluster.api.peek(group, plural, NS, name);

describe('integration credentials in build Jobs', () => {
  it('a GitHub integration: a token minted for the build, only in a Secret owned by the Job', async () => {
    const rev = await deploy(
      '6a7b8c9d-0e1f-4a2b-8c3d-4e5f6a7b8c9d',
      'team-a',
      `${gh.url}/acme/agent`,
      githubIntegration,
    );
    const job = await until('the build Job', () => peek('batch', 'jobs', `${rev}-build`));
    const secret = await until('the build Secret', () => peek('', 'secrets', `${rev}-build-git`));
    const pod = job.spec.template.spec;
    expect((pod.volumes as Json[]).find((v) => v.name === 'git-credentials')?.secret?.secretName).toBe(
      `${rev}-build-git`,
    );
    expect((pod.initContainers[0].env as Json[]).map((e) => e.name)).toContain('GIT_CREDENTIALS_DIR');
    expect(secret.metadata.ownerReferences).toEqual([
      expect.objectContaining({
        apiVersion: 'batch/v1',
        kind: 'Job',
        name: job.metadata.name,
        uid: job.metadata.uid,
        controller: true,
      }),
    ]);
    const password = Buffer.from(secret.data.password, 'base64').toString();
    const username = Buffer.from(secret.data.username, 'base64').toString();
    expect(username).toBe('x-access-token');
    expect(gh.tokens).toContain(password);
    // Only the Secret holds it: not the Job, not the revision.
    expect(JSON.stringify(job)).not.toContain(password);
    expect(JSON.stringify(peek('agentplane.dev', 'agentrevisions', rev))).not.toContain(password);
  });

  it('a git integration: its stored token, the same way', async () => {
    const rev = await deploy(
      '7b8c9d0e-1f2a-4b3c-9d4e-5f6a7b8c9d0e',
      'team-a',
      'https://git.example.com/team/agent.git',
      gitIntegration,
    );
    const job = await until('the build Job', () => peek('batch', 'jobs', `${rev}-build`));
    const secret = await until('the build Secret', () => peek('', 'secrets', `${rev}-build-git`));
    expect(Buffer.from(secret.data.password, 'base64').toString()).toBe(GIT_TOKEN);
    expect(secret.metadata.ownerReferences[0].uid).toBe(job.metadata.uid);
    expect(JSON.stringify(job)).not.toContain(GIT_TOKEN);
  });

  it("another tenant naming A's integration gets no Job and no Secret; GitHub refusing fails with one line", async () => {
    const stolen = await deploy(
      '8c9d0e1f-2a3b-4c4d-8e5f-6a7b8c9d0e1f',
      'team-b',
      `${gh.url}/acme/agent`,
      githubIntegration,
    );
    const failed = await until('the revision to fail', () => {
      const r = peek('agentplane.dev', 'agentrevisions', stolen);
      return r?.status?.phase === 'BUILD_FAILED' ? r : undefined;
    });
    expect(failed.status.statusMessage).toMatch(/not found in this workspace/);
    expect(peek('batch', 'jobs', `${stolen}-build`)).toBeUndefined();
    expect(peek('', 'secrets', `${stolen}-build-git`)).toBeUndefined();

    gh.failMint.push(401);
    const refused = await deploy(
      '9d0e1f2a-3b4c-4d5e-9f6a-7b8c9d0e1f2a',
      'team-a',
      `${gh.url}/acme/agent`,
      githubIntegration,
    );
    const r = await until('the revision to fail', () => {
      const x = peek('agentplane.dev', 'agentrevisions', refused);
      return x?.status?.phase === 'BUILD_FAILED' ? x : undefined;
    });
    expect(r.status.statusMessage).toMatch(/GitHub refused the App's credentials \(401\)/);
    expect(r.status.statusMessage).not.toContain('\n');
    for (const t of gh.tokens) expect(JSON.stringify(r)).not.toContain(t);
    expect(peek('batch', 'jobs', `${refused}-build`)).toBeUndefined();
  });

  it("a data-plane-only operator asks the listener's control plane: a token for its deployments' repositories only", async () => {
    // The control plane (elsewhere, its own store and GitHub App), a listener of team-a with a key, and a deployment
    // assigned to it naming a GitHub integration of that control plane.
    const dir = mkdtempSync(join(tmpdir(), 'ap-k8s-listener-cred-'));
    const cpStore = openEmbeddedPlatformState({ dataDir: dir });
    const settings = { appId: gh.appId, privateKey: gh.privateKey, apiUrl: gh.apiUrl, webUrl: gh.url };
    const cp = await createControlPlane({
      store: cpStore,
      logger,
      consoleDir: false,
      github: createGitHubApp(settings),
    });
    try {
      const cpUrl = await cp.listen({ port: 0, host: '127.0.0.1' });
      const workspaceKey = (await createApiKey(cpStore, { tenants: ['team-a'] })).key;
      const admin = (await createApiKey(cpStore, { tenants: ['*'] })).key;
      const post = async (url: string, key: string, body: unknown) => {
        const res = await cp.inject({
          method: 'POST',
          url,
          headers: { 'x-api-key': key, 'x-tenant-id': 'team-a' },
          payload: body as object,
        });
        expect(res.statusCode, res.body).toBeLessThan(300);
        return res.json();
      };
      // The cluster's integration is registered for installation 8101 in another store; this one registers it too.
      const integration = (await post('/v1/integrations/github/install', admin, { installation_id: 8101 })).id;
      const lid = (await post('/v2/listeners', workspaceKey, { compute_type: 'k8s', compute_id: 'cluster' })).id;
      const listenerKey = (await post(`/v2/listeners/${lid}/keys`, workspaceKey, {})).key;
      await post('/v2/deployments', workspaceKey, {
        name: 'on-cluster',
        source: 'github',
        source_config: { repo_url: `${gh.url}/acme/agent`, integration_id: integration, listener_id: lid },
        source_revision_config: { repo_ref: 'main', graph_config_path: 'langgraph.json' },
        secrets: [],
      });

      // The operator of a data-plane-only install: no GitHub App, the listener's settings instead.
      await op.close();
      const config = parseOperatorConfig(
        [...operatorArgs(), '--listener-control-plane-url', cpUrl, '--listener-tenant', 'team-a', '--listener-id', lid],
        { AGENTPLANE_LISTENER_API_KEY: listenerKey },
      )!;
      expect(config.github).toBeUndefined();
      op = startKubernetesOperator(config, logger);

      // What the listener writes for that deployment: built with a token the control plane minted for it.
      const minted = gh.tokens.length;
      const rev = await deploy('0e1f2a3b-4c5d-4e6f-8a7b-8c9d0e1f2a3b', 'team-a', `${gh.url}/acme/agent`, integration);
      const job = await until('the build Job', () => peek('batch', 'jobs', `${rev}-build`));
      const secret = await until('the build Secret', () => peek('', 'secrets', `${rev}-build-git`));
      const password = Buffer.from(secret.data.password, 'base64').toString();
      expect(Buffer.from(secret.data.username, 'base64').toString()).toBe('x-access-token');
      expect(gh.tokens.slice(minted)).toEqual([password]);
      expect(secret.metadata.ownerReferences[0].uid).toBe(job.metadata.uid);
      expect(JSON.stringify(job)).not.toContain(password);

      // A pair no deployment of the listener uses (the same repository spelled differently): refused, one line.
      const other = await deploy(
        '1f2a3b4c-5d6e-4f7a-8b8c-9d0e1f2a3b4c',
        'team-a',
        `${gh.url}/acme/agent.git`,
        integration,
      );
      const failed = await until('the revision to fail', () => {
        const r = peek('agentplane.dev', 'agentrevisions', other);
        return r?.status?.phase === 'BUILD_FAILED' ? r : undefined;
      });
      expect(failed.status.statusMessage).toMatch(
        /control plane refused a git credential \(409\): No deployment assigned to listener/,
      );
      expect(failed.status.statusMessage).not.toContain('\n');
      expect(peek('batch', 'jobs', `${other}-build`)).toBeUndefined();
      expect(gh.tokens.slice(minted)).toEqual([password]);
    } finally {
      await cp.close();
      await cpStore.close();
      rmSync(dir, { recursive: true, force: true });
    }
  });
});

// Git credentials belong to one tenant. Attacker's view: tenant B knows the URL of tenant A's private repository
// and deploys it; the operator must not clone it for B with A's credentials. Each build mounts only the Secret
// `<prefix><its tenant>`, only when that Secret says it belongs to that tenant, and only for the repositories it
// is scoped to. Run as the chart's operator ServiceAccount against the RBAC-enforcing double.
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { CoreV1Api, CustomObjectsApi } from '@kubernetes/client-node';
import { parse } from 'yaml';
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import { createLogger } from '../../src/lib/logger.ts';
import { parseOperatorConfig } from '../../src/operator/config.ts';
import { startKubernetesOperator, type RunningOperator } from '../../src/operator/kubernetes.ts';
import { operatorTestFlags, startCluster, until, type TestCluster } from '../support/kubernetes/cluster.ts';

const NS = 'agents';
const logger = createLogger({ level: 'silent', name: 'test' });
const PRIVATE_A = 'https://git.example.com/team-a/secret-sauce.git';
type Json = Record<string, any>;

let cluster: TestCluster;
let op: RunningOperator;
let custom: CustomObjectsApi;
let core: CoreV1Api;

beforeAll(async () => {
  cluster = await startCluster(NS, { rbac: true });
  cluster.installChartRbac({ 'build.gitCredentialsSecretPrefix': 'git-' });
  custom = cluster.kubeConfig.makeApiClient(CustomObjectsApi);
  core = cluster.kubeConfig.makeApiClient(CoreV1Api);
  const secret = (name: string, tenant: string, scope?: string) =>
    core.createNamespacedSecret({
      namespace: NS,
      body: {
        metadata: {
          name,
          annotations: {
            'agentplane.dev/tenant': tenant,
            ...(scope ? { 'agentplane.dev/git-repositories': scope } : {}),
          },
        },
        stringData: { username: 'bot', password: `token-of-${tenant}` },
      },
    });
  // The admin's Secrets: team-a's token, for its own owner on git.example.com only; one named for team-c but
  // stating team-a (a mistake, or a name collision), which must grant team-c nothing.
  await secret('git-team-a', 'team-a', 'git.example.com/team-a');
  await secret('git-team-c', 'team-a');
  const config = parseOperatorConfig(
    [
      ...operatorTestFlags(cluster, NS),
      '--git-credentials-prefix',
      'git-',
      '--log-level',
      'silent',
      '--health-port',
      '0',
    ],
    {},
  )!;
  op = startKubernetesOperator(config, logger);
});
afterEach(() => {
  expect([...new Set(cluster.api.denied)]).toEqual([]);
});
afterAll(async () => {
  await op?.close();
  await cluster?.close();
});

/** Deploys `repoUrl` for `tenant` from the source example; returns the pod spec of its build Job. */
async function buildOf(id: string, tenant: string, repoUrl: string): Promise<Json> {
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
    sourceConfig: { repoUrl, deploymentType: 'dev' },
  };
  await custom.createNamespacedCustomObject({
    group: 'agentplane.dev',
    version: 'v1alpha1',
    namespace: NS,
    plural: 'agentdeployments',
    body: manifest,
  });
  const job = await until('the build Job', () => cluster.api.peek('batch', 'jobs', NS, `${name}-r1-build`));
  return job.spec.template.spec;
}
const credentialVolume = (pod: Json) =>
  (pod.volumes as Json[]).find((v) => v.name === 'git-credentials')?.secret?.secretName;
const cloneEnv = (pod: Json) => (pod.initContainers[0].env as { name: string }[]).map((e) => e.name);

describe('git credentials per tenant', () => {
  it("clones tenant A's private repository with A's credentials", async () => {
    const pod = await buildOf('0a1b2c3d-4e5f-4a6b-8c7d-8e9f0a1b2c3d', 'team-a', PRIVATE_A);
    expect(credentialVolume(pod)).toBe('git-team-a');
    expect(cloneEnv(pod)).toContain('GIT_CREDENTIALS_DIR');
  });

  it("gives tenant B nothing when it names A's repository", async () => {
    const pod = await buildOf('1b2c3d4e-5f60-4b7c-9d8e-9f0a1b2c3d4e', 'team-b', PRIVATE_A);
    expect(credentialVolume(pod)).toBeUndefined();
    expect(cloneEnv(pod)).not.toContain('GIT_CREDENTIALS_DIR');
    expect(JSON.stringify(pod)).not.toContain('git-team-a');
  });

  it("does not send A's token to a repository outside its scope, even for A", async () => {
    for (const [id, url] of [
      ['2c3d4e5f-6071-4c8d-8e9f-0a1b2c3d4e5f', 'https://evil.example.net/team-a/secret-sauce.git'],
      ['3d4e5f60-7182-4d9e-9f0a-1b2c3d4e5f60', 'https://git.example.com/team-a-lookalike/x.git'],
      ['4e5f6071-8293-4eaf-8a1b-2c3d4e5f6071', 'https://git.example.com/team-a/../team-b/x.git'],
    ] as const) {
      expect(credentialVolume(await buildOf(id, 'team-a', url)), url).toBeUndefined();
    }
  });

  it('ignores a Secret named for a tenant that states another owner', async () => {
    const pod = await buildOf('5f607182-93a4-4fb0-8b1c-3d4e5f607182', 'team-c', PRIVATE_A);
    expect(credentialVolume(pod)).toBeUndefined();
  });
});

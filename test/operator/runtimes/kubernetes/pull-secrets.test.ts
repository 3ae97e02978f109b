// Image pull secrets with a namespace per tenant: agent pods can only use pull secrets of their own namespace, so
// the operator keeps copies of the configured ones in each tenant namespace: created before the agent, following a
// rotation of the source without a deploy, removed once no longer configured, and nothing else copied. The
// operator runs as the chart's ServiceAccount with exactly the RBAC the chart renders for these values.
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { CoreV1Api, CustomObjectsApi } from '@kubernetes/client-node';
import { parse } from 'yaml';
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import { createLogger } from '../../../../src/lib/logger.ts';
import { parseOperatorConfig } from '../../../../src/operator/config.ts';
import { startKubernetesOperator, type RunningOperator } from '../../../../src/operator/kubernetes.ts';
import { startCluster, until, type TestCluster } from '../../../support/kubernetes/cluster.ts';

const NS = 'agents';
const TENANT_NS = 'agentplane-t-team-a';
const logger = createLogger({ level: 'silent', name: 'test' });
type Json = Record<string, any>;

let cluster: TestCluster;
let op: RunningOperator | undefined;
let custom: CustomObjectsApi;
let core: CoreV1Api;

const dockerconfig = (token: string) => ({
  '.dockerconfigjson': JSON.stringify({
    auths: { 'registry.test': { auth: Buffer.from(`bot:${token}`).toString('base64') } },
  }),
});
const copy = () => cluster.api.peek('', 'secrets', TENANT_NS, 'regcred');

function start(pullSecrets: string[]): RunningOperator {
  cluster.installChartRbac({ 'agents.namespacePerTenant': true, 'agents.imagePullSecrets': pullSecrets });
  const config = parseOperatorConfig(
    [
      '--kubeconfig',
      cluster.as('agentplane-operator').kubeconfigPath,
      '--namespace',
      NS,
      '--base-image',
      'agentplane:test',
      '--namespace-per-tenant',
      'true',
      '--image-pull-secrets',
      pullSecrets.join(','),
      // As the chart sets them: the operator's rights in a tenant namespace are the RoleBinding it makes there.
      '--tenant-operator-account',
      `${NS}/agentplane-operator`,
      '--tenant-operator-role',
      'agentplane-operator-tenant',
      '--log-level',
      'silent',
      '--health-port',
      '0',
    ],
    {},
  )!;
  return startKubernetesOperator(config, logger);
}

async function deploy(id: string): Promise<string> {
  const manifest = parse(
    readFileSync(join(import.meta.dirname, '../../../../examples/k8s/agentdeployment.yaml'), 'utf8'),
  ) as Json;
  const name = `ag-${id}`;
  manifest.metadata.name = name;
  manifest.spec = { ...manifest.spec, deploymentId: id, targetRevisionName: `${name}-r1`, secretReferences: [] };
  await custom.createNamespacedCustomObject({
    group: 'agentplane.dev',
    version: 'v1alpha1',
    namespace: NS,
    plural: 'agentdeployments',
    body: manifest,
  });
  return name;
}

beforeAll(async () => {
  cluster = await startCluster(NS, { rbac: true });
  custom = cluster.kubeConfig.makeApiClient(CustomObjectsApi);
  core = cluster.kubeConfig.makeApiClient(CoreV1Api);
  await core.createNamespacedSecret({
    namespace: NS,
    body: { metadata: { name: 'regcred' }, type: 'kubernetes.io/dockerconfigjson', stringData: dockerconfig('one') },
  });
  await core.createNamespacedSecret({
    namespace: NS,
    body: { metadata: { name: 'push' }, type: 'kubernetes.io/dockerconfigjson', stringData: dockerconfig('push') },
  });
  op = start(['regcred']);
});
afterEach(() => {
  expect([...new Set(cluster.api.denied)]).toEqual([]);
});
afterAll(async () => {
  await op?.close();
  await cluster?.close();
});

describe('image pull secrets in tenant namespaces', () => {
  it('copies the configured pull secret into the tenant namespace before the agent that uses it', async () => {
    const name = await deploy('6a7b8c9d-0e1f-4a2b-8c3d-4e5f6a7b8c9d');
    const d = await until('the agent Deployment', () => cluster.api.peek('apps', 'deployments', TENANT_NS, name));
    expect(d.spec.template.spec.imagePullSecrets).toContainEqual({ name: 'regcred' });
    const c = copy()!;
    expect(c.type).toBe('kubernetes.io/dockerconfigjson');
    expect(c.data).toEqual(cluster.api.peek('', 'secrets', NS, 'regcred')!.data);
    expect(c.metadata.labels['app.kubernetes.io/managed-by']).toBe('agentplane-operator');
    // Only what is configured: the push secret stays where it is.
    expect(cluster.api.peek('', 'secrets', TENANT_NS, 'push')).toBeUndefined();
    // Server-side applies, the first of which creates each object.
    const postSecret = cluster.api.requests.indexOf(`PATCH /api/v1/namespaces/${TENANT_NS}/secrets/regcred`);
    expect(postSecret).toBeGreaterThanOrEqual(0);
    expect(postSecret).toBeLessThan(
      cluster.api.requests.indexOf(`PATCH /apis/apps/v1/namespaces/${TENANT_NS}/deployments/${name}`),
    );
  });

  it('follows a rotation of the source without a deploy', async () => {
    // The operator watches the source by name (all the chart lets it watch among Secrets).
    expect(
      cluster.api.requestUrls.some(
        (u) =>
          u.startsWith(`GET /api/v1/namespaces/${NS}/secrets?`) &&
          u.includes('watch=true') &&
          u.includes('fieldSelector=metadata.name%3Dregcred'),
      ),
    ).toBe(true);
    const src = await core.readNamespacedSecret({ name: 'regcred', namespace: NS });
    const rotated = Buffer.from(dockerconfig('two')['.dockerconfigjson']).toString('base64');
    await core.replaceNamespacedSecret({
      name: 'regcred',
      namespace: NS,
      body: { ...src, data: { '.dockerconfigjson': rotated } },
    });
    await until('the copy rotated', () => copy()?.data['.dockerconfigjson'] === rotated);
  });

  it('removes the copy once the pull secret is no longer configured', async () => {
    await op?.close();
    op = start([]);
    await deploy('7b8c9d0e-1f2a-4b3c-9d4e-5f6a7b8c9d0e');
    await until('the copy removed', () => !copy());
    expect(cluster.api.peek('', 'secrets', NS, 'regcred')).toBeDefined();
  });
});

// The control plane (a real `agentplane control-plane` process on the kubernetes store) and the operator each run as
// the chart's ServiceAccount against an API server enforcing the chart's RBAC: a deployment's whole life through
// the HTTP API (create, revision DEPLOYED, logs, new revision, delete) needs no permission the chart lacks.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createLogger } from '../../src/lib/logger.ts';
import { parseOperatorConfig } from '../../src/operator/config.ts';
import { startKubernetesOperator, type RunningOperator } from '../../src/operator/kubernetes.ts';
import { startControlPlaneProcess, type ControlPlaneProcess } from '../control-plane/helpers/process.ts';
import { startCluster, until, type TestCluster } from '../support/kubernetes/cluster.ts';
import { FakeCluster } from '../support/kubernetes/kubelet.ts';

const NS = 'agents';
const KEY = 'bootstrap-key-for-rbac-tests-0123456789';
const logger = createLogger({ level: 'silent', name: 'test' });

let cluster: TestCluster;
let cp: ControlPlaneProcess;
let op: RunningOperator;

beforeAll(async () => {
  cluster = await startCluster(NS, { rbac: true });
  cluster.installChartRbac();
  cp = await startControlPlaneProcess(
    ['--store', 'kubernetes', '--namespace', NS, '--kubeconfig', cluster.as('agentplane-control-plane').kubeconfigPath],
    {
      AGENTPLANE_BOOTSTRAP_API_KEY: KEY,
    },
  );
  const config = parseOperatorConfig(
    [
      '--kubeconfig',
      cluster.as('agentplane-operator').kubeconfigPath,
      '--namespace',
      NS,
      '--log-level',
      'silent',
      '--health-port',
      'off',
    ],
    {},
  )!;
  op = startKubernetesOperator(config, logger);
}, 60_000);
afterAll(async () => {
  if (process.env.DUMP_USED)
    (await import('node:fs')).writeFileSync(
      process.env.DUMP_USED,
      JSON.stringify(Object.fromEntries([...cluster.api.used].map(([k, v]) => [k, [...v].sort()])), null, 1),
    );
  await op?.close();
  await cp?.stop();
  await cluster?.close();
});

async function api(method: string, path: string, body?: unknown): Promise<{ status: number; body: any }> {
  const res = await fetch(`${cp.url}${path}`, {
    method,
    headers: { 'x-api-key': KEY, 'x-tenant-id': 'team-a', ...(body ? { 'content-type': 'application/json' } : {}) },
    body: body ? JSON.stringify(body) : undefined,
  });
  const text = await res.text();
  return { status: res.status, body: text ? JSON.parse(text) : undefined };
}

describe('control plane and operator under the chart RBAC', () => {
  it('create -> DEPLOYED -> logs -> new revision -> delete, with no request refused', async () => {
    // A ServiceAccount the admin granted to the tenant: the control plane checks its label when the deployment names it.
    const { CoreV1Api } = await import('@kubernetes/client-node');
    await cluster.kubeConfig.makeApiClient(CoreV1Api).createNamespacedServiceAccount({
      namespace: NS,
      body: { metadata: { name: 'a-bot', labels: { 'agentplane.dev/tenant': 'team-a' } } },
    });
    const created = await api('POST', '/v2/deployments', {
      name: 'rbac-bot',
      source: 'external_docker',
      source_config: { resource_spec: { service_account_name: 'a-bot' } },
      source_revision_config: { image_uri: 'ghcr.io/x/agent:1' },
      secrets: [{ name: 'OPENAI_API_KEY', value: 'sk-secret' }],
    });
    expect(created.status, JSON.stringify(created.body)).toBe(201);
    const id = created.body.id as string;
    const name = `ag-${id}`;
    const first = created.body.latest_revision_id as string;
    await until('the agent Deployment', () => cluster.api.peek('apps', 'deployments', NS, name), 30_000);
    const fake = new FakeCluster(cluster.kubeConfig, NS);
    await fake.rollout(name, 'ready');
    await until(
      'DEPLOYED',
      async () => (await api('GET', `/v2/deployments/${id}/revisions/${first}`)).body.status === 'DEPLOYED',
      30_000,
    );
    expect((await api('GET', `/v2/deployments/${id}/revisions/${first}/logs?type=deploy`)).status).toBe(200);

    const patched = await api('PATCH', `/v2/deployments/${id}`, {
      source_revision_config: { image_uri: 'ghcr.io/x/agent:2' },
    });
    expect(patched.status, JSON.stringify(patched.body)).toBe(200);
    const second = patched.body.latest_revision_id as string;
    expect(second).not.toBe(first);
    await until(
      'rollout of the second image',
      () =>
        cluster.api.peek('apps', 'deployments', NS, name)?.spec.template.spec.containers[0].image ===
        'ghcr.io/x/agent:2',
      30_000,
    );
    await fake.rollout(name, 'ready');
    await until(
      'second DEPLOYED',
      async () => (await api('GET', `/v2/deployments/${id}/revisions/${second}`)).body.status === 'DEPLOYED',
      30_000,
    );

    expect((await api('DELETE', `/v2/deployments/${id}`)).status).toBe(204);
    await until(
      'the AgentDeployment gone',
      () => !cluster.api.peek('agentplane.dev', 'agentdeployments', NS, name),
      30_000,
    );
    expect([...new Set(cluster.api.denied)]).toEqual([]);
    // Both identities were really used (the test would pass vacuously as the administrator).
    expect([...cluster.api.used.keys()].sort()).toEqual([
      'system:serviceaccount:agents:agentplane-control-plane',
      'system:serviceaccount:agents:agentplane-operator',
    ]);
  }, 120_000);

  it('a deployment built by a listener is created (its revision QUEUED for the listener), with no request refused', async () => {
    const listener = await api('POST', '/v2/listeners', { compute_type: 'k8s', compute_id: 'eu-1' });
    expect(listener.status, JSON.stringify(listener.body)).toBe(201);
    const created = await api('POST', '/v2/deployments', {
      name: 'listener-bot',
      source: 'external_docker',
      source_config: { listener_id: listener.body.id },
      source_revision_config: { image_uri: 'ghcr.io/x/agent:1' },
    });
    expect(created.status, JSON.stringify(created.body)).toBe(201);
    const rev = await api('GET', `/v2/deployments/${created.body.id}/revisions/${created.body.latest_revision_id}`);
    expect(rev.body.status).toBe('QUEUED');
    expect([...new Set(cluster.api.denied)]).toEqual([]);
  }, 60_000);
});

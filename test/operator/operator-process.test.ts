// `agentplane operator` as a real process against the API-server double: killed with SIGKILL in the middle of a
// rollout, a new replica takes the Lease over once it expires and finishes the job. Both run as the chart's
// operator ServiceAccount under RBAC.
import { spawn, type ChildProcess } from 'node:child_process';
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { CoreV1Api, CustomObjectsApi } from '@kubernetes/client-node';
import { parse, parseAllDocuments } from 'yaml';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startCluster, until, type TestCluster } from '../support/kubernetes/cluster.ts';
import { FakeCluster } from '../support/kubernetes/kubelet.ts';

const NS = 'agents';
const root = join(import.meta.dirname, '../..');
const id = '3c2b1a09-8f7e-4d6c-9b5a-4f3e2d1c0b9a';
const name = `ag-${id}`;
const r1 = `${name}-r1`;

let cluster: TestCluster;
const children: ChildProcess[] = [];

function startOperator(identity: string): ChildProcess {
  const child = spawn(
    process.execPath,
    [
      join(root, 'bin/agentplane.mjs'),
      'operator',
      '--kubeconfig',
      cluster.as('agentplane-operator').kubeconfigPath,
      '--namespace',
      NS,
      '--leader-elect',
      'true',
      '--lease-duration',
      '2',
      '--identity',
      identity,
      '--log-level',
      'warn',
      '--health-port',
      '0',
    ],
    { cwd: root, stdio: ['ignore', 'ignore', 'inherit'] },
  );
  children.push(child);
  return child;
}

beforeAll(async () => {
  // As the chart's operator ServiceAccount, with its Lease Role (get/update on this one Lease, create).
  cluster = await startCluster(NS, { rbac: true });
  cluster.installChartRbac();
  // The admin's grants the example deployment relies on (its secret_references).
  const core = cluster.kubeConfig.makeApiClient(CoreV1Api);
  for (const doc of parseAllDocuments(readFileSync(join(root, 'examples/k8s/tenant-access.yaml'), 'utf8'))) {
    const body = doc.toJS();
    if (body.kind === 'Secret') await core.createNamespacedSecret({ namespace: NS, body });
    else await core.createNamespacedServiceAccount({ namespace: NS, body });
  }
});
afterAll(async () => {
  for (const c of children) if (c.exitCode === null) c.kill('SIGKILL');
  await cluster?.close();
});

describe('operator process', () => {
  it('killed mid-rollout, a new replica converges after taking the Lease over', async () => {
    const op1 = startOperator('operator-1');
    const manifest = parse(readFileSync(join(root, 'examples/k8s/agentdeployment.yaml'), 'utf8'));
    manifest.metadata.name = name;
    manifest.spec.deploymentId = id;
    manifest.spec.targetRevisionName = r1;
    await cluster.kubeConfig.makeApiClient(CustomObjectsApi).createNamespacedCustomObject({
      group: 'agentplane.dev',
      version: 'v1alpha1',
      namespace: NS,
      plural: 'agentdeployments',
      body: manifest,
    });
    const peekRev = () => cluster.api.peek('agentplane.dev', 'agentrevisions', NS, r1);
    await until('DEPLOYING', () => peekRev()?.status?.phase === 'DEPLOYING', 60_000);
    expect(cluster.api.peek('coordination.k8s.io', 'leases', NS, 'agentplane-operator')!.spec.holderIdentity).toBe(
      'operator-1',
    );

    op1.kill('SIGKILL');
    await new Promise((r) => op1.once('exit', r));
    // The cluster finishes the rollout while no operator runs.
    await new FakeCluster(cluster.kubeConfig, NS).rollout(name, 'ready');
    expect(peekRev()!.status.phase).toBe('DEPLOYING');

    startOperator('operator-2');
    await until('DEPLOYED', () => peekRev()?.status?.phase === 'DEPLOYED', 60_000);
    expect(cluster.api.peek('coordination.k8s.io', 'leases', NS, 'agentplane-operator')!.spec).toMatchObject({
      holderIdentity: 'operator-2',
      leaseTransitions: 1,
    });
    const dep = cluster.api.peek('agentplane.dev', 'agentdeployments', NS, name)!;
    expect(dep.status.activeRevisionName).toBe(r1);
    expect(dep.status.conditions.find((c: { type: string }) => c.type === 'Ready').status).toBe('True');
    expect([...new Set(cluster.api.denied)]).toEqual([]);
  }, 150_000);
});

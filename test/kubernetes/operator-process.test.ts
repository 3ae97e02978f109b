// `agentplane operator` as a real process against the API-server double: killed with SIGKILL in the middle of a
// rollout, a new replica takes the Lease over once it expires and finishes the job.
import { spawn, type ChildProcess } from 'node:child_process';
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { CustomObjectsApi } from '@kubernetes/client-node';
import { parse } from 'yaml';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startCluster, until, type TestCluster } from './helpers/cluster.ts';
import { FakeCluster } from './helpers/kubelet.ts';

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
    [join(root, 'bin/agentplane.mjs'), 'operator', '--kubeconfig', cluster.kubeconfigPath, '--namespace', NS, '--leader-elect', 'true',
      '--lease-duration', '2', '--identity', identity, '--log-level', 'warn'],
    { cwd: root, stdio: ['ignore', 'ignore', 'inherit'] },
  );
  children.push(child);
  return child;
}

beforeAll(async () => {
  cluster = await startCluster(NS);
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
      group: 'agentplane.dev', version: 'v1alpha1', namespace: NS, plural: 'agentdeployments', body: manifest,
    });
    const peekRev = () => cluster.api.peek('agentplane.dev', 'agentrevisions', NS, r1);
    await until('DEPLOYING', () => peekRev()?.status?.phase === 'DEPLOYING', 30_000);
    expect(cluster.api.peek('coordination.k8s.io', 'leases', NS, 'agentplane-operator')!.spec.holderIdentity).toBe('operator-1');

    op1.kill('SIGKILL');
    await new Promise((r) => op1.once('exit', r));
    // The cluster finishes the rollout while no operator runs.
    await new FakeCluster(cluster.kubeConfig, NS).rollout(name, 'ready');
    expect(peekRev()!.status.phase).toBe('DEPLOYING');

    startOperator('operator-2');
    await until('DEPLOYED', () => peekRev()?.status?.phase === 'DEPLOYED', 30_000);
    expect(cluster.api.peek('coordination.k8s.io', 'leases', NS, 'agentplane-operator')!.spec).toMatchObject({ holderIdentity: 'operator-2', leaseTransitions: 1 });
    const dep = cluster.api.peek('agentplane.dev', 'agentdeployments', NS, name)!;
    expect(dep.status.activeRevisionName).toBe(r1);
    expect(dep.status.conditions.find((c: { type: string }) => c.type === 'Ready').status).toBe('True');
  });
});

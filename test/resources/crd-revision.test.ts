// The operator's start-up CRD revision check, as a real process under the chart's RBAC against the API-server
// double: CRDs older than it needs (an upgrade that skipped `kubectl apply -f crds/`) stop it with one clear line
// and an Event on its Pod; a chart that predates the CRD read grant only gets a warning.
import { spawn } from 'node:child_process';
import { join } from 'node:path';
import { CoreV1Api } from '@kubernetes/client-node';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { CRD_REVISION, CRD_REVISION_ANNOTATION } from '../../src/resources/crd.ts';
import { seedCrdObjects } from '../support/kube-apiserver/crd-objects.ts';
import { startCluster, until, type TestCluster } from '../support/kubernetes/cluster.ts';

const NS = 'agents';
const root = join(import.meta.dirname, '../..');
const crdDir = join(root, 'crds');

let cluster: TestCluster;
beforeEach(async () => {
  cluster = await startCluster(NS, { rbac: true });
  cluster.installChartRbac();
});
afterEach(async () => {
  await cluster?.close();
});

type Run = { output: () => string; exited: Promise<number | null>; kill(): void };

function runOperator(identity: string): Run {
  const child = spawn(
    process.execPath,
    [
      join(root, 'bin/agentplane.mjs'),
      'operator',
      '--kubeconfig',
      cluster.as('agentplane-operator').kubeconfigPath,
      '--namespace',
      NS,
      '--identity',
      identity,
      '--log-level',
      'info',
      '--health-port',
      '0',
    ],
    { cwd: root, stdio: ['ignore', 'pipe', 'pipe'], env: { ...process.env, POD_NAMESPACE: NS } },
  );
  let out = '';
  child.stdout.on('data', (d: Buffer) => (out += d.toString()));
  child.stderr.on('data', (d: Buffer) => (out += d.toString()));
  const exited = new Promise<number | null>((r) => child.on('exit', (code) => r(code)));
  return { output: () => out, exited, kill: () => child.kill('SIGKILL') };
}

/** Stores the CRDs as an older release shipped them: without the revision annotation. */
function installOldCrds(): void {
  seedCrdObjects(cluster.api, crdDir, (crd) => {
    delete crd.metadata.annotations?.[CRD_REVISION_ANNOTATION];
    return crd;
  });
}

describe('CRD revision check at operator start', () => {
  it('refuses CRDs older than it needs: exits non-zero naming the CRD, and records an Event on its Pod', async () => {
    installOldCrds();
    const op = runOperator('operator-pod-1');
    expect(await op.exited).toBe(1);
    const line = op
      .output()
      .split('\n')
      .find((l) => l.includes('agentdeployments.agentplane.dev'));
    expect(line).toBeDefined();
    expect(line).toContain(`needs ${CRD_REVISION}`);
    expect(line).toContain('apply crds/ first (docs/kubernetes.md#upgrading)');
    expect(op.output()).not.toContain('operator acting');

    const events = await cluster.kubeConfig.makeApiClient(CoreV1Api).listNamespacedEvent({ namespace: NS });
    const event = events.items.find((e) => e.reason === 'CRDsOutdated');
    expect(event?.involvedObject).toMatchObject({ kind: 'Pod', name: 'operator-pod-1', namespace: NS });
    expect(event?.type).toBe('Warning');
    expect(event?.message).toContain('agentrevisions.agentplane.dev');
  });

  it('refuses a missing CRD', async () => {
    cluster.api.unseed('apiextensions.k8s.io', 'customresourcedefinitions', (o) =>
      o.metadata.name.startsWith('agentrevisions.'),
    );
    const op = runOperator('operator-pod-2');
    expect(await op.exited).toBe(1);
    expect(op.output()).toContain('CRD agentrevisions.agentplane.dev is missing');
  });

  it('runs against current CRDs', async () => {
    const op = runOperator('operator-pod-3');
    await until('the operator acting', () => op.output().includes('operator acting'), 30_000);
    expect(op.output()).not.toContain('CustomResourceDefinitions');
    op.kill();
    await op.exited;
  });

  it('warns and runs when its RBAC cannot read CRDs (a chart from before the check)', async () => {
    installOldCrds();
    cluster.api.unseed('rbac.authorization.k8s.io', 'clusterrolebindings', (o) =>
      o.metadata.name.endsWith('-operator-crds'),
    );
    const op = runOperator('operator-pod-4');
    await until('the operator acting', () => op.output().includes('operator acting'), 30_000);
    expect(op.output()).toContain('cannot read CustomResourceDefinitions (forbidden');
    op.kill();
    await op.exited;
  });
});

// A build pod the cluster refuses to create (here Pod Security admission: the agent namespace enforces
// `restricted`, which builds cannot meet) fails the revision with the Job controller's FailedCreate message,
// instead of BUILDING until the Job's deadline, and the failed build's Job is cancelled, so its build-credential
// Secret (a git integration's token) goes with it. On the API-server double under the chart's RBAC, the test playing the Job
// controller.
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { CoreV1Api, CustomObjectsApi } from '@kubernetes/client-node';
import { parse } from 'yaml';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createLogger } from '../../../../src/lib/logger.ts';
import { openKubernetesPlatformState } from '../../../../src/state/kubernetes/index.ts';
import { createIntegrationService } from '../../../../src/control-plane/services/integrations/index.ts';
import { parseOperatorConfig } from '../../../../src/operator/config.ts';
import { startKubernetesOperator } from '../../../../src/operator/kubernetes.ts';
import { KubernetesRuntime } from '../../../../src/operator/runtimes/kubernetes/index.ts';
import { createRevisionReconciler } from '../../../../src/operator/controllers/agentrevision/controller.ts';
import { storeLogSink } from '../../../../src/operator/sources.ts';
import { operatorTestFlags, startCluster, until, type TestCluster } from '../../../support/kubernetes/cluster.ts';
import { FakeCluster } from '../../../support/kubernetes/kubelet.ts';

const NS = 'agents';
const OPERATOR = 'agentplane-operator';
const logger = createLogger({ level: (process.env.TEST_LOG as 'warn') ?? 'silent', name: 'test' });
const manifest = parse(
  readFileSync(join(import.meta.dirname, '../../../../examples/k8s/agentdeployment-source.yaml'), 'utf8'),
);
const name = manifest.metadata.name as string;
const r1 = `${name}-r1`;
const secretName = `${r1}-build-git`;

let cluster: TestCluster;
beforeAll(async () => {
  cluster = await startCluster(NS, { rbac: true });
  cluster.installChartRbac();
  const core = cluster.kubeConfig.makeApiClient(CoreV1Api);
  const ns = await core.readNamespace({ name: NS });
  ns.metadata!.labels = { ...ns.metadata!.labels, 'pod-security.kubernetes.io/enforce': 'restricted' };
  await core.replaceNamespace({ name: NS, body: ns });
  // The build clones with a git integration's stored token: the operator gives it a Secret of its own.
  const store = openKubernetesPlatformState({ kubeConfig: cluster.kubeConfig, namespace: NS, logger });
  try {
    const integration = await createIntegrationService(store).create('team-a', {
      name: 'gitea',
      host: 'git.example.com',
      token: 'gitea-token-refused-5e4d3c',
    });
    manifest.spec.sourceConfig = {
      ...manifest.spec.sourceConfig,
      repoUrl: 'https://git.example.com/team/agent.git',
      integrationId: integration.id,
    };
  } finally {
    await store.close();
  }
});
afterAll(async () => {
  await cluster?.close();
});

const config = () =>
  parseOperatorConfig(
    [...operatorTestFlags(cluster, NS, OPERATOR), '--log-level', 'silent', '--health-port', '0'],
    {},
  )!;
const phaseOf = () => cluster.api.peek('agentplane.dev', 'agentrevisions', NS, r1)?.status;

describe('a build pod refused by admission', () => {
  it('turns the revision BUILD_FAILED with the FailedCreate message once the refusals persist', async () => {
    const op = startKubernetesOperator(config(), logger);
    try {
      await cluster.kubeConfig.makeApiClient(CustomObjectsApi).createNamespacedCustomObject({
        group: 'agentplane.dev',
        version: 'v1alpha1',
        namespace: NS,
        plural: 'agentdeployments',
        body: manifest,
      });
      await until('the build Job', () => cluster.api.peek('batch', 'jobs', NS, `${r1}-build`));
      await until('the build credential Secret', () => cluster.api.peek('', 'secrets', NS, secretName));
      await until('BUILDING', () => phaseOf()?.phase === 'BUILDING');
    } finally {
      await op.close();
    }
    const fake = new FakeCluster(cluster.kubeConfig, NS);
    // The Job controller's first refusal alone may be transient: still building.
    expect(await fake.tryJobPod(`${r1}-build`, 1)).toBe(1);
    const reconcile = async () => {
      const kubeConfig = cluster.as(OPERATOR).kubeConfig;
      const store = openKubernetesPlatformState({ kubeConfig, namespace: NS, logger });
      const runtime = new KubernetesRuntime({
        kubeConfig,
        namespace: NS,
        config: config().runtime,
        logs: storeLogSink(store),
        logger,
      });
      await runtime.start();
      try {
        await createRevisionReconciler({ store, runtime, logger })(`${NS}/${r1}`);
      } finally {
        await runtime.shutdown();
        await store.close();
      }
    };
    await reconcile();
    expect(phaseOf()?.phase).toBe('BUILDING');
    expect(cluster.api.peek('', 'secrets', NS, secretName)).toBeDefined();

    // It keeps retrying and keeps being refused: the next look (a resync) fails the build with the reason.
    expect(await fake.tryJobPod(`${r1}-build`, 2)).toBe(2);
    await reconcile();
    expect(phaseOf()?.phase).toBe('BUILD_FAILED');
    expect(phaseOf()?.statusMessage).toMatch(
      /^Build pod cannot be created \(FailedCreate\): Error creating: .*violates PodSecurity "restricted:latest".* \(3 attempts\)$/,
    );
    // The failed build's Job is cancelled and its credential goes with it (garbage collection: the operator itself
    // may not delete Secrets in this namespace).
    expect(cluster.api.peek('batch', 'jobs', NS, `${r1}-build`)).toBeUndefined();
    await until('the build credential Secret gone', () => !cluster.api.peek('', 'secrets', NS, secretName));
    expect([...new Set(cluster.api.denied)]).toEqual([]);
  });
});

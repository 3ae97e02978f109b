// apply() against what a real API server stores: it canonicalises quantities (`1024Mi` is kept as `1Gi`) and drops
// empty maps (`nodeSelector: {}`), refuses changes to a StatefulSet's volumeClaimTemplates, and defaults a
// Deployment's replicas to 1 when they are removed. Each would make the operator write on every reconcile, fail
// forever, or scale down for a moment.
import {
  ApiException,
  AppsV1Api,
  KubernetesObjectApi,
  PatchStrategy,
  type V1Deployment,
} from '@kubernetes/client-node';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createLogger } from '../../../../src/lib/logger.ts';
import { openKubernetesPlatformState } from '../../../../src/state/kubernetes/index.ts';
import { parseOperatorConfig } from '../../../../src/operator/config.ts';
import { createDeploymentReconciler } from '../../../../src/operator/controllers/agentdeployment/controller.ts';
import { createRevisionReconciler } from '../../../../src/operator/controllers/agentrevision/controller.ts';
import { apply, quantityValue, type ObjectOps } from '../../../../src/operator/runtimes/kubernetes/apply.ts';
import { KubernetesRuntime } from '../../../../src/operator/runtimes/kubernetes/index.ts';
import { makeApiClients } from '../../../../src/operator/runtimes/kubernetes/context.ts';
import { storeLogSink } from '../../../../src/operator/sources.ts';
import { operatorTestFlags, startCluster, until, type TestCluster } from '../../../support/kubernetes/cluster.ts';

const NS = 'agents';
const logger = createLogger({ level: 'silent', name: 'test' });
type Json = Record<string, any>;

let cluster: TestCluster;
let apps: AppsV1Api;
let ops: ObjectOps<V1Deployment>;

beforeAll(async () => {
  cluster = await startCluster(NS, { rbac: true });
  cluster.installChartRbac();
  apps = cluster.kubeConfig.makeApiClient(AppsV1Api);
  ops = makeApiClients(cluster.kubeConfig).ops.deployment;
}, 60_000);
afterAll(async () => {
  await cluster?.close();
});

function deployment(name: string, spec: Json = {}, pod: Json = {}, container: Json = {}): V1Deployment {
  const labels = { app: name };
  return {
    apiVersion: 'apps/v1',
    kind: 'Deployment',
    metadata: { name, namespace: NS, labels },
    spec: {
      selector: { matchLabels: labels },
      ...spec,
      template: {
        metadata: { labels },
        spec: { ...pod, containers: [{ name: 'agent', image: 'ghcr.io/x/a:1', ...container }] },
      },
    },
  };
}

/** Stores `change(current)` as the administrator: what the real server would have kept of our write. */
async function storedAs(name: string, change: (d: Json) => void): Promise<void> {
  const cur = (await apps.readNamespacedDeployment({ name, namespace: NS })) as Json;
  change(cur);
  await apps.replaceNamespacedDeployment({ name, namespace: NS, body: cur as V1Deployment });
}

describe('apply() converges on what the server stores', () => {
  it('quantities compare by value', () => {
    expect(quantityValue('1Gi')).toBe(quantityValue('1024Mi'));
    expect(quantityValue('500m')).toBe(0.5);
    expect(quantityValue('1e3')).toBe(1000);
    expect(quantityValue('2')).toBe(2);
    expect(quantityValue('ghcr.io/x')).toBeUndefined();
  });

  it('sends no write when the server canonicalised quantities and dropped an empty nodeSelector', async () => {
    const desired = deployment(
      'canon',
      { replicas: 1 },
      { nodeSelector: {} },
      { resources: { requests: { memory: '1024Mi', cpu: '0.5' }, limits: { memory: '2048Mi' } } },
    );
    expect((await apply(ops, desired)).wrote).toBe(true);
    await storedAs('canon', (d) => {
      delete d.spec.template.spec.nodeSelector;
      d.spec.template.spec.containers[0].resources = {
        requests: { memory: '1Gi', cpu: '500m' },
        limits: { memory: '2Gi' },
      };
    });
    expect((await apply(ops, desired)).wrote).toBe(false);
    // A real change is still written.
    const bigger = deployment('canon', { replicas: 1 }, {}, { resources: { requests: { memory: '2Gi', cpu: '0.5' } } });
    expect((await apply(ops, bigger)).wrote).toBe(true);
  });

  it('keeps the replica count when an autoscaler takes it over (no drop to 1)', async () => {
    await apply(ops, deployment('scaled', { replicas: 3 }));
    // Now autoscaled: our builder leaves replicas to the HorizontalPodAutoscaler.
    await apply(ops, deployment('scaled', {}, {}, { image: 'ghcr.io/x/a:2' }), { retain: [['spec', 'replicas']] });
    const d = await apps.readNamespacedDeployment({ name: 'scaled', namespace: NS });
    expect(d.spec?.template.spec?.containers[0]?.image).toBe('ghcr.io/x/a:2');
    expect(d.spec?.replicas).toBe(3);
  });

  it('never takes over a replica count the server defaulted (an autoscaled Deployment created without one)', async () => {
    await apply(ops, deployment('defaulted', {}));
    expect((await apps.readNamespacedDeployment({ name: 'defaulted', namespace: NS })).spec?.replicas).toBe(1);
    const before = cluster.api.writes.length;
    await apply(ops, deployment('defaulted', {}, {}, { image: 'ghcr.io/x/a:2' }), { retain: [['spec', 'replicas']] });
    const sent = cluster.api.writes.slice(before).filter((w) => w.path.endsWith('/deployments/defaulted'));
    expect(sent.length).toBe(1);
    expect((sent[0]!.body as { spec?: { replicas?: number } }).spec?.replicas).toBeUndefined();
    const d = await apps.readNamespacedDeployment({ name: 'defaulted', namespace: NS });
    expect(d.spec?.template.spec?.containers[0]?.image).toBe('ghcr.io/x/a:2');
    expect(JSON.stringify(d.metadata?.managedFields ?? [])).not.toContain('f:replicas');
  });

  it('a new Postgres storage size leaves the StatefulSet alone instead of failing every reconcile', async () => {
    const name = 'ag-7a1c2a9e-3b4d-4c5e-8f70-1a2b3c4d5e6f';
    await cluster.kubeConfig
      .makeApiClient((await import('@kubernetes/client-node')).CustomObjectsApi)
      .createNamespacedCustomObject({
        group: 'agentplane.dev',
        version: 'v1alpha1',
        namespace: NS,
        plural: 'agentdeployments',
        body: {
          apiVersion: 'agentplane.dev/v1alpha1',
          kind: 'AgentDeployment',
          metadata: { name, labels: { 'agentplane.dev/tenant': 'team-a' } },
          spec: {
            deploymentId: '7a1c2a9e-3b4d-4c5e-8f70-1a2b3c4d5e6f',
            tenantId: 'team-a',
            displayName: 'pg-bot',
            source: 'external_docker',
            sourceConfig: { deploymentType: 'dev' },
            sourceRevisionConfig: { imageUri: 'ghcr.io/x/a:1' },
            revisionCounter: 1,
            targetRevisionName: `${name}-r1`,
          },
        },
      });
    const reconcileWith = async (storage: string) => {
      const config = parseOperatorConfig(
        [
          ...operatorTestFlags(cluster, NS),
          '--log-level',
          'silent',
          '--health-port',
          'off',
          '--postgres-storage',
          storage,
        ],
        {},
      )!;
      const kubeConfig = cluster.as('agentplane-operator').kubeConfig;
      const store = openKubernetesPlatformState({ kubeConfig, namespace: NS, logger });
      const runtime = new KubernetesRuntime({
        kubeConfig,
        namespace: NS,
        config: config.runtime,
        logs: storeLogSink(store),
        logger,
      });
      await runtime.start();
      try {
        const deps = { store, runtime, logger };
        // Two passes: the revision is made, then built (a prebuilt image), then deployed.
        for (let pass = 0; pass < 2; pass++) {
          await createDeploymentReconciler(deps)(`${NS}/${name}`);
          await until('the revision', () => cluster.api.peek('agentplane.dev', 'agentrevisions', NS, `${name}-r1`));
          await createRevisionReconciler(deps)(`${NS}/${name}-r1`);
        }
      } finally {
        await runtime.shutdown();
        await store.close();
      }
    };
    await reconcileWith('1Gi');
    const sts = await until('the StatefulSet', () => cluster.api.peek('apps', 'statefulsets', NS, `${name}-postgres`));
    expect(sts.spec.volumeClaimTemplates[0].spec.resources.requests.storage).toBe('1Gi');
    const denied = cluster.api.denied.length;
    await reconcileWith('5Gi');
    const after = cluster.api.peek('apps', 'statefulsets', NS, `${name}-postgres`)!;
    expect(after.spec.volumeClaimTemplates[0].spec.resources.requests.storage).toBe('1Gi');
    // The revision did not fail on a 422: the Deployment went on to roll out.
    const rev = cluster.api.peek('agentplane.dev', 'agentrevisions', NS, `${name}-r1`)!;
    expect(rev.status?.phase).not.toMatch(/FAILED/);
    expect(cluster.api.denied.length).toBe(denied);
  }, 60_000);
});

describe('server-side apply as agentplane-operator', () => {
  /** Someone else's server-side apply (a platform team's `kubectl apply --server-side`, a webhook's controller). */
  const theirs = (body: Json, force = false) =>
    KubernetesObjectApi.makeApiClient(cluster.kubeConfig).patch(
      { apiVersion: 'apps/v1', kind: 'Deployment', ...body },
      undefined,
      undefined,
      'platform-team',
      force,
      PatchStrategy.ServerSideApply,
    );
  const read = async (name: string) => (await apps.readNamespacedDeployment({ name, namespace: NS })) as Json;
  const managers = (d: Json) => (d.metadata.managedFields as Json[]).map((m) => `${m.manager}/${m.operation}`).sort();

  it('removes what it stops applying and keeps what another manager applied, a sidecar included, without a write per reconcile', async () => {
    const name = 'shared';
    const first = deployment(name, { replicas: 2 }, { nodeSelector: { pool: 'agents' } });
    first.metadata!.labels = { ...first.metadata!.labels, team: 'support' };
    expect((await apply(ops, first)).wrote).toBe(true);
    await theirs({
      metadata: { name, namespace: NS, annotations: { 'example.com/owner': 'platform' } },
      spec: { template: { spec: { containers: [{ name: 'proxy', image: 'ghcr.io/x/proxy:1' }] } } },
    });
    expect(managers(await read(name))).toEqual(['agentplane-operator/Apply', 'platform-team/Apply']);
    // Their additions are no difference: no write.
    expect((await apply(ops, first)).wrote).toBe(false);
    // The next revision sets neither the node selector nor the label.
    const second = deployment(name, { replicas: 2 });
    expect((await apply(ops, second)).wrote).toBe(true);
    const d = await read(name);
    expect(d.spec.template.spec.nodeSelector).toBeUndefined();
    expect(d.metadata.labels.team).toBeUndefined();
    expect(d.metadata.annotations['example.com/owner']).toBe('platform');
    expect(d.spec.template.spec.containers.map((c: Json) => c.name)).toEqual(['agent', 'proxy']);
    expect((await apply(ops, second)).wrote).toBe(false);
  });

  it('a field it changed by update outlives its later applies (the Update entry owns it), as on the real server', async () => {
    const name = 'updated-then-applied';
    const withMark = deployment(name, { replicas: 1 });
    withMark.metadata!.annotations = { 'agentplane.dev/wake-at': 't1' };
    await apply(ops, withMark);
    // A compare-and-swap update by the same manager (how a sleep is recorded) changes the applied annotation.
    const cur = await read(name);
    cur.metadata.annotations['agentplane.dev/wake-at'] = 't2';
    await ops.replace(NS, name, cur as V1Deployment);
    expect(managers(await read(name))).toEqual(['agentplane-operator/Apply', 'agentplane-operator/Update']);
    // The next apply leaves the annotation out, but the update took it over: the server keeps it. Only another
    // update removes it (idle.ts clearStaleSleepRecord).
    expect((await apply(ops, deployment(name, { replicas: 2 }))).wrote).toBe(true);
    const after = await read(name);
    expect(after.spec.replicas).toBe(2);
    expect(after.metadata.annotations['agentplane.dev/wake-at']).toBe('t2');
  });

  it('keeps its fields: another manager is refused them without force, and a forced change is taken back', async () => {
    const name = 'contested';
    const mine = deployment(name, { replicas: 1 });
    await apply(ops, mine);
    const evil = {
      metadata: { name, namespace: NS },
      spec: { template: { spec: { containers: [{ name: 'agent', image: 'ghcr.io/evil/a:1' }] } } },
    };
    const refused = await theirs(evil).catch((err: unknown) => err as ApiException<string>);
    expect(refused).toBeInstanceOf(ApiException);
    expect((refused as ApiException<string>).code).toBe(409);
    expect(JSON.parse((refused as ApiException<string>).body).message).toMatch(
      /Apply failed with 1 conflict: conflict with "agentplane-operator": \.spec\.template\.spec\.containers\[name="agent"\]\.image/,
    );
    await theirs(evil, true);
    expect((await read(name)).spec.template.spec.containers[0].image).toBe('ghcr.io/evil/a:1');
    // The operator's next reconcile (forced, see applyOptions) puts its image back.
    expect((await apply(ops, mine)).wrote).toBe(true);
    expect((await read(name)).spec.template.spec.containers[0].image).toBe('ghcr.io/x/a:1');
  });

  it('takes over an object an earlier version wrote whole, removing what that version set and this one does not', async () => {
    const name = 'upgraded';
    // As the operator before server-side apply left it: created by a plain create, the paths it set recorded.
    const old = deployment(name, { replicas: 1 }, { nodeSelector: { pool: 'agents' } });
    old.metadata!.annotations = {
      'agentplane.dev/owned-fields': JSON.stringify({
        metadata: { labels: { app: 1 }, annotations: {} },
        spec: { selector: 1, replicas: 1, template: { metadata: 1, spec: { nodeSelector: 1, containers: 1 } } },
      }),
    };
    await apps.createNamespacedDeployment({ namespace: NS, body: old });
    expect((await apply(ops, deployment(name, { replicas: 1 }))).wrote).toBe(true);
    const d = await read(name);
    expect(d.metadata.annotations['agentplane.dev/owned-fields']).toBeUndefined();
    expect(d.spec.template.spec.nodeSelector).toBeUndefined();
    expect(managers(d)).toEqual(['agentplane-operator/Apply']);
  });
});

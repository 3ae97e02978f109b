// What the operator's resyncs cost the API server at steady state: N converged deployments (a prebuilt image,
// rolled out), the operator running against the Kubernetes API double with resyncs every --resync-ms instead of a
// minute, and its API requests (agentplane_operator_api_requests_total's observer) counted over --seconds.
// Reported per deployment per hour at the default one-minute resync.
//   node --import tsx bench/operator-resync.ts [--deployments 20] [--resync-ms 2000] [--seconds 60]
import { parseArgs } from 'node:util';
import { CustomObjectsApi, CoreV1Api } from '@kubernetes/client-node';
import { createLogger } from '../src/lib/logger.ts';
import { openKubernetesPlatformState } from '../src/state/kubernetes/index.ts';
import { createOperator } from '../src/operator/operator.ts';
import { parseOperatorConfig } from '../src/operator/config.ts';
import { KubernetesRuntime } from '../src/operator/runtimes/kubernetes/index.ts';
import { storeLogSink } from '../src/operator/sources.ts';
import { observeRequests } from '../src/operator/kube-requests.ts';
import { operatorTestFlags, startCluster, until } from '../test/support/kubernetes/cluster.ts';
import { FakeCluster } from '../test/support/kubernetes/kubelet.ts';

const { values: args } = parseArgs({
  options: {
    deployments: { type: 'string', default: '20' },
    'resync-ms': { type: 'string', default: '2000' },
    seconds: { type: 'string', default: '60' },
  },
});
const N = Number(args.deployments);
const RESYNC_MS = Number(args['resync-ms']);
const SECONDS = Number(args.seconds);
const NS = 'agents';
const logger = createLogger({ level: 'silent', name: 'bench' });

const counts = new Map<string, number>();
const total = () => [...counts.values()].reduce((a, b) => a + b, 0);

const cluster = await startCluster(NS);
try {
  const admin = cluster.kubeConfig;
  const core = admin.makeApiClient(CoreV1Api);
  const custom = admin.makeApiClient(CustomObjectsApi);
  await core.createNamespacedSecret({
    namespace: NS,
    body: { metadata: { name: 'db', labels: { 'agentplane.dev/tenant': 'team-a' } }, stringData: { uri: 'x' } },
  });
  const names: string[] = [];
  for (let i = 0; i < N; i++) {
    const id = `00000000-0000-4000-8000-${String(i).padStart(12, '0')}`;
    const name = `ag-${id}`;
    names.push(name);
    await custom.createNamespacedCustomObject({
      group: 'agentplane.dev',
      version: 'v1alpha1',
      namespace: NS,
      plural: 'agentdeployments',
      body: {
        apiVersion: 'agentplane.dev/v1alpha1',
        kind: 'AgentDeployment',
        metadata: { name, labels: { 'agentplane.dev/tenant': 'team-a' } },
        spec: {
          deploymentId: id,
          tenantId: 'team-a',
          displayName: `bench-${i}`,
          source: 'external_docker',
          sourceConfig: { deploymentType: 'prod', resourceSpec: { minScale: 1 } },
          sourceRevisionConfig: { imageUri: 'ghcr.io/agentplane/example-agent:0.1.0' },
          secretReferences: [{ name: 'DATABASE_URI', secretName: 'db', secretKey: 'uri' }],
          revisionCounter: 1,
          targetRevisionName: `${name}-r1`,
        },
      },
    });
  }

  const config = parseOperatorConfig([...operatorTestFlags(cluster, NS), '--log-level', 'silent'], {})!;
  const kubeConfig = observeRequests(admin, (verb, resource, code) => {
    const key = `${verb} ${resource} ${code}`;
    counts.set(key, (counts.get(key) ?? 0) + 1);
  });
  const store = openKubernetesPlatformState({ kubeConfig, namespace: NS, logger });
  const runtime = new KubernetesRuntime({
    kubeConfig,
    namespace: NS,
    config: config.runtime,
    logs: storeLogSink(store),
    logger,
  });
  const operator = createOperator({ store, runtime, logger, namespace: NS, resyncMs: RESYNC_MS });
  await runtime.start();
  await operator.start();
  const fake = new FakeCluster(admin, NS);
  const phase = (name: string) =>
    cluster.api.peek('agentplane.dev', 'agentrevisions', NS, `${name}-r1`)?.status?.phase as string | undefined;
  for (const name of names) {
    await until(`${name} DEPLOYING`, () => phase(name) === 'DEPLOYING', 60_000);
    await fake.rollout(name, 'ready');
  }
  for (const name of names) await until(`${name} DEPLOYED`, () => phase(name) === 'DEPLOYED', 60_000);
  // Settle: the deployments' own status (active revision, URL, Ready) follows the revisions'.
  await new Promise((r) => setTimeout(r, 3 * RESYNC_MS));

  const before = new Map(counts);
  const connectionsBefore = cluster.api.connections;
  const started = Date.now();
  await new Promise((r) => setTimeout(r, SECONDS * 1000));
  const elapsed = (Date.now() - started) / 1000;
  await operator.stop();
  await runtime.shutdown();
  await store.close();

  const delta = [...counts].map(([k, v]) => [k, v - (before.get(k) ?? 0)] as const).filter(([, v]) => v > 0);
  const sent = delta.reduce((a, [, v]) => a + v, 0);
  const resyncs = (elapsed * 1000) / RESYNC_MS;
  const perDeploymentResync = sent / N / resyncs;
  console.log(`deployments ${N}, resync every ${RESYNC_MS} ms, ${elapsed.toFixed(0)} s: ${sent} requests`);
  console.log(`per deployment per resync: ${perDeploymentResync.toFixed(2)}`);
  console.log(`per deployment per hour at a 60 s resync: ${(perDeploymentResync * 60).toFixed(0)}`);
  for (const [k, v] of delta.sort((a, b) => b[1] - a[1]))
    console.log(`  ${k.padEnd(48)} ${(v / N / resyncs).toFixed(2)} per deployment per resync`);
  console.log(`(startup and rollout before the window: ${total() - sent} requests)`);
  // Each one a TCP connection and a TLS handshake; watches hold one each.
  console.log(
    `connections the API server accepted: ${connectionsBefore} in startup and rollout (every client of the run), ` +
      `${cluster.api.connections - connectionsBefore} in the window`,
  );
} finally {
  await cluster.close();
}

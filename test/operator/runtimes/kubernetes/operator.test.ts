// The operator against the API-server double, through @kubernetes/client-node only: AgentDeployments applied
// like `kubectl apply`, the test playing the Job and Deployment controllers.
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import {
  BatchV1Api,
  CoreV1Api,
  CustomObjectsApi,
  EventsV1Api,
  PatchStrategy,
  setHeaderOptions,
} from '@kubernetes/client-node';
import { parse } from 'yaml';
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import { createLogger } from '../../../../src/lib/logger.ts';
import { openKubernetesPlatformState } from '../../../../src/state/kubernetes/index.ts';
import { parseOperatorConfig } from '../../../../src/operator/config.ts';
import { startKubernetesOperator, type RunningOperator } from '../../../../src/operator/kubernetes.ts';
import { createOperator } from '../../../../src/operator/operator.ts';
import { KubernetesRuntime } from '../../../../src/operator/runtimes/kubernetes/index.ts';
import { createDeploymentReconciler } from '../../../../src/operator/controllers/agentdeployment/controller.ts';
import { createRevisionReconciler } from '../../../../src/operator/controllers/agentrevision/controller.ts';
import { storeLogSink } from '../../../../src/operator/sources.ts';
import { buildJobName } from '../../../../src/operator/runtimes/kubernetes/build-job.ts';
import { postgresName } from '../../../../src/operator/runtimes/kubernetes/postgres.ts';
import type { Target } from '../../../../src/operator/runtimes/kubernetes/labels.ts';
import { operatorTestFlags, startCluster, until, type TestCluster } from '../../../support/kubernetes/cluster.ts';
import { FakeCluster } from '../../../support/kubernetes/kubelet.ts';
import { kubectl } from '../../../support/helm/index.ts';

const NS = 'agents';
// The operator and the control plane act as the chart's ServiceAccounts; the test itself is the administrator.
const OPERATOR = 'agentplane-operator';
const CONTROL_PLANE = 'agentplane-control-plane';
const logger = createLogger({ level: (process.env.TEST_LOG as 'warn') ?? 'silent', name: 'test' });
const examples = join(import.meta.dirname, '../../../../examples/k8s');
const digest = `sha256:${'d'.repeat(64)}`;
type Json = Record<string, any>;

let cluster: TestCluster;
let fake: FakeCluster;
let custom: CustomObjectsApi;
let core: CoreV1Api;

const peek = (group: string, plural: string, name: string): Json | undefined =>
  cluster.api.peek(group, plural, NS, name);
const revision = (name: string) => peek('agentplane.dev', 'agentrevisions', name);
const phaseOf = (name: string) => revision(name)?.status?.phase as string | undefined;
const writes = (from: number) => cluster.api.requests.slice(from).filter((r) => !r.startsWith('GET '));

function config(extra: string[] = []) {
  return parseOperatorConfig(
    [
      ...operatorTestFlags(cluster, NS, OPERATOR),
      '--allowed-custom-domains',
      'agents.example.com',
      '--log-level',
      'silent',
      '--health-port',
      '0',
      ...extra,
    ],
    {},
  )!;
}

function example(file: string): Json {
  return parse(readFileSync(join(examples, file), 'utf8')) as Json;
}

/** examples/k8s/agentdeployment.yaml as deployment `id` (named ag-<id>) at its first revision. */
function exampleDeployment(id: string): Json {
  const manifest = example('agentdeployment.yaml');
  manifest.metadata.name = `ag-${id}`;
  manifest.spec.deploymentId = id;
  manifest.spec.targetRevisionName = `ag-${id}-r1`;
  return manifest;
}

async function applyDeployment(body: Json): Promise<void> {
  await custom.createNamespacedCustomObject({
    group: 'agentplane.dev',
    version: 'v1alpha1',
    namespace: NS,
    plural: 'agentdeployments',
    body,
  });
}

/** Like `kubectl edit`: read, change spec, replace; the operator writes too, so retry on conflict. */
async function patchDeployment(name: string, spec: Json): Promise<void> {
  for (let attempt = 0; ; attempt++) {
    const cur = (await custom.getNamespacedCustomObject({
      group: 'agentplane.dev',
      version: 'v1alpha1',
      namespace: NS,
      plural: 'agentdeployments',
      name,
    })) as Json;
    try {
      await custom.replaceNamespacedCustomObject({
        group: 'agentplane.dev',
        version: 'v1alpha1',
        namespace: NS,
        plural: 'agentdeployments',
        name,
        body: { ...cur, spec: { ...cur.spec, ...spec } },
      });
      return;
    } catch (err) {
      if ((err as { code?: number }).code !== 409 || attempt > 5) throw err;
    }
  }
}

/** Reconciles a deployment and its revisions twice with a fresh runtime; returns the writes of the second pass. */
async function secondPassWrites(name: string, revisions: string[]): Promise<string[]> {
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
    const deps = { store, runtime, logger };
    const reconcileDeployment = createDeploymentReconciler(deps);
    const reconcileRevision = createRevisionReconciler(deps);
    const pass = async () => {
      await reconcileDeployment(`${NS}/${name}`);
      for (const r of revisions) await reconcileRevision(`${NS}/${r}`);
    };
    await pass();
    const before = cluster.api.requests.length;
    await pass();
    // Not even a read: the children come from the runtime's watch-fed caches.
    const seen = cluster.api.requests.slice(before);
    expect(
      seen.filter((r) =>
        / \/apis\/(apps|networking\.k8s\.io)\/v1\/namespaces\/|\/api\/v1\/namespaces\/[^/]+\/(services|secrets)\//.test(
          r,
        ),
      ),
    ).toEqual([]);
    return writes(before);
  } finally {
    await runtime.shutdown();
    await store.close();
  }
}

beforeAll(async () => {
  // TLS: kubectl sends its token only over https.
  cluster = await startCluster(NS, { rbac: true, tls: true });
  cluster.installChartRbac();
  fake = new FakeCluster(cluster.kubeConfig, NS);
  custom = cluster.kubeConfig.makeApiClient(CustomObjectsApi);
  core = cluster.kubeConfig.makeApiClient(CoreV1Api);
  // The Secrets examples/k8s/agentdeployment.yaml references, labelled for its tenant by the admin.
  for (const [name, key] of [
    ['support-bot-db', 'uri'],
    ['support-bot-config', 'greeting'],
  ]) {
    await core.createNamespacedSecret({
      namespace: NS,
      body: { metadata: { name, labels: { 'agentplane.dev/tenant': 'team-a' } }, stringData: { [key!]: 'x' } },
    });
  }
});
afterEach(() => {
  // Anything the chart does not grant fails here, naming the verb, resource and subresource.
  expect([...new Set(cluster.api.denied)]).toEqual([]);
});
afterAll(async () => {
  if (process.env.DUMP_USED)
    (await import('node:fs')).writeFileSync(
      process.env.DUMP_USED,
      JSON.stringify(Object.fromEntries([...cluster.api.used].map(([k, v]) => [k, [...v].sort()])), null, 1),
    );
  await cluster?.close();
});

describe('prebuilt image (examples/k8s/agentdeployment.yaml)', () => {
  let op: RunningOperator;
  const manifest = example('agentdeployment.yaml');
  const name = manifest.metadata.name as string;
  const r1 = `${name}-r1`;

  beforeAll(() => {
    op = startKubernetesOperator(config(), logger);
  });
  afterAll(async () => {
    await op?.close();
  });

  it('rolls out a Deployment with the image, external database, Service; DEPLOYED once available', async () => {
    // The documented flow with the real kubectl: apply, then wait for Ready while the cluster rolls out.
    const kubeconfig = cluster.kubeconfigPath;
    expect(await kubectl(['-n', NS, 'apply', '-f', join(examples, 'agentdeployment.yaml')], kubeconfig)).toContain(
      `agentdeployment.agentplane.dev/${name} created`,
    );
    const waited = kubectl(
      ['-n', NS, 'wait', '--for=condition=Ready', `agentdeployment/${name}`, '--timeout=60s'],
      kubeconfig,
    );
    await until('DEPLOYING', () => phaseOf(r1) === 'DEPLOYING');
    const d = peek('apps', 'deployments', name)!;
    const dep = peek('agentplane.dev', 'agentdeployments', name)!;
    expect(d.metadata.ownerReferences[0]).toMatchObject({
      kind: 'AgentDeployment',
      uid: dep.metadata.uid,
      controller: true,
    });
    const c = d.spec.template.spec.containers[0];
    expect(c.image).toBe('ghcr.io/agentplane/example-agent:0.1.0');
    expect(d.spec.replicas).toBe(2);
    expect(c.env.filter((e: Json) => e.name === 'DATABASE_URI')).toEqual([
      { name: 'DATABASE_URI', valueFrom: { secretKeyRef: { name: 'support-bot-db', key: 'uri' } } },
    ]);
    expect(peek('apps', 'statefulsets', `${name}-postgres`)).toBeUndefined(); // external Postgres respected
    expect(peek('', 'services', name)!.spec.selector).toEqual(d.spec.selector.matchLabels);
    expect(peek('networking.k8s.io', 'ingresses', name)).toBeUndefined(); // no custom_url, no base domain

    await fake.rollout(name, 'ready');
    await until('DEPLOYED', () => phaseOf(r1) === 'DEPLOYED');
    const ready = await until('Ready condition', () =>
      peek('agentplane.dev', 'agentdeployments', name)?.status?.conditions?.find(
        (x: Json) => x.type === 'Ready' && x.status === 'True',
      ),
    );
    expect(ready.observedGeneration).toBe(dep.metadata.generation);
    expect(await waited).toContain(`agentdeployment.agentplane.dev/${name} condition met`);
    // The probes the chart points at.
    const port = await op.health;
    for (const path of ['/healthz', '/readyz'])
      expect((await fetch(`http://127.0.0.1:${port}${path}`)).status, path).toBe(200);
    // Prometheus metrics on the same port: what a ServiceMonitor scrapes.
    const metrics = await (await fetch(`http://127.0.0.1:${port}/metrics`)).text();
    const sample = (re: RegExp) => Number(re.exec(metrics)?.[1] ?? NaN);
    expect(
      sample(/^agentplane_operator_reconciles_total\{controller="agentdeployment",result="success"\} (\d+)$/m),
    ).toBeGreaterThan(0);
    expect(
      sample(/^agentplane_operator_reconcile_duration_seconds_count\{controller="agentrevision"\} (\d+)$/m),
    ).toBeGreaterThan(0);
    expect(metrics).toMatch(/^agentplane_operator_queue_depth\{controller="agentdeployment"\} \d+$/m);
    // Every API request the operator sent, by verb, resource and code: the revision's status writes and the
    // informers' lists among them.
    expect(
      sample(
        /^agentplane_operator_api_requests_total\{verb="update",resource="agentrevisions\/status",code="200"\} (\d+)$/m,
      ),
    ).toBeGreaterThan(0);
    expect(
      sample(/^agentplane_operator_api_requests_total\{verb="list",resource="replicasets",code="200"\} (\d+)$/m),
    ).toBeGreaterThan(0);
    const status = peek('agentplane.dev', 'agentdeployments', name)!.status;
    expect(status.activeRevisionName).toBe(r1);
    expect(status.url).toBe(`http://${name}.${NS}.svc`);
  });

  it('internal_docker: SKIPPED until an image is pushed, then the pushed image rolls out like a prebuilt one', async () => {
    // What the control plane writes for `langgraph deploy` with a local build: first no image, then a PATCH naming
    // the digest pushed to the deployment's own repository (registry.test/agents is the operator's --registry).
    const id = '0a1b2c3d-4e5f-4a6b-8c7d-9e0f1a2b3c4d';
    const pushed = `ag-${id}`;
    await applyDeployment({
      ...manifest,
      metadata: { name: pushed, labels: manifest.metadata.labels },
      spec: {
        ...manifest.spec,
        deploymentId: id,
        displayName: 'pushed-bot',
        source: 'internal_docker',
        sourceRevisionConfig: { imageUri: null },
        targetRevisionName: `${pushed}-r1`,
      },
    });
    await until('r1 SKIPPED', () => phaseOf(`${pushed}-r1`) === 'SKIPPED');
    expect(JSON.stringify(revision(`${pushed}-r1`)!.status)).toContain('no image pushed yet');
    expect(peek('apps', 'deployments', pushed)).toBeUndefined();
    const image = `registry.test/agents/${pushed}@${digest}`;
    await patchDeployment(pushed, {
      sourceRevisionConfig: { imageUri: image },
      revisionCounter: 2,
      targetRevisionName: `${pushed}-r2`,
    });
    await until('DEPLOYING', () => phaseOf(`${pushed}-r2`) === 'DEPLOYING');
    expect(peek('apps', 'deployments', pushed)!.spec.template.spec.containers[0].image).toBe(image);
    // Nothing to build: no Job.
    expect(cluster.api.peek('batch', 'jobs', NS, buildJobName(`${pushed}-r2`))).toBeUndefined();
    await fake.rollout(pushed, 'ready');
    await until('DEPLOYED', () => phaseOf(`${pushed}-r2`) === 'DEPLOYED');
    await custom.deleteNamespacedCustomObject({
      group: 'agentplane.dev',
      version: 'v1alpha1',
      namespace: NS,
      plural: 'agentdeployments',
      name: pushed,
    });
  });

  it('resyncs a converged deployment with one reconcile of its revision and no reads of children it has not', async () => {
    await op.close(); // only the operator below acts
    const kubeConfig = cluster.as(OPERATOR).kubeConfig;
    const store = openKubernetesPlatformState({ kubeConfig, namespace: NS, logger });
    const runtime = new KubernetesRuntime({
      kubeConfig,
      namespace: NS,
      config: config().runtime,
      logs: storeLogSink(store),
      logger,
    });
    const reconciles = { agentdeployment: 0, agentrevision: 0 };
    const operator = createOperator({
      store,
      runtime,
      logger,
      namespace: NS,
      resyncMs: 150,
      metrics: {
        reconciled: (controller) => reconciles[controller as keyof typeof reconciles]++,
        watchQueue: () => {},
      },
    });
    await runtime.start();
    await operator.start();
    const from = cluster.api.requests.length;
    try {
      await until('a dozen resyncs', () => reconciles.agentdeployment >= 12);
    } finally {
      await operator.stop();
      await runtime.shutdown();
      await store.close();
    }
    // One deployment, one revision (plus the other describe blocks' deployments, resynced alike): the deployment's
    // resync no longer queues its revisions too, which doubled every revision's reconcile (and its reads).
    expect(reconciles.agentrevision).toBeLessThanOrEqual(reconciles.agentdeployment + 2);
    // No Ingress or autoscaler: looked for once, then known absent.
    const lookups = cluster.api.requests
      .slice(from)
      .filter((r) => r === `GET /apis/networking.k8s.io/v1/namespaces/${NS}/ingresses/${name}`);
    expect(lookups.length).toBeLessThanOrEqual(1);
    op = startKubernetesOperator(config(), logger);
  });

  it('sends no write when reconciling a converged deployment again', async () => {
    await op.close(); // nothing else may write meanwhile
    expect(await secondPassWrites(name, [r1])).toEqual([]);
  });

  it('never writes onto a Deployment being deleted, and recreates it once it is gone', async () => {
    const before = peek('apps', 'deployments', name)!;
    const release = cluster.api.holdGarbageCollection();
    // kubectl delete --cascade=foreground: the Deployment waits, with a deletionTimestamp, for its ReplicaSets.
    const apps = cluster.kubeConfig.makeApiClient((await import('@kubernetes/client-node')).AppsV1Api);
    // Someone changed it too, so the operator has something it would want to write back.
    const cur = await apps.readNamespacedDeployment({ name, namespace: NS });
    await apps.replaceNamespacedDeployment({
      name,
      namespace: NS,
      body: { ...cur, spec: { ...cur.spec!, replicas: 5 } },
    });
    await apps.deleteNamespacedDeployment({ name, namespace: NS, propagationPolicy: 'Foreground' });
    expect(peek('apps', 'deployments', name)!.metadata.deletionTimestamp).toBeTruthy();
    const seen = cluster.api.requests.length;
    op = startKubernetesOperator(config(), logger);
    // The operator finds it (in its cache) being deleted, fails the reconcile and retries, but sends it nothing.
    const port = await op.health;
    await until('two failed reconciles of the revision', async () => {
      const text = await (await fetch(`http://127.0.0.1:${port}/metrics`)).text();
      const failed = /agentplane_operator_reconcile_errors_total\{controller="agentrevision"\} (\d+)/.exec(text);
      return failed && Number(failed[1]) >= 2;
    });
    expect(writes(seen).filter((r) => r.includes(`/deployments/${name}`))).toEqual([]);
    release();
    const recreated = await until(
      'a new Deployment',
      () => {
        const d = peek('apps', 'deployments', name);
        return d && d.metadata.uid !== before.metadata.uid ? d : undefined;
      },
      30_000,
    );
    expect(recreated.metadata.deletionTimestamp).toBeUndefined();
    expect(recreated.spec.template.spec.containers[0].image).toBe('ghcr.io/agentplane/example-agent:0.1.0');
  });

  it('says an imageUri edit without a revisionCounter bump (Argo CD, Flux) did not roll out; with the bump, kubectl wait waits for it', async () => {
    const kubeconfig = cluster.kubeconfigPath;
    const conditions = () =>
      Object.fromEntries(
        ((peek('agentplane.dev', 'agentdeployments', name)?.status?.conditions ?? []) as Json[]).map((c) => [
          c.type,
          c,
        ]),
      );
    await fake.rollout(name, 'ready');
    await until('Ready', () => conditions().Ready?.status === 'True');
    const next = 'ghcr.io/agentplane/example-agent:0.2.0';
    await patchDeployment(name, { sourceRevisionConfig: { imageUri: next } });
    const generation = peek('agentplane.dev', 'agentdeployments', name)!.metadata.generation;
    await until('Ready=False SpecChangeIgnored', () => conditions().Ready?.reason === 'SpecChangeIgnored');
    expect(conditions().Ready).toMatchObject({
      status: 'False',
      observedGeneration: generation,
      message: expect.stringMatching(/imageUri.*revisionCounter is still 1.*targetRevisionName to .*-r2/),
    });
    expect(conditions().Degraded).toMatchObject({ status: 'True', reason: 'SpecChangeIgnored' });
    expect(conditions().Serving).toMatchObject({ status: 'True' }); // the old version still serves
    expect(peek('apps', 'deployments', name)!.spec.template.spec.containers[0].image).not.toBe(next);
    await expect(
      kubectl(['-n', NS, 'wait', '--for=condition=Ready', `agentdeployment/${name}`, '--timeout=2s'], kubeconfig),
    ).rejects.toThrow(/timed out/);

    // The same edit with the counter: a new revision rolls out, and kubectl wait returns only once it serves.
    await patchDeployment(name, { revisionCounter: 2, targetRevisionName: `${name}-r2` });
    let returned = false;
    const waited = kubectl(
      ['-n', NS, 'wait', '--for=condition=Ready', `agentdeployment/${name}`, '--timeout=60s'],
      kubeconfig,
    ).finally(() => (returned = true));
    await until('the new image rolled out', () =>
      peek('apps', 'deployments', name)?.spec.template.spec.containers[0].image === next ? true : undefined,
    );
    const progressing = await until('Ready=Unknown while r2 starts', () =>
      conditions().Ready?.status === 'Unknown' ? conditions() : undefined,
    );
    expect(progressing.Progressing).toMatchObject({ status: 'True' });
    expect(progressing.Degraded).toMatchObject({ status: 'False' });
    expect(returned).toBe(false);
    await fake.rollout(name, 'ready');
    expect(await waited).toContain('condition met');
    expect(peek('agentplane.dev', 'agentdeployments', name)!.status.activeRevisionName).toBe(`${name}-r2`);
    expect(conditions().Ready).toMatchObject({ status: 'True', reason: 'Serving' });
  });
});

describe('built from source (examples/k8s/agentdeployment-source.yaml)', () => {
  let op: RunningOperator;
  const manifest = example('agentdeployment-source.yaml');
  const name = manifest.metadata.name as string;
  const rev = (n: number) => `${name}-r${n}`;

  beforeAll(() => {
    op = startKubernetesOperator(config(), logger);
  });
  afterAll(async () => {
    await op?.close();
  });

  it('builds with a Job, deploys the pushed digest with its own Postgres and an Ingress', async () => {
    await applyDeployment(manifest);
    const job = await until('the build Job', () => peek('batch', 'jobs', `${rev(1)}-build`));
    expect(job.spec.template.spec.initContainers[0].env).toContainEqual({
      name: 'REPO_URL',
      value: 'https://github.com/agentplane/example-agent.git',
    });
    await until('BUILDING', () => phaseOf(rev(1)) === 'BUILDING');
    // Kubernetes deletes the finished Job (its pod and credential Secret with it) an hour after it ends.
    expect(job.spec.ttlSecondsAfterFinished).toBe(3600);
    expect(
      peek('networking.k8s.io', 'networkpolicies', `${name}-build`)!.spec.podSelector.matchLabels[
        'app.kubernetes.io/component'
      ],
    ).toBe('build');

    await fake.finishJob(`${rev(1)}-build`, { ok: true, commit: 'a1b2c3d4e5f6a7b8', digest });
    await until('DEPLOYING', () => phaseOf(rev(1)) === 'DEPLOYING');
    const d = peek('apps', 'deployments', name)!;
    expect(d.spec.template.spec.containers[0].image).toBe(`registry.test/agents/${name}@${digest}`);
    expect(
      peek('apps', 'statefulsets', `${name}-postgres`)!.spec.volumeClaimTemplates[0].spec.resources.requests.storage,
    ).toBe('1Gi');
    expect(peek('', 'secrets', `${name}-postgres`)!.data.uri).toBeTruthy();
    expect(peek('networking.k8s.io', 'ingresses', name)!.spec.rules[0].host).toBe('example-agent.agents.example.com');
    expect(peek('batch', 'jobs', `${rev(1)}-build`)!.metadata.annotations['agentplane.dev/image']).toBe(
      `registry.test/agents/${name}@${digest}`,
    );
    expect(peek('autoscaling', 'horizontalpodautoscalers', name)!.spec).toMatchObject({
      minReplicas: 1,
      maxReplicas: 3,
    });
    // The server defaults replicas to 1 on read back; the operator's writes leave them to the HPA.
    const sent = cluster.api.writes.filter(
      (w) =>
        w.path.endsWith(`/deployments/${name}`) ||
        (w.path.endsWith('/deployments') && (w.body as Json).metadata?.name === name),
    );
    expect(sent.length).toBeGreaterThan(0);
    for (const w of sent) expect((w.body as Json).spec?.replicas).toBeUndefined();
    expect(d.spec.replicas).toBe(1);

    await fake.rollout(name, 'ready');
    await until('DEPLOYED', () => phaseOf(rev(1)) === 'DEPLOYED');
    expect(revision(rev(1))!.status.repoCommitSha).toBe('a1b2c3d4e5f6a7b8');
    expect(revision(rev(1))!.status.image).toBe(`registry.test/agents/${name}@${digest}`);
    await until(
      'the custom URL',
      () =>
        peek('agentplane.dev', 'agentdeployments', name)?.status?.url === 'https://example-agent.agents.example.com',
    );

    // Converged with Postgres, Ingress and build Job too: reconciling again writes nothing.
    await op.close();
    expect(await secondPassWrites(name, [rev(1)])).toEqual([]);
    op = startKubernetesOperator(config(), logger);
  });

  it('reports BUILD_FAILED with the reason in the revision and its build log; the live revision keeps serving', async () => {
    await patchDeployment(name, {
      revisionCounter: 2,
      targetRevisionName: rev(2),
      sourceRevisionConfig: { repoRef: 'no-such-branch', graphConfigPath: 'langgraph.json' },
    });
    await until('the second build Job', () => peek('batch', 'jobs', `${rev(2)}-build`));
    cluster.api.podLogs.set(`${NS}/${rev(2)}-build-abcde/clone`, "fatal: couldn't find remote ref no-such-branch\n");
    await fake.finishJob(`${rev(2)}-build`, {
      ok: false,
      container: 'clone',
      message: 'repo_ref "no-such-branch" is not a branch, tag or commit',
    });
    await until('BUILD_FAILED', () => phaseOf(rev(2)) === 'BUILD_FAILED');
    expect(revision(rev(2))!.status.statusMessage).toBe(
      'Build failed (BackoffLimitExceeded): clone: exit 1: repo_ref "no-such-branch" is not a branch, tag or commit',
    );
    const store = openKubernetesPlatformState({
      kubeConfig: cluster.as(CONTROL_PLANE).kubeConfig,
      namespace: NS,
      logger,
    });
    const page = await until('build log', async () => {
      const p = await store.readLogs(NS, rev(2), { type: 'build', limit: 100, order: 'asc' });
      return p.logs.length ? p : undefined;
    });
    await store.close();
    expect(page.logs.map((l) => l.message).join('\n')).toContain('is not a branch, tag or commit');
    expect(page.logs.map((l) => l.message)).toContain("[clone] fatal: couldn't find remote ref no-such-branch");
    expect(peek('apps', 'deployments', name)!.spec.template.metadata.labels['agentplane.dev/revision']).toBe(rev(1));
    expect(peek('agentplane.dev', 'agentdeployments', name)!.status.activeRevisionName).toBe(rev(1));
    // Knative's rule: the version the spec asks for failed, so Ready is False with the reason (kubectl wait does not
    // pass), Degraded says so too, while Serving says the old revision still takes traffic.
    const conds = await until('Ready=False BUILD_FAILED', () => {
      const dep = peek('agentplane.dev', 'agentdeployments', name)!;
      const c = Object.fromEntries((dep.status.conditions as Json[]).map((x) => [x.type, x]));
      return c.Ready?.reason === 'BUILD_FAILED' ? { c, generation: dep.metadata.generation } : undefined;
    });
    expect(conds.c.Ready).toMatchObject({
      status: 'False',
      observedGeneration: conds.generation,
      message: expect.stringContaining(`is not a branch, tag or commit Serving ${rev(1)} meanwhile.`),
    });
    expect(conds.c.Degraded).toMatchObject({ status: 'True', reason: 'BUILD_FAILED' });
    expect(conds.c.Progressing).toMatchObject({ status: 'False', reason: 'BUILD_FAILED' });
    expect(conds.c.Serving).toMatchObject({ status: 'True', reason: 'LatestRevisionFailed' });

    // kubectl describe tells the story: Events (events.k8s.io/v1, written under the chart's RBAC) on the revision
    // and on the deployment, the failure as a Warning with its reason.
    const events = cluster.kubeConfig.makeApiClient(EventsV1Api);
    const about = async (kind: string, obj: string) =>
      (await events.listNamespacedEvent({ namespace: NS })).items.filter(
        (e) => e.regarding?.kind === kind && e.regarding.name === obj,
      );
    const revEvents = await until('the BuildFailed Event on r2', async () => {
      const list = await about('AgentRevision', rev(2));
      return list.some((e) => e.reason === 'BuildFailed') ? list : undefined;
    });
    expect(revEvents.find((e) => e.reason === 'BuildFailed')).toMatchObject({
      type: 'Warning',
      action: 'Build',
      reportingController: 'agentplane-operator',
      note: expect.stringContaining('is not a branch, tag or commit'),
      regarding: { apiVersion: 'agentplane.dev/v1alpha1', uid: revision(rev(2))!.metadata.uid },
    });
    expect(revEvents.map((e) => e.reason)).toContain('Building');
    const depEvents = await until('the deployment Events', async () => {
      const list = await about('AgentDeployment', name);
      return list.some((e) => e.reason === 'BuildFailed') ? list : undefined;
    });
    expect(depEvents.find((e) => e.reason === 'BuildFailed')).toMatchObject({ type: 'Warning', action: 'Rollout' });
    expect(depEvents.find((e) => e.reason === 'TrafficMoved')).toMatchObject({
      type: 'Normal',
      note: `Serving revision ${rev(1)}.`,
    });
  });

  it('reports DEPLOY_FAILED for a crash-looping rollout and rolls back to the serving revision', async () => {
    await patchDeployment(name, {
      revisionCounter: 3,
      targetRevisionName: rev(3),
      sourceRevisionConfig: { repoRef: 'main', graphConfigPath: 'langgraph.json' },
    });
    await until('the third build Job', () => peek('batch', 'jobs', `${rev(3)}-build`));
    await fake.finishJob(`${rev(3)}-build`, {
      ok: true,
      commit: 'c0ffee00c0ffee00',
      digest: `sha256:${'e'.repeat(64)}`,
    });
    await until(
      'rollout to r3',
      () => peek('apps', 'deployments', name)?.spec.template.metadata.labels['agentplane.dev/revision'] === rev(3),
    );
    // The serving revision's build Job goes (a TTL, an admin's cleanup): its image is recorded on the revision, so
    // the rollback below needs neither the Job nor a rebuild.
    const batch = cluster.kubeConfig.makeApiClient(BatchV1Api);
    await batch.deleteNamespacedJob({ name: `${rev(1)}-build`, namespace: NS, propagationPolicy: 'Background' });
    await until('the r1 build Job gone', () => !peek('batch', 'jobs', `${rev(1)}-build`));
    expect(revision(rev(1))!.status.image).toBe(`registry.test/agents/${name}@${digest}`);
    await fake.rollout(name, 'crash');
    await until('DEPLOY_FAILED', () => phaseOf(rev(3)) === 'DEPLOY_FAILED');
    expect(revision(rev(3))!.status.statusMessage).toContain('CrashLoopBackOff');
    await until(
      'rollback to r1',
      () => peek('apps', 'deployments', name)?.spec.template.metadata.labels['agentplane.dev/revision'] === rev(1),
    );
    expect(peek('apps', 'deployments', name)!.spec.template.spec.containers[0].image).toBe(
      `registry.test/agents/${name}@${digest}`,
    );
    expect(peek('agentplane.dev', 'agentdeployments', name)!.status.activeRevisionName).toBe(rev(1));
  });

  it('says a serving revision whose pods all stop is not serving, with the reason, and heals by itself', async () => {
    const dep = () => peek('agentplane.dev', 'agentdeployments', name);
    const serving = dep()!.status.activeRevisionName as string;
    const ready = (obj: any) =>
      (obj?.status?.conditions as { type: string; status: string; reason: string }[] | undefined)?.find(
        (c) => c.type === 'Ready',
      );
    // The Deployment controller finishes the rollback: the serving revision is rolled out and Ready.
    await fake.rollout(name, 'ready');
    await until('the revision to be Ready', () => ready(revision(serving))?.status === 'True');
    await fake.podsDown(name, 'OOMKilled');
    await until('the revision to say OOMKilled', () => ready(revision(serving))?.reason === 'OOMKilled');
    expect(ready(revision(serving))).toMatchObject({
      status: 'False',
      message: expect.stringContaining('ran out of memory'),
    });
    expect(phaseOf(serving)).toBe('DEPLOYED'); // not failed: Kubernetes keeps restarting the pods
    // The deployment's Serving follows its revision (it may say "Unavailable" for a moment, between the ReplicaSet's
    // and the pods' updates): it ends up saying why. Ready keeps saying the revision asked for (r3) failed.
    const servingOf = (obj: any) => (obj?.status?.conditions as Json[] | undefined)?.find((c) => c.type === 'Serving');
    await until('the deployment to say it is not serving, and why', () => servingOf(dep())?.reason === 'OOMKilled');
    expect(servingOf(dep())).toMatchObject({ status: 'False', reason: 'OOMKilled' });
    expect(ready(dep())).toMatchObject({ status: 'False', reason: 'DEPLOY_FAILED' });
    await fake.rollout(name, 'ready');
    await until('the revision to serve again', () => ready(revision(serving))?.status === 'True');
    await until('the deployment to serve again', () => servingOf(dep())?.status === 'True');
  });

  it('marks a revision superseded while building SKIPPED and stops its build', async () => {
    await patchDeployment(name, {
      revisionCounter: 4,
      targetRevisionName: rev(4),
      sourceRevisionConfig: { repoRef: 'v4', graphConfigPath: 'langgraph.json' },
    });
    await until('the fourth build Job', () => peek('batch', 'jobs', `${rev(4)}-build`));
    await until('BUILDING r4', () => phaseOf(rev(4)) === 'BUILDING');
    await patchDeployment(name, {
      revisionCounter: 5,
      targetRevisionName: rev(5),
      sourceRevisionConfig: { repoRef: 'v5', graphConfigPath: 'langgraph.json' },
    });
    await until('SKIPPED r4', () => phaseOf(rev(4)) === 'SKIPPED');
    await until('the r4 build Job deleted', () => !peek('batch', 'jobs', `${rev(4)}-build`));
    await until('the r5 build Job', () => peek('batch', 'jobs', `${rev(5)}-build`));
    expect(peek('batch', 'jobs', `${rev(3)}-build`)).toBeDefined(); // finished builds stay (their log is copied from them)
  });

  it('keeps the end of a 3 MiB build log within the ConfigMap limit, and the revision still ends', async () => {
    await patchDeployment(name, {
      revisionCounter: 6,
      targetRevisionName: rev(6),
      sourceRevisionConfig: { repoRef: 'big-log', graphConfigPath: 'langgraph.json' },
    });
    await until('the sixth build Job', () => peek('batch', 'jobs', `${rev(6)}-build`));
    // 400 lines of 8 KiB, all within the lines the operator asks for: 3.2 MiB, over the 1 MiB a ConfigMap may hold.
    const log =
      Array.from({ length: 400 }, (_, i) => `step ${i} ${'x'.repeat(8 * 1024)}`).join('\n') +
      '\nnpm ERR! the real failure\n';
    expect(log.length).toBeGreaterThan(3 * 1024 * 1024);
    cluster.api.podLogs.set(`${NS}/${rev(6)}-build-abcde/build`, log);
    await fake.finishJob(`${rev(6)}-build`, { ok: false, container: 'build', message: 'npm ci failed' });
    await until('BUILD_FAILED', () => phaseOf(rev(6)) === 'BUILD_FAILED');
    const store = openKubernetesPlatformState({
      kubeConfig: cluster.as(CONTROL_PLANE).kubeConfig,
      namespace: NS,
      logger,
    });
    const page = await until('build log', async () => {
      const p = await store.readLogs(NS, rev(6), { type: 'build', limit: 1000, order: 'asc' });
      return p.logs.length ? p : undefined;
    });
    await store.close();
    const messages = page.logs.map((l) => l.message);
    expect(messages).toContain('[build] npm ERR! the real failure');
    expect(messages.some((m) => m.endsWith('… (line cut)'))).toBe(true);
    expect(messages.some((m) => /earlier line\(s\) left out/.test(m))).toBe(true);
    expect(Buffer.byteLength(messages.join('\n'))).toBeLessThan(1024 * 1024);
    expect(peek('batch', 'jobs', `${rev(6)}-build`)!.metadata.annotations['agentplane.dev/logs-collected']).toBe(
      'true',
    ); // copied once
  });

  it('deleting the AgentDeployment garbage-collects every child through owner references', async () => {
    await custom.deleteNamespacedCustomObject({
      group: 'agentplane.dev',
      version: 'v1alpha1',
      namespace: NS,
      plural: 'agentdeployments',
      name,
    });
    await until('the deployment gone', () => !peek('agentplane.dev', 'agentdeployments', name));
    // The garbage collector removes dependents after their owner, not with it.
    const children = [
      ['apps', 'deployments', name],
      ['apps', 'statefulsets', `${name}-postgres`],
      ['', 'services', name],
      ['', 'secrets', `${name}-postgres`],
      ['networking.k8s.io', 'ingresses', name],
      ['autoscaling', 'horizontalpodautoscalers', name],
      ['batch', 'jobs', `${rev(1)}-build`],
      ['networking.k8s.io', 'networkpolicies', `${name}-build`],
      ['networking.k8s.io', 'networkpolicies', `${name}-agent`],
      ['agentplane.dev', 'agentrevisions', rev(3)],
    ] as const;
    await until('every child collected', () => children.every(([group, plural, child]) => !peek(group, plural, child)));
    for (const [group, plural, child] of children)
      expect(peek(group, plural, child), `${plural}/${child}`).toBeUndefined();
  });
});

describe('a deployment with its own Postgres (ordering)', () => {
  let op: RunningOperator;
  beforeAll(() => {
    op = startKubernetesOperator(config(), logger);
  });
  afterAll(async () => {
    await op?.close();
  });

  it('waits for its database: an init container, a crash loop while Postgres starts is not fatal, DEPLOYED once it answers', async () => {
    const id = '2b3c4d5e-6f70-4a81-9b2c-3d4e5f6a7b8c';
    const name = `ag-${id}`;
    const manifest = exampleDeployment(id);
    manifest.spec.secretReferences = [];
    await applyDeployment(manifest);
    await until('DEPLOYING', () => phaseOf(`${name}-r1`) === 'DEPLOYING');
    const pod = peek('apps', 'deployments', name)!.spec.template.spec;
    expect(pod.initContainers).toEqual([
      expect.objectContaining({
        name: 'wait-for-postgres',
        image: 'postgres:16-alpine',
        env: [{ name: 'PGHOST', value: `${name}-postgres.${NS}.svc` }],
      }),
    ]);
    expect(pod.initContainers[0].command.join(' ')).toContain('pg_isready');

    // The agent server exits while the database does not answer: a few restarts, then the database is ready.
    await fake.rollout(name, 'crash-until-postgres');
    const runtime = new KubernetesRuntime({
      kubeConfig: cluster.as(OPERATOR).kubeConfig,
      namespace: NS,
      config: config().runtime,
      logs: { append: async () => {} },
      logger,
    });
    await runtime.start();
    try {
      expect(
        runtime.serverStatus({ namespace: NS, deployment: name, deploymentId: id, revision: `${name}-r1` }),
      ).toEqual({ phase: 'Starting' });
    } finally {
      await runtime.shutdown();
    }
    expect(phaseOf(`${name}-r1`)).toBe('DEPLOYING');
    await fake.postgresReady(name);
    await fake.rollout(name, 'crash-until-postgres');
    await until('DEPLOYED', () => phaseOf(`${name}-r1`) === 'DEPLOYED');
    expect(peek('apps', 'deployments', name)!.spec.replicas).toBe(2); // never scaled to zero
  });

  it('removes a setting from the live objects when a new revision drops it (and the Ingress of a removed custom_url)', async () => {
    const name = 'ag-2b3c4d5e-6f70-4a81-9b2c-3d4e5f6a7b8c';
    const dep = peek('agentplane.dev', 'agentdeployments', name)!;
    const withExtras = structuredClone(dep.spec.sourceConfig);
    withExtras.customUrl = 'https://ordering.agents.example.com';
    withExtras.resourceSpec = {
      ...withExtras.resourceSpec,
      nodeSelector: { pool: 'agents' },
      annotations: { 'example.com/team': 'support' },
    };
    await patchDeployment(name, { revisionCounter: 2, targetRevisionName: `${name}-r2`, sourceConfig: withExtras });
    await until(
      'r2 rolling out',
      () =>
        peek('apps', 'deployments', name)?.spec.template.metadata.labels['agentplane.dev/revision'] === `${name}-r2`,
    );
    const d2 = peek('apps', 'deployments', name)!;
    expect(d2.spec.template.spec.nodeSelector).toEqual({ pool: 'agents' });
    expect(d2.metadata.labels.team).toBe('support');
    expect((await until('the Ingress', () => peek('networking.k8s.io', 'ingresses', name))).spec.rules[0].host).toBe(
      'ordering.agents.example.com',
    );
    await fake.rollout(name, 'crash-until-postgres');
    await until('r2 DEPLOYED', () => phaseOf(`${name}-r2`) === 'DEPLOYED');

    const plain = structuredClone(dep.spec.sourceConfig);
    delete plain.customUrl;
    plain.resourceSpec = { ...plain.resourceSpec };
    delete plain.resourceSpec.labels;
    await patchDeployment(name, { revisionCounter: 3, targetRevisionName: `${name}-r3`, sourceConfig: plain });
    await until(
      'r3 rolling out',
      () =>
        peek('apps', 'deployments', name)?.spec.template.metadata.labels['agentplane.dev/revision'] === `${name}-r3`,
    );
    const d3 = peek('apps', 'deployments', name)!;
    expect(d3.spec.template.spec.nodeSelector).toBeUndefined();
    expect(d3.metadata.labels.team).toBeUndefined();
    expect(d3.spec.template.metadata.labels.team).toBeUndefined();
    expect(d3.metadata.annotations['example.com/team']).toBeUndefined();
    await until('the Ingress deleted', () => !peek('networking.k8s.io', 'ingresses', name));
    // What others set stays: the Deployment controller's revision annotation.
    await fake.rollout(name, 'ready');
    await until('r3 DEPLOYED', () => phaseOf(`${name}-r3`) === 'DEPLOYED');
    // The operator's field set (server-side apply) no longer holds what it stopped setting.
    const d4 = peek('apps', 'deployments', name)!;
    const ours = d4.metadata.managedFields.find((m: Json) => m.manager === 'agentplane-operator');
    expect(ours.operation).toBe('Apply');
    expect(ours.fieldsV1['f:spec']['f:template']['f:spec']['f:nodeSelector']).toBeUndefined();
    expect(ours.fieldsV1['f:metadata']['f:labels']['f:team']).toBeUndefined();
  });
  it('fails the rollout naming why the cluster refuses its Postgres pod (a quota on its volume), in the health too', async () => {
    const id = '4d5e6f70-8192-4a3b-8c4d-5e6f7a8b9c0d';
    const name = `ag-${id}`;
    const manifest = exampleDeployment(id);
    manifest.spec.secretReferences = [];
    await applyDeployment(manifest);
    await until('DEPLOYING', () => phaseOf(`${name}-r1`) === 'DEPLOYING');
    // The StatefulSet controller, its volume claim refused by a ResourceQuota, records FailedCreate on the
    // StatefulSet at each attempt, and no Postgres pod ever appears (the agent pods would wait on it, silent).
    await core.createNamespacedEvent({
      namespace: NS,
      body: {
        metadata: { name: `${name}-postgres.quota` },
        involvedObject: { apiVersion: 'apps/v1', kind: 'StatefulSet', name: `${name}-postgres`, namespace: NS },
        reason: 'FailedCreate',
        type: 'Warning',
        count: 3,
        firstTimestamp: new Date(Date.now() - 20_000),
        lastTimestamp: new Date(),
        message: `create Claim data-${name}-postgres-0 for Pod ${name}-postgres-0 in StatefulSet ${name}-postgres failed error: persistentvolumeclaims "data-${name}-postgres-0" is forbidden: exceeded quota: storage, requested: requests.storage=1Gi, used: requests.storage=0, limited: requests.storage=1Mi`,
        source: { component: 'statefulset-controller' },
      },
    });
    // Its next reconcile (a resync within a minute; here the revision touched).
    await custom.patchNamespacedCustomObject(
      {
        group: 'agentplane.dev',
        version: 'v1alpha1',
        namespace: NS,
        plural: 'agentrevisions',
        name: `${name}-r1`,
        body: { metadata: { annotations: { 'example.com/touched': '1' } } },
      },
      setHeaderOptions('Content-Type', PatchStrategy.MergePatch),
    );
    await until('DEPLOY_FAILED', () => phaseOf(`${name}-r1`) === 'DEPLOY_FAILED');
    expect(revision(`${name}-r1`)!.status.statusMessage).toMatch(
      /Postgres pod cannot be created \(FailedCreate\): create Claim .*exceeded quota.*\(3 attempts\)/,
    );
    const ready = await until('Ready False', () =>
      (peek('agentplane.dev', 'agentdeployments', name)?.status?.conditions as Json[] | undefined)?.find(
        (c) => c.type === 'Ready' && c.status === 'False',
      ),
    );
    expect(ready).toMatchObject({ reason: 'DEPLOY_FAILED' });
    expect(ready.message).toContain('Postgres pod cannot be created (FailedCreate)');
  });
});

describe('environment Secrets of superseded revisions', () => {
  let op: RunningOperator;
  beforeAll(() => {
    op = startKubernetesOperator(config(), logger);
  });
  afterAll(async () => {
    await op?.close();
  });

  it("deletes an older revision's copy once a newer one serves; the serving revision's and the stored sets stay", async () => {
    const id = '3c4d5e6f-7081-4b92-8c3d-4e5f6a7b8c9d';
    const name = `ag-${id}`;
    const manifest = exampleDeployment(id);
    manifest.spec.secretsName = `${name}-env-r1`;
    // The set the control plane stores for the revisions (the operator reads it, never deletes it).
    await core.createNamespacedSecret({
      namespace: NS,
      body: {
        metadata: { name: `${name}-env-r1`, labels: { 'agentplane.dev/deployment': name } },
        stringData: { OPENAI_API_KEY: 'sk-test-1' },
      },
    });
    await applyDeployment(manifest);
    await until('r1 DEPLOYING', () => phaseOf(`${name}-r1`) === 'DEPLOYING');
    await fake.rollout(name, 'ready');
    await until('r1 DEPLOYED', () => phaseOf(`${name}-r1`) === 'DEPLOYED');
    expect(peek('', 'secrets', `${name}-r1-env`)!.metadata.labels['agentplane.dev/revision']).toBe(`${name}-r1`);

    await patchDeployment(name, { revisionCounter: 2, targetRevisionName: `${name}-r2` });
    await until(
      'r2 rolling out',
      () =>
        peek('apps', 'deployments', name)?.spec.template.metadata.labels['agentplane.dev/revision'] === `${name}-r2`,
    );
    // Mid-rollout the old pods still read theirs.
    expect(peek('', 'secrets', `${name}-r1-env`)).toBeDefined();
    expect(peek('', 'secrets', `${name}-r2-env`)).toBeDefined();
    await fake.rollout(name, 'ready');
    await until('r2 DEPLOYED', () => phaseOf(`${name}-r2`) === 'DEPLOYED');
    await until('the r1 copy deleted', () => !peek('', 'secrets', `${name}-r1-env`));
    // What the serving revision's pods read stays, and so does the stored set a rollback to r1 would copy again.
    expect(peek('apps', 'deployments', name)!.spec.template.spec.containers[0].envFrom).toEqual([
      { secretRef: { name: `${name}-r2-env` } },
    ]);
    expect(peek('', 'secrets', `${name}-r2-env`)).toBeDefined();
    expect(peek('', 'secrets', `${name}-env-r1`)).toBeDefined();
  });
});

describe('postgres mode external', () => {
  let op: RunningOperator;
  beforeAll(() => {
    op = startKubernetesOperator(config(['--postgres-mode', 'external']), logger);
  });
  afterAll(async () => {
    await op?.close();
  });

  it('fails a deployment without DATABASE_URI instead of creating a Postgres', async () => {
    const id = '7a6b5c4d-3e2f-4a1b-8c9d-0e1f2a3b4c5d';
    const name = `ag-${id}`;
    const manifest = exampleDeployment(id);
    manifest.spec.secretReferences = [];
    await applyDeployment(manifest);
    await until('DEPLOY_FAILED', () => phaseOf(`${name}-r1`) === 'DEPLOY_FAILED');
    expect(revision(`${name}-r1`)!.status.statusMessage).toContain('No DATABASE_URI');
    expect(peek('apps', 'statefulsets', `${name}-postgres`)).toBeUndefined();
    expect(peek('apps', 'deployments', name)).toBeUndefined();
  });
});

describe('tenant isolation (hostile deployments end DEPLOY_FAILED before any pod spec is written)', () => {
  let op: RunningOperator;
  let n = 0;
  beforeAll(async () => {
    op = startKubernetesOperator(config(), logger);
    const labelled = (name: string, tenant: string) => ({
      metadata: { name, labels: { 'agentplane.dev/tenant': tenant } },
    });
    // agentplane-control-plane and agentplane-operator exist: the chart's ServiceAccounts.
    await core.createNamespacedServiceAccount({ namespace: NS, body: labelled('b-bot', 'team-b') });
    await core.createNamespacedServiceAccount({ namespace: NS, body: labelled('a-bot', 'team-a') });
    await core.createNamespacedSecret({
      namespace: NS,
      body: { metadata: { name: 'admin-key' }, stringData: { 'api-key': 'k' } },
    });
    await core.createNamespacedSecret({
      namespace: NS,
      body: { ...labelled('b-env', 'team-b'), stringData: { TOKEN: 'b' } },
    });
  });
  afterAll(async () => {
    await op?.close();
  });

  /** The prebuilt example under a fresh id, with `change` applied to its spec. */
  async function deploy(change: (spec: Json) => void): Promise<string> {
    const id = `5e4d3c2b-1a09-4f8e-9d7c-6b5a4f3e2d${String(++n).padStart(2, '0')}`;
    const name = `ag-${id}`;
    const manifest = exampleDeployment(id);
    change(manifest.spec);
    await applyDeployment(manifest);
    return name;
  }

  async function expectRefused(name: string, message: RegExp): Promise<void> {
    await until('DEPLOY_FAILED', () => phaseOf(`${name}-r1`) === 'DEPLOY_FAILED');
    expect(revision(`${name}-r1`)!.status.statusMessage).toMatch(message);
    expect(peek('apps', 'deployments', name)).toBeUndefined();
    expect(peek('networking.k8s.io', 'ingresses', name)).toBeUndefined();
  }

  it.each([
    [
      'the control plane ServiceAccount',
      (s: Json) => (s.sourceConfig.resourceSpec.serviceAccountName = 'agentplane-control-plane'),
      /"agentplane-control-plane": no ServiceAccount labelled agentplane.dev\/tenant=team-a has this name/,
    ],
    [
      'a missing ServiceAccount',
      (s: Json) => (s.sourceConfig.resourceSpec.serviceAccountName = 'agentplane-operator'),
      /"agentplane-operator": no ServiceAccount labelled agentplane.dev\/tenant=team-a/,
    ],
    [
      "another tenant's labelled ServiceAccount",
      (s: Json) => (s.sourceConfig.resourceSpec.serviceAccountName = 'b-bot'),
      /"b-bot": no ServiceAccount labelled agentplane.dev\/tenant=team-a/,
    ],
    [
      'an unlabelled Secret',
      (s: Json) => s.secretReferences.push({ name: 'KEY', secretName: 'admin-key', secretKey: 'api-key' }),
      /Secret "admin-key" does not exist or is not labelled/,
    ],
    [
      "another tenant's Secret",
      (s: Json) => s.secretReferences.push({ name: 'TOKEN', secretName: 'b-env', secretKey: 'TOKEN' }),
      /Secret "b-env" does not exist or is not labelled agentplane.dev\/tenant=team-a/,
    ],
    [
      'the push secret',
      (s: Json) => s.secretReferences.push({ name: 'P', secretName: 'push', secretKey: '.dockerconfigjson' }),
      /Secret "push" is managed by agentplane/,
    ],
    [
      // Written to the resource directly (the control plane would 422): the image's loader would obey it.
      'a reserved secret name (LD_PRELOAD from a labelled Secret)',
      (s: Json) =>
        s.secretReferences.push({ name: 'LD_PRELOAD', secretName: 'support-bot-config', secretKey: 'greeting' }),
      /secret LD_PRELOAD is reserved: the dynamic loader obeys LD_\* variables/,
    ],
    [
      'a host outside the allowed domains',
      (s: Json) => (s.sourceConfig.customUrl = 'https://login.bank.example'),
      /outside the allowed domains \(agents.example.com\)/,
    ],
    [
      'a scale above the bound',
      (s: Json) => (s.sourceConfig.resourceSpec.maxScale = 50),
      /max_scale \(50\) is above the maximum scale of 10/,
    ],
    [
      'too much memory',
      (s: Json) => (s.sourceConfig.resourceSpec.memoryMb = 65536),
      /memory_mb \(65536\) is above the maximum of 8192 MB/,
    ],
  ])('refuses %s', async (_what, change, message) => {
    await expectRefused(await deploy(change), message);
  });

  it('refuses a host another deployment already serves, and runs a labelled account without a token by default', async () => {
    const first = await deploy((s) => {
      s.sourceConfig.customUrl = 'https://support.agents.example.com';
      s.sourceConfig.resourceSpec.serviceAccountName = 'a-bot';
    });
    await until('the first Ingress', () => peek('networking.k8s.io', 'ingresses', first));
    const pod = peek('apps', 'deployments', first)!.spec.template.spec;
    expect(pod).toMatchObject({ serviceAccountName: 'a-bot', automountServiceAccountToken: false });
    const second = await deploy((s) => (s.sourceConfig.customUrl = 'support.agents.example.com'));
    await expectRefused(
      second,
      new RegExp(`host "support.agents.example.com" is already served by another deployment \\(${NS}/${first}\\)`),
    );
  });

  it('gives each deployment owned NetworkPolicies before its pods, and its pods no API token', async () => {
    const from = cluster.api.requests.length;
    const name = await deploy((s) => {
      s.secretReferences = [];
      s.sourceConfig.resourceSpec.memoryLimitMb = 1024;
    });
    await until('DEPLOYING', () => phaseOf(`${name}-r1`) === 'DEPLOYING');
    const seen = cluster.api.requests.slice(from);
    const dep = peek('agentplane.dev', 'agentdeployments', name)!;
    const agent = peek('networking.k8s.io', 'networkpolicies', `${name}-agent`)!;
    const db = peek('networking.k8s.io', 'networkpolicies', `${name}-postgres`)!;
    for (const p of [agent, db])
      expect(p.metadata.ownerReferences[0]).toMatchObject({ kind: 'AgentDeployment', uid: dep.metadata.uid });
    expect(agent.spec.podSelector.matchLabels).toEqual(peek('apps', 'deployments', name)!.spec.selector.matchLabels);
    expect(agent.spec.ingress[0].from[0]).toEqual({
      namespaceSelector: { matchLabels: { 'kubernetes.io/metadata.name': 'ingress-nginx' } },
    });
    expect(db.spec.podSelector.matchLabels).toEqual(
      peek('apps', 'statefulsets', `${name}-postgres`)!.spec.selector.matchLabels,
    );
    // Server-side applies: the first one of each object creates it.
    const policyWrite = seen.indexOf(`PATCH /apis/networking.k8s.io/v1/namespaces/${NS}/networkpolicies/${name}-agent`);
    expect(policyWrite).toBeGreaterThanOrEqual(0);
    expect(policyWrite).toBeLessThan(seen.indexOf(`PATCH /apis/apps/v1/namespaces/${NS}/deployments/${name}`));
    expect(policyWrite).toBeLessThan(
      seen.indexOf(`PATCH /apis/apps/v1/namespaces/${NS}/statefulsets/${postgresName({ name } as Target)}`),
    );
    const pod = peek('apps', 'deployments', name)!.spec.template.spec;
    expect(pod.automountServiceAccountToken).toBe(false);
    // No variables listing the namespace's other Services; an image that cannot be changed, a /tmp in memory no
    // larger than the memory limit; the database URL by reference, never its value in the Deployment.
    expect(pod.enableServiceLinks).toBe(false);
    const agentContainer = pod.containers[0];
    expect(agentContainer.securityContext).toMatchObject({
      readOnlyRootFilesystem: true,
      allowPrivilegeEscalation: false,
      runAsNonRoot: true,
      capabilities: { drop: ['ALL'] },
    });
    expect(agentContainer.volumeMounts).toContainEqual({ name: 'tmp', mountPath: '/tmp' });
    expect(pod.volumes.find((v: Json) => v.name === 'tmp').emptyDir).toEqual({ medium: 'Memory', sizeLimit: '1Gi' });
    expect(agentContainer.env.find((e: Json) => e.name === 'DATABASE_URI')).toEqual({
      name: 'DATABASE_URI',
      valueFrom: { secretKeyRef: { name: `${name}-postgres`, key: expect.any(String) } },
    });
    expect(agentContainer.env.filter((e: Json) => e.value !== undefined).map((e: Json) => e.name)).toEqual([
      'HOST',
      'PORT',
      'HOME',
    ]);
    await custom.deleteNamespacedCustomObject({
      group: 'agentplane.dev',
      version: 'v1alpha1',
      namespace: NS,
      plural: 'agentdeployments',
      name,
    });
    await until(
      'the policies garbage-collected',
      () =>
        !peek('networking.k8s.io', 'networkpolicies', `${name}-agent`) &&
        !peek('networking.k8s.io', 'networkpolicies', `${name}-postgres`),
    );
  });

  it('creates no NetworkPolicy when they are turned off', async () => {
    await op.close();
    op = startKubernetesOperator(config(['--network-policy', 'false']), logger);
    const name = await deploy(() => {});
    await until('DEPLOYING', () => phaseOf(`${name}-r1`) === 'DEPLOYING');
    expect(peek('networking.k8s.io', 'networkpolicies', `${name}-agent`)).toBeUndefined();
  });
});

describe('a namespace per tenant (--namespace-per-tenant)', () => {
  let op: RunningOperator;
  const tenantNs = 'agentplane-t-team-a';
  beforeAll(() => {
    cluster.installChartRbac({ 'agents.namespacePerTenant': true });
    op = startKubernetesOperator(
      config([
        '--namespace-per-tenant',
        'true',
        '--tenant-keys-writer',
        'agentplane/agentplane-control-plane',
        '--tenant-keys-role',
        'agentplane-tenant-keys',
        // As the chart sets them: the operator's rights in a tenant namespace are the RoleBinding it makes there.
        '--tenant-operator-account',
        'agents/agentplane-operator',
        '--tenant-operator-role',
        'agentplane-operator-tenant',
      ]),
      logger,
    );
  });
  afterAll(async () => {
    await op?.close();
  });

  it("runs the agent's children in the tenant's namespace, created and labelled by the operator, and deletes them through the finalizer", async () => {
    const id = '9f8e7d6c-5b4a-4392-8170-6f5e4d3c2b1a';
    const name = `ag-${id}`;
    const manifest = exampleDeployment(id);
    manifest.spec.secretReferences = [];
    await applyDeployment(manifest);
    await until('DEPLOYING', () => phaseOf(`${name}-r1`) === 'DEPLOYING');

    const ns = cluster.api.peek('', 'namespaces', '', tenantNs)!;
    expect(ns.metadata.labels).toMatchObject({
      'agentplane.dev/tenant': 'team-a',
      'app.kubernetes.io/managed-by': 'agentplane-operator',
    });
    const inTenant = (group: string, plural: string, n: string) => cluster.api.peek(group, plural, tenantNs, n);
    const children = [
      ['apps', 'deployments', name],
      ['', 'services', name],
      ['apps', 'statefulsets', `${name}-postgres`],
      ['', 'secrets', `${name}-postgres`],
      ['networking.k8s.io', 'networkpolicies', `${name}-agent`],
      ['networking.k8s.io', 'networkpolicies', `${name}-postgres`],
    ] as const;
    for (const [g, p, n] of children) {
      const obj = inTenant(g, p, n);
      expect(obj, `${p}/${n}`).toBeDefined();
      expect(obj!.metadata.ownerReferences, `${p}/${n}`).toBeUndefined(); // cannot point across namespaces
      expect(obj!.metadata.labels['agentplane.dev/deployment']).toBe(name);
      expect(peek(g, p, n), `${p}/${n} in the operator namespace`).toBeUndefined();
    }
    expect(inTenant('', 'secrets', `${name}-postgres`)!.data.uri).toBeTruthy();
    // The control plane may keep the tenant's keys Secret here, which the agent pods mount.
    expect(inTenant('rbac.authorization.k8s.io', 'rolebindings', 'agentplane-tenant-keys')).toMatchObject({
      roleRef: { kind: 'ClusterRole', name: 'agentplane-tenant-keys' },
      subjects: [{ kind: 'ServiceAccount', name: 'agentplane-control-plane', namespace: 'agentplane' }],
    });
    const volumes = inTenant('apps', 'deployments', name)!.spec.template.spec.volumes as Json[];
    expect(volumes.find((v) => v.name === 'api-keys')!.secret.secretName).toMatch(/^agentplane-keys-[0-9a-f]{16}$/);

    // Observed across namespaces: the rollout in the tenant namespace completes the revision.
    await new FakeCluster(cluster.kubeConfig, tenantNs).rollout(name, 'ready');
    await until('DEPLOYED', () => phaseOf(`${name}-r1`) === 'DEPLOYED');
    expect(peek('agentplane.dev', 'agentdeployments', name)!.metadata.finalizers).toContain('agentplane.dev/runtime');

    await custom.deleteNamespacedCustomObject({
      group: 'agentplane.dev',
      version: 'v1alpha1',
      namespace: NS,
      plural: 'agentdeployments',
      name,
    });
    await until('the deployment gone', () => !peek('agentplane.dev', 'agentdeployments', name));
    for (const [g, p, n] of children) expect(inTenant(g, p, n), `${p}/${n}`).toBeUndefined();
    expect(cluster.api.peek('', 'namespaces', '', tenantNs)).toBeDefined(); // other deployments of the tenant may use it
  });

  it('waits while the tenant namespace terminates, then deploys into a new one', async () => {
    const old = cluster.api.peek('', 'namespaces', '', tenantNs)!;
    const release = cluster.api.holdGarbageCollection();
    await core.deleteNamespace({ name: tenantNs });
    const id = '4d5e6f70-8192-4a3b-8c4d-5e6f70819203';
    const name = `ag-${id}`;
    const manifest = exampleDeployment(id);
    manifest.spec.secretReferences = [];
    const seen = cluster.api.requests.length;
    await applyDeployment(manifest);
    // The operator looks at the namespace, sees it terminating, and writes nothing into it.
    await until(
      'the namespace read twice (a retry)',
      () => cluster.api.requests.slice(seen).filter((r) => r === `GET /api/v1/namespaces/${tenantNs}`).length >= 2,
    );
    expect(
      cluster.api.requests.slice(seen).filter((r) => r.startsWith('POST') && r.includes(`/namespaces/${tenantNs}/`)),
    ).toEqual([]);
    expect(phaseOf(`${name}-r1`)).not.toBe('DEPLOY_FAILED');
    release();
    await until(
      'a new tenant namespace with the children',
      () => {
        const ns = cluster.api.peek('', 'namespaces', '', tenantNs);
        return ns && ns.metadata.uid !== old.metadata.uid && cluster.api.peek('apps', 'deployments', tenantNs, name);
      },
      30_000,
    );
    await until('DEPLOYING', () => phaseOf(`${name}-r1`) === 'DEPLOYING');
    await custom.deleteNamespacedCustomObject({
      group: 'agentplane.dev',
      version: 'v1alpha1',
      namespace: NS,
      plural: 'agentdeployments',
      name,
    });
    await until('the deployment gone', () => !peek('agentplane.dev', 'agentdeployments', name));
  });

  it("checks ServiceAccounts and Secrets in the tenant's namespace", async () => {
    await core.createNamespacedSecret({
      namespace: tenantNs,
      body: {
        metadata: { name: 'team-a-db', labels: { 'agentplane.dev/tenant': 'team-a' } },
        stringData: { uri: 'postgresql://x' },
      },
    });
    const id = '1a2b3c4d-5e6f-4a8b-9c0d-1e2f3a4b5c6d';
    const name = `ag-${id}`;
    const manifest = exampleDeployment(id);
    // support-bot-config exists (labelled for team-a) in the operator namespace only: not usable from here.
    manifest.spec.secretReferences = [
      { name: 'DATABASE_URI', secretName: 'team-a-db', secretKey: 'uri' },
      { name: 'G', secretName: 'support-bot-config', secretKey: 'greeting' },
    ];
    await applyDeployment(manifest);
    await until('DEPLOY_FAILED', () => phaseOf(`${name}-r1`) === 'DEPLOY_FAILED');
    expect(revision(`${name}-r1`)!.status.statusMessage).toMatch(
      /Secret "support-bot-config" does not exist or is not labelled/,
    );
  });
});

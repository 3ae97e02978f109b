// The operator against the API-server double, through @kubernetes/client-node only: AgentDeployments applied
// like `kubectl apply`, the test playing the Job and Deployment controllers.
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { CustomObjectsApi } from '@kubernetes/client-node';
import { parse } from 'yaml';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createLogger } from '../../src/lib/logger.ts';
import { openKubernetesStore } from '../../src/control-plane/store/kubernetes/index.ts';
import { parseOperatorConfig } from '../../src/operator/config.ts';
import { startKubernetesOperator, type RunningOperator } from '../../src/operator/kubernetes.ts';
import { KubernetesRuntime } from '../../src/operator/runtimes/kubernetes/index.ts';
import { createDeploymentReconciler } from '../../src/operator/controllers/agentdeployment/controller.ts';
import { createRevisionReconciler } from '../../src/operator/controllers/agentrevision/controller.ts';
import { storeLogSink } from '../../src/operator/sources.ts';
import { startCluster, until, type TestCluster } from './helpers/cluster.ts';
import { FakeCluster } from './helpers/kubelet.ts';

const NS = 'agents';
const logger = createLogger({ level: (process.env.TEST_LOG as 'warn') ?? 'silent', name: 'test' });
const examples = join(import.meta.dirname, '../../examples/k8s');
const digest = `sha256:${'d'.repeat(64)}`;
type Json = Record<string, any>;

let cluster: TestCluster;
let fake: FakeCluster;
let custom: CustomObjectsApi;

const peek = (group: string, plural: string, name: string): Json | undefined => cluster.api.peek(group, plural, NS, name);
const revision = (name: string) => peek('agentplane.dev', 'agentrevisions', name);
const phaseOf = (name: string) => revision(name)?.status?.phase as string | undefined;
const writes = (from: number) => cluster.api.requests.slice(from).filter((r) => !r.startsWith('GET '));

function config(extra: string[] = []) {
  return parseOperatorConfig(
    ['--kubeconfig', cluster.kubeconfigPath, '--namespace', NS, '--registry', 'registry.test/agents', '--push-secret', 'push', '--base-image', 'agentplane:test', '--log-level', 'silent', ...extra],
    {},
  )!;
}

function example(file: string): Json {
  return parse(readFileSync(join(examples, file), 'utf8')) as Json;
}

async function applyDeployment(body: Json): Promise<void> {
  await custom.createNamespacedCustomObject({ group: 'agentplane.dev', version: 'v1alpha1', namespace: NS, plural: 'agentdeployments', body });
}

/** Like `kubectl edit`: read, change spec, replace; the operator writes too, so retry on conflict. */
async function patchDeployment(name: string, spec: Json): Promise<void> {
  for (let attempt = 0; ; attempt++) {
    const cur = (await custom.getNamespacedCustomObject({ group: 'agentplane.dev', version: 'v1alpha1', namespace: NS, plural: 'agentdeployments', name })) as Json;
    try {
      await custom.replaceNamespacedCustomObject({
        group: 'agentplane.dev', version: 'v1alpha1', namespace: NS, plural: 'agentdeployments', name,
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
  const store = openKubernetesStore({ kubeConfig: cluster.kubeConfig, namespace: NS, logger });
  const runtime = new KubernetesRuntime({ kubeConfig: cluster.kubeConfig, namespace: NS, config: config().runtime, logs: storeLogSink(store), logger });
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
    const seen = cluster.api.requests.slice(before);
    expect(seen.some((r) => r.startsWith(`GET /apis/apps/v1/namespaces/${NS}/deployments/${name}`))).toBe(true); // it did look
    return writes(before);
  } finally {
    await runtime.shutdown();
    await store.close();
  }
}

beforeAll(async () => {
  cluster = await startCluster(NS);
  fake = new FakeCluster(cluster.kubeConfig, NS);
  custom = cluster.kubeConfig.makeApiClient(CustomObjectsApi);
});
afterAll(async () => {
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
    await applyDeployment(manifest);
    await until('DEPLOYING', () => phaseOf(r1) === 'DEPLOYING');
    const d = peek('apps', 'deployments', name)!;
    const dep = peek('agentplane.dev', 'agentdeployments', name)!;
    expect(d.metadata.ownerReferences[0]).toMatchObject({ kind: 'AgentDeployment', uid: dep.metadata.uid, controller: true });
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
      peek('agentplane.dev', 'agentdeployments', name)?.status?.conditions?.find((x: Json) => x.type === 'Ready' && x.status === 'True'),
    );
    expect(ready.observedGeneration).toBe(dep.metadata.generation);
    const status = peek('agentplane.dev', 'agentdeployments', name)!.status;
    expect(status.activeRevisionName).toBe(r1);
    expect(status.url).toBe(`http://${name}.${NS}.svc.cluster.local`);
  });

  it('sends no write when reconciling a converged deployment again', async () => {
    await op.close(); // nothing else may write meanwhile
    expect(await secondPassWrites(name, [r1])).toEqual([]);
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
    expect(job.spec.template.spec.initContainers[0].env).toContainEqual({ name: 'REPO_URL', value: 'https://github.com/agentplane/example-agent.git' });
    await until('BUILDING', () => phaseOf(rev(1)) === 'BUILDING');

    await fake.finishJob(`${rev(1)}-build`, { ok: true, commit: 'a1b2c3d4e5f6a7b8', digest });
    await until('DEPLOYING', () => phaseOf(rev(1)) === 'DEPLOYING');
    const d = peek('apps', 'deployments', name)!;
    expect(d.spec.template.spec.containers[0].image).toBe(`registry.test/agents/${name}@${digest}`);
    expect(peek('apps', 'statefulsets', `${name}-postgres`)!.spec.volumeClaimTemplates[0].spec.resources.requests.storage).toBe('1Gi');
    expect(peek('', 'secrets', `${name}-postgres`)!.data.uri).toBeTruthy();
    expect(peek('networking.k8s.io', 'ingresses', name)!.spec.rules[0].host).toBe('example-agent.agents.example.com');
    expect(peek('batch', 'jobs', `${rev(1)}-build`)!.metadata.annotations['agentplane.dev/image']).toBe(`registry.test/agents/${name}@${digest}`);
    expect(peek('autoscaling', 'horizontalpodautoscalers', name)!.spec).toMatchObject({ minReplicas: 1, maxReplicas: 3 });
    expect(d.spec.replicas).toBeUndefined();

    await fake.rollout(name, 'ready');
    await until('DEPLOYED', () => phaseOf(rev(1)) === 'DEPLOYED');
    expect(revision(rev(1))!.status.repoCommitSha).toBe('a1b2c3d4e5f6a7b8');
    expect(revision(rev(1))!.status.image).toBe(`registry.test/agents/${name}@${digest}`);
    await until('the custom URL', () => peek('agentplane.dev', 'agentdeployments', name)?.status?.url === 'https://example-agent.agents.example.com');

    // Converged with Postgres, Ingress and build Job too: reconciling again writes nothing.
    await op.close();
    expect(await secondPassWrites(name, [rev(1)])).toEqual([]);
    op = startKubernetesOperator(config(), logger);
  });

  it('reports BUILD_FAILED with the reason in the revision and its build log; the live revision keeps serving', async () => {
    await patchDeployment(name, { revisionCounter: 2, targetRevisionName: rev(2), sourceRevisionConfig: { repoRef: 'no-such-branch', graphConfigPath: 'langgraph.json' } });
    await until('the second build Job', () => peek('batch', 'jobs', `${rev(2)}-build`));
    cluster.api.podLogs.set(`${NS}/${rev(2)}-build-abcde/clone`, 'fatal: couldn\'t find remote ref no-such-branch\n');
    await fake.finishJob(`${rev(2)}-build`, { ok: false, container: 'clone', message: 'repo_ref "no-such-branch" is not a branch, tag or commit' });
    await until('BUILD_FAILED', () => phaseOf(rev(2)) === 'BUILD_FAILED');
    expect(revision(rev(2))!.status.statusMessage).toBe(
      'Build failed (BackoffLimitExceeded): clone: exit 1: repo_ref "no-such-branch" is not a branch, tag or commit',
    );
    const store = openKubernetesStore({ kubeConfig: cluster.kubeConfig, namespace: NS, logger });
    const page = await until('build log', async () => {
      const p = await store.readLogs(NS, rev(2), { type: 'build', limit: 100, order: 'asc' });
      return p.logs.length ? p : undefined;
    });
    await store.close();
    expect(page.logs.map((l) => l.message).join('\n')).toContain('is not a branch, tag or commit');
    expect(page.logs.map((l) => l.message)).toContain("[clone] fatal: couldn't find remote ref no-such-branch");
    expect(peek('apps', 'deployments', name)!.spec.template.metadata.labels['agentplane.dev/revision']).toBe(rev(1));
    expect(peek('agentplane.dev', 'agentdeployments', name)!.status.activeRevisionName).toBe(rev(1));
  });

  it('reports DEPLOY_FAILED for a crash-looping rollout and rolls back to the serving revision', async () => {
    await patchDeployment(name, { revisionCounter: 3, targetRevisionName: rev(3), sourceRevisionConfig: { repoRef: 'main', graphConfigPath: 'langgraph.json' } });
    await until('the third build Job', () => peek('batch', 'jobs', `${rev(3)}-build`));
    await fake.finishJob(`${rev(3)}-build`, { ok: true, commit: 'c0ffee00c0ffee00', digest: `sha256:${'e'.repeat(64)}` });
    await until('rollout to r3', () => peek('apps', 'deployments', name)?.spec.template.metadata.labels['agentplane.dev/revision'] === rev(3));
    await fake.rollout(name, 'crash');
    await until('DEPLOY_FAILED', () => phaseOf(rev(3)) === 'DEPLOY_FAILED');
    expect(revision(rev(3))!.status.statusMessage).toContain('CrashLoopBackOff');
    await until('rollback to r1', () => peek('apps', 'deployments', name)?.spec.template.metadata.labels['agentplane.dev/revision'] === rev(1));
    expect(peek('apps', 'deployments', name)!.spec.template.spec.containers[0].image).toBe(`registry.test/agents/${name}@${digest}`);
    expect(peek('agentplane.dev', 'agentdeployments', name)!.status.activeRevisionName).toBe(rev(1));
  });

  it('marks a revision superseded while building SKIPPED and stops its build', async () => {
    await patchDeployment(name, { revisionCounter: 4, targetRevisionName: rev(4), sourceRevisionConfig: { repoRef: 'v4', graphConfigPath: 'langgraph.json' } });
    await until('the fourth build Job', () => peek('batch', 'jobs', `${rev(4)}-build`));
    await until('BUILDING r4', () => phaseOf(rev(4)) === 'BUILDING');
    await patchDeployment(name, { revisionCounter: 5, targetRevisionName: rev(5), sourceRevisionConfig: { repoRef: 'v5', graphConfigPath: 'langgraph.json' } });
    await until('SKIPPED r4', () => phaseOf(rev(4)) === 'SKIPPED');
    await until('the r4 build Job deleted', () => !peek('batch', 'jobs', `${rev(4)}-build`));
    await until('the r5 build Job', () => peek('batch', 'jobs', `${rev(5)}-build`));
    expect(peek('batch', 'jobs', `${rev(1)}-build`)).toBeDefined(); // finished builds stay (their image is recorded there)
  });

  it('deleting the AgentDeployment garbage-collects every child through owner references', async () => {
    await custom.deleteNamespacedCustomObject({ group: 'agentplane.dev', version: 'v1alpha1', namespace: NS, plural: 'agentdeployments', name });
    await until('the deployment gone', () => !peek('agentplane.dev', 'agentdeployments', name));
    for (const [group, plural, child] of [
      ['apps', 'deployments', name],
      ['apps', 'statefulsets', `${name}-postgres`],
      ['', 'services', name],
      ['', 'secrets', `${name}-postgres`],
      ['networking.k8s.io', 'ingresses', name],
      ['autoscaling', 'horizontalpodautoscalers', name],
      ['batch', 'jobs', `${rev(1)}-build`],
      ['agentplane.dev', 'agentrevisions', rev(3)],
    ] as const) {
      expect(peek(group, plural, child), `${plural}/${child}`).toBeUndefined();
    }
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
    const manifest = example('agentdeployment.yaml');
    manifest.metadata.name = name;
    manifest.spec.deploymentId = id;
    manifest.spec.targetRevisionName = `${name}-r1`;
    manifest.spec.secretReferences = [];
    await applyDeployment(manifest);
    await until('DEPLOY_FAILED', () => phaseOf(`${name}-r1`) === 'DEPLOY_FAILED');
    expect(revision(`${name}-r1`)!.status.statusMessage).toContain('No DATABASE_URI');
    expect(peek('apps', 'statefulsets', `${name}-postgres`)).toBeUndefined();
    expect(peek('apps', 'deployments', name)).toBeUndefined();
  });
});

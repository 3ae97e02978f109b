// Namespace lifecycle and garbage collection as the real API server and controller-manager do them, through
// client-node: creates need an existing namespace that is not terminating; dependents of a deleted owner go later,
// by the propagation policy asked for or the kind's default; deleting a namespace empties it first.
import { AppsV1Api, BatchV1Api, CoreV1Api, type V1OwnerReference } from '@kubernetes/client-node';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startCluster, until, type TestCluster } from '../kubernetes/cluster.ts';

const NS = 'agents';
let cluster: TestCluster;
let core: CoreV1Api;
let apps: AppsV1Api;
let batch: BatchV1Api;
type Failure = { code?: number; body?: string };
const failure = async (p: Promise<unknown>) =>
  p.then(
    () => ({ code: 200, message: '' }),
    (e: Failure) => ({ code: e.code, message: JSON.parse(e.body ?? '{}').message as string }),
  );
const exists = (p: Promise<unknown>) =>
  p.then(
    () => true,
    (e: Failure) => (e.code === 404 ? false : Promise.reject(e)),
  );

beforeAll(async () => {
  cluster = await startCluster(NS);
  core = cluster.kubeConfig.makeApiClient(CoreV1Api);
  apps = cluster.kubeConfig.makeApiClient(AppsV1Api);
  batch = cluster.kubeConfig.makeApiClient(BatchV1Api);
});
afterAll(async () => {
  await cluster?.close();
});

async function configMap(name: string, namespace = NS, owners: V1OwnerReference[] = []) {
  return core.createNamespacedConfigMap({
    namespace,
    body: { metadata: { name, ...(owners.length ? { ownerReferences: owners } : {}) }, data: { a: '1' } },
  });
}
const ref = (
  o: { metadata?: { name?: string; uid?: string } },
  kind = 'ConfigMap',
  block = false,
): V1OwnerReference => ({
  apiVersion: 'v1',
  kind,
  name: o.metadata!.name!,
  uid: o.metadata!.uid!,
  ...(block ? { blockOwnerDeletion: true } : {}),
});
const cmExists = (name: string, namespace = NS) => exists(core.readNamespacedConfigMap({ name, namespace }));

describe('namespaces', () => {
  it('refuses a create in a namespace that does not exist with NotFound naming it', async () => {
    const f = await failure(configMap('x', 'nowhere'));
    expect(f).toEqual({ code: 404, message: 'namespaces "nowhere" not found' });
  });

  it('labels a namespace with its name, and keeps the immortal ones', async () => {
    const ns = await core.createNamespace({ body: { metadata: { name: 'labelled' } } });
    expect(ns.metadata?.labels?.['kubernetes.io/metadata.name']).toBe('labelled');
    expect(ns.status?.phase).toBe('Active');
    expect(ns.spec?.finalizers).toEqual(['kubernetes']);
    expect((await failure(core.deleteNamespace({ name: 'default' }))).code).toBe(403);
    expect((await failure(core.createNamespace({ body: { metadata: { name: 'dotted.name' } } }))).code).toBe(422);
  });

  it('terminates a namespace: refuses new content, deletes what it holds, then goes', async () => {
    await core.createNamespace({ body: { metadata: { name: 'doomed' } } });
    await configMap('plain', 'doomed');
    // A finalizer someone else owns holds both the object and the namespace.
    await core.createNamespacedSecret({
      namespace: 'doomed',
      body: { metadata: { name: 'held', finalizers: ['example.com/hold'] } },
    });
    const release = cluster.api.holdGarbageCollection();
    const ns = await core.deleteNamespace({ name: 'doomed' });
    expect((ns as { status?: { phase?: string } }).status?.phase).toBe('Terminating');
    const f = await failure(configMap('late', 'doomed'));
    expect(f.code).toBe(403);
    expect(f.message).toBe(
      'configmaps "late" is forbidden: unable to create new content in namespace doomed because it is being terminated',
    );
    // Nothing happens synchronously: the contents are still there while the namespace controller is held.
    expect(await cmExists('plain', 'doomed')).toBe(true);
    release();
    await until('the namespace contents deleted', async () => !(await cmExists('plain', 'doomed')));
    const held = await until(
      'the held Secret marked for deletion',
      async () => (await core.readNamespacedSecret({ name: 'held', namespace: 'doomed' })).metadata?.deletionTimestamp,
    );
    expect(held).toBeTruthy();
    expect(await exists(core.readNamespace({ name: 'doomed' }))).toBe(true);
    const s = await core.readNamespacedSecret({ name: 'held', namespace: 'doomed' });
    await core.replaceNamespacedSecret({
      name: 'held',
      namespace: 'doomed',
      body: { ...s, metadata: { ...s.metadata, finalizers: [] } },
    });
    await until('the namespace gone', async () => !(await exists(core.readNamespace({ name: 'doomed' }))));
    // A namespace of the same name can be created again, empty.
    await core.createNamespace({ body: { metadata: { name: 'doomed' } } });
    expect((await core.listNamespacedSecret({ namespace: 'doomed' })).items).toEqual([]);
  });
});

describe('garbage collection', () => {
  it('background (the default for most kinds): the owner goes at once, its dependents later', async () => {
    const owner = await configMap('bg-owner');
    await configMap('bg-dep', NS, [ref(owner)]);
    const release = cluster.api.holdGarbageCollection();
    await core.deleteNamespacedConfigMap({ name: 'bg-owner', namespace: NS });
    expect(await cmExists('bg-owner')).toBe(false);
    expect(await cmExists('bg-dep')).toBe(true);
    release();
    await until('the dependent collected', async () => !(await cmExists('bg-dep')));
  });

  it('cascades down a chain of owners, level by level', async () => {
    const a = await configMap('chain-a');
    const b = await configMap('chain-b', NS, [ref(a)]);
    await configMap('chain-c', NS, [ref(b)]);
    await core.deleteNamespacedConfigMap({ name: 'chain-a', namespace: NS });
    await until('the chain collected', async () => !(await cmExists('chain-b')) && !(await cmExists('chain-c')));
  });

  it('foreground: the owner waits, with a deletionTimestamp, until blocking dependents are gone', async () => {
    const owner = await configMap('fg-owner');
    await core.createNamespacedConfigMap({
      namespace: NS,
      body: {
        metadata: {
          name: 'fg-dep',
          ownerReferences: [ref(owner, 'ConfigMap', true)],
          finalizers: ['example.com/hold'],
        },
      },
    });
    await core.deleteNamespacedConfigMap({ name: 'fg-owner', namespace: NS, propagationPolicy: 'Foreground' });
    const res = await core.readNamespacedConfigMap({ name: 'fg-owner', namespace: NS });
    expect(res.metadata?.finalizers).toContain('foregroundDeletion');
    expect(res.metadata?.deletionTimestamp).toBeTruthy();
    const dep = await until('the dependent being deleted', async () => {
      const d = await core.readNamespacedConfigMap({ name: 'fg-dep', namespace: NS });
      return d.metadata?.deletionTimestamp ? d : undefined;
    });
    expect(await cmExists('fg-owner')).toBe(true);
    await core.replaceNamespacedConfigMap({
      name: 'fg-dep',
      namespace: NS,
      body: { ...dep, metadata: { ...dep.metadata, finalizers: [] } },
    });
    await until('the owner gone after its dependent', async () => !(await cmExists('fg-owner')));
  });

  it('orphan: dependents stay, without the reference to the deleted owner', async () => {
    const owner = await configMap('or-owner');
    const other = await configMap('or-other');
    await configMap('or-dep', NS, [ref(owner), ref(other)]);
    await core.deleteNamespacedConfigMap({ name: 'or-owner', namespace: NS, propagationPolicy: 'Orphan' });
    await until('the owner gone', async () => !(await cmExists('or-owner')));
    const dep = await core.readNamespacedConfigMap({ name: 'or-dep', namespace: NS });
    expect(dep.metadata?.ownerReferences?.map((o) => o.name)).toEqual(['or-other']);
  });

  it('a Job deleted without a policy orphans its pods (batch/v1 default); Background removes them', async () => {
    const template = { spec: { restartPolicy: 'Never', containers: [{ name: 'c', image: 'busybox' }] } };
    const mk = async (name: string) => {
      const job = await batch.createNamespacedJob({ namespace: NS, body: { metadata: { name }, spec: { template } } });
      await core.createNamespacedPod({
        namespace: NS,
        body: {
          metadata: { name: `${name}-pod`, ownerReferences: [{ ...ref(job, 'Job'), apiVersion: 'batch/v1' }] },
          spec: template.spec,
        },
      });
    };
    const podExists = (name: string) => exists(core.readNamespacedPod({ name, namespace: NS }));
    await mk('job-default');
    await batch.deleteNamespacedJob({ name: 'job-default', namespace: NS });
    await until(
      'the Job gone',
      async () => !(await exists(batch.readNamespacedJob({ name: 'job-default', namespace: NS }))),
    );
    const orphan = await until('the pod orphaned', async () => {
      const p = await core.readNamespacedPod({ name: 'job-default-pod', namespace: NS });
      return p.metadata?.ownerReferences ? undefined : p;
    });
    expect(orphan.metadata?.deletionTimestamp).toBeUndefined();
    await mk('job-bg');
    await batch.deleteNamespacedJob({ name: 'job-bg', namespace: NS, propagationPolicy: 'Background' });
    await until('the pod collected', async () => !(await podExists('job-bg-pod')));
  });

  it('treats an owner in another namespace as missing, and refuses an unknown policy', async () => {
    await core.createNamespace({ body: { metadata: { name: 'elsewhere' } } });
    const foreign = await configMap('foreign-owner', 'elsewhere');
    await configMap('cross-dep', NS, [ref(foreign)]);
    await until('the cross-namespace dependent collected', async () => !(await cmExists('cross-dep')));
    expect(await exists(core.readNamespacedConfigMap({ name: 'foreign-owner', namespace: 'elsewhere' }))).toBe(true);
    await configMap('policy');
    const f = await failure(
      core.deleteNamespacedConfigMap({ name: 'policy', namespace: NS, propagationPolicy: 'Sometimes' }),
    );
    expect(f.code).toBe(422);
    expect(f.message).toMatch(/propagationPolicy: Unsupported value: "Sometimes"/);
  });

  it('Deployments: ReplicaSets and pods outlive the Deployment briefly, then go', async () => {
    const labels = { app: 'x' };
    const d = await apps.createNamespacedDeployment({
      namespace: NS,
      body: {
        metadata: { name: 'web' },
        spec: {
          selector: { matchLabels: labels },
          template: { metadata: { labels }, spec: { containers: [{ name: 'c', image: 'nginx' }] } },
        },
      },
    });
    const rs = await apps.createNamespacedReplicaSet({
      namespace: NS,
      body: {
        metadata: {
          name: 'web-1',
          labels,
          ownerReferences: [{ ...ref(d, 'Deployment', true), apiVersion: 'apps/v1', controller: true }],
        },
        spec: {
          selector: { matchLabels: labels },
          template: { metadata: { labels }, spec: { containers: [{ name: 'c', image: 'nginx' }] } },
        },
      },
    });
    await core.createNamespacedPod({
      namespace: NS,
      body: {
        metadata: {
          name: 'web-1-a',
          labels,
          ownerReferences: [{ ...ref(rs, 'ReplicaSet', true), apiVersion: 'apps/v1', controller: true }],
        },
        spec: { containers: [{ name: 'c', image: 'nginx' }] },
      },
    });
    const release = cluster.api.holdGarbageCollection();
    await apps.deleteNamespacedDeployment({ name: 'web', namespace: NS });
    expect(await exists(apps.readNamespacedReplicaSet({ name: 'web-1', namespace: NS }))).toBe(true);
    release();
    await until(
      'the pod collected',
      async () => !(await exists(core.readNamespacedPod({ name: 'web-1-a', namespace: NS }))),
    );
    expect(await exists(apps.readNamespacedReplicaSet({ name: 'web-1', namespace: NS }))).toBe(false);
  });
});

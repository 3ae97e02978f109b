// The runtime's informers over client-node: list + watch of built-in children, 410 on a compacted
// resourceVersion, and the operator's Informer relisting after it; apply() reading through such a cache.
import { CoreV1Api, type V1Pod, type V1Service } from '@kubernetes/client-node';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createLogger } from '../../../../src/lib/logger.ts';
import { Informer, type KubeObject } from '../../../../src/operator/controller-kit/informer.ts';
import { apply } from '../../../../src/operator/runtimes/kubernetes/apply.ts';
import { cachedOps } from '../../../../src/operator/runtimes/kubernetes/cached-reads.ts';
import { makeApiClients } from '../../../../src/operator/runtimes/kubernetes/context.ts';
import { childListWatch } from '../../../../src/operator/runtimes/kubernetes/list-watch.ts';
import { startCluster, until, type TestCluster } from '../../../support/kubernetes/cluster.ts';

const NS = 'agents';
const MANAGED = 'app.kubernetes.io/managed-by=agentplane-operator';
let cluster: TestCluster;
let core: CoreV1Api;

const pod = (name: string, managed = true): V1Pod => ({
  apiVersion: 'v1',
  kind: 'Pod',
  metadata: {
    name,
    namespace: NS,
    labels: managed ? { 'app.kubernetes.io/managed-by': 'agentplane-operator' } : { app: 'other' },
  },
  spec: { containers: [{ name: 'c', image: 'busybox' }] },
});

beforeAll(async () => {
  cluster = await startCluster(NS, { historyLimit: 3 });
  core = cluster.kubeConfig.makeApiClient(CoreV1Api);
  for (let i = 0; i < 6; i++) await core.createNamespacedPod({ namespace: NS, body: pod(`p${i}`, i !== 5) });
});
afterAll(async () => {
  await cluster?.close();
});

describe('childListWatch', () => {
  it('lists only the operator-managed children, with a resourceVersion', async () => {
    const { items, resourceVersion } = await childListWatch<V1Pod & { metadata: { name: string } }>(
      cluster.kubeConfig,
      'pods',
      NS,
      MANAGED,
    ).list();
    expect(items.map((p) => p.metadata.name).sort()).toEqual(['p0', 'p1', 'p2', 'p3', 'p4']);
    expect(Number(resourceVersion)).toBeGreaterThanOrEqual(6);
  });

  it('ends a watch from a compacted resourceVersion with a 410 error', async () => {
    const lw = childListWatch<V1Pod & { metadata: { name: string } }>(cluster.kubeConfig, 'pods', NS, MANAGED);
    const closed = await new Promise<unknown>((resolve) => {
      void lw.watch('1', () => {}, resolve);
    });
    expect((closed as { code?: number }).code).toBe(410);
  });

  it('feeds an Informer that follows creates and deletes', async () => {
    const informer = new Informer(
      childListWatch<V1Pod & { metadata: { name: string } }>(cluster.kubeConfig, 'pods', NS, MANAGED),
      {
        name: 'pods',
        logger: createLogger({ level: 'silent' }),
      },
    );
    await informer.start();
    try {
      expect(informer.list()).toHaveLength(5);
      await core.createNamespacedPod({ namespace: NS, body: pod('p6') });
      await core.createNamespacedPod({ namespace: NS, body: pod('p7', false) });
      await until('p6 in the cache', () => informer.get(`${NS}/p6`));
      await core.deleteNamespacedPod({ name: 'p0', namespace: NS });
      await until('p0 gone from the cache', () => !informer.get(`${NS}/p0`));
      expect(informer.get(`${NS}/p7`)).toBeUndefined();
    } finally {
      informer.stop();
    }
  });

  it('keeps a quiet watch open through bookmarks and resumes after a server timeout without relisting', async () => {
    // Scaled down: bookmarks every 300 ms, client idle limit 800 ms, server ends each watch after 1 s.
    const quiet = await startCluster(NS, { bookmarkMs: 300 });
    const informer = new Informer(
      childListWatch<V1Pod & { metadata: { name: string } }>(quiet.kubeConfig, 'pods', NS, MANAGED, {
        timeoutSeconds: 1,
        idleTimeoutMs: 800,
      }),
      { name: 'pods', logger: createLogger({ level: 'silent' }) },
    );
    try {
      await informer.start();
      await new Promise((r) => setTimeout(r, 3_500));
      const pods = quiet.api.requestUrls.filter((u) => u.startsWith(`GET /api/v1/namespaces/${NS}/pods`));
      const watches = pods.filter((u) => u.includes('watch=true'));
      expect(pods.length - watches.length).toBe(1); // one LIST, never again
      expect(watches.length).toBeGreaterThanOrEqual(3);
      for (const w of watches) expect(w).toMatch(/resourceVersion=\d+/);
    } finally {
      informer.stop();
      await quiet.close();
    }
  });
});

describe('apply() through a watch-fed cache (cached-reads.ts)', () => {
  it('reads its children from the cache, its own writes at once, and a deletion by someone else from the watch', async () => {
    const { ops } = makeApiClients(cluster.kubeConfig);
    const cache = new Informer<V1Service & KubeObject>(childListWatch(cluster.kubeConfig, 'services', NS, MANAGED), {
      name: 'services',
      logger: createLogger({ level: 'silent' }),
    });
    await cache.start();
    try {
      const service = cachedOps(ops.service, cache);
      const desired: V1Service = {
        apiVersion: 'v1',
        kind: 'Service',
        metadata: { name: 'cached', namespace: NS, labels: { 'app.kubernetes.io/managed-by': 'agentplane-operator' } },
        spec: { selector: { app: 'x' }, ports: [{ name: 'http', port: 80, targetPort: 'http', protocol: 'TCP' }] },
      };
      const reads = () => cluster.api.requests.filter((r) => r === `GET /api/v1/namespaces/${NS}/services/cached`);
      expect((await apply(service, desired)).wrote).toBe(true); // a miss: read from the server (404), then created
      const afterCreate = reads().length;
      // Right after its own write (before or after its watch event): the write's answer is in the cache.
      expect((await apply(service, desired)).wrote).toBe(false);
      const changed = { ...desired, spec: { ...desired.spec, selector: { app: 'y' } } };
      expect((await apply(service, changed)).wrote).toBe(true);
      expect((await apply(service, changed)).wrote).toBe(false);
      expect(reads().length).toBe(afterCreate);
      // Deleted by someone else: once the watch says so, the next apply creates it again.
      await core.deleteNamespacedService({ name: 'cached', namespace: NS });
      await until('the deletion seen', () => !cache.get(`${NS}/cached`));
      expect((await apply(service, changed)).wrote).toBe(true);
      expect(cluster.api.peek('', 'services', NS, 'cached')?.spec.selector).toEqual({ app: 'y' });
    } finally {
      cache.stop();
    }
  });
});

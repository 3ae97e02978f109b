// The operator's informers over the kubernetes store against the API-server double: a watch the server ends
// normally (its timeoutSeconds) is resumed from the last version without a new list, and a BOOKMARK moves that
// version on, so a quiet informer resumes after it (not from an old version the server may have compacted away).
import { CoreV1Api } from '@kubernetes/client-node';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createLogger } from '../../../src/lib/logger.ts';
import { openKubernetesPlatformState } from '../../../src/state/kubernetes/index.ts';
import type { PlatformState } from '../../../src/state/types.ts';
import { Informer, type ListWatch } from '../../../src/operator/controller-kit/informer.ts';
import { storeListWatch } from '../../../src/operator/sources.ts';
import type { AgentDeployment } from '../../../src/resources/agent-deployment.ts';
import { startCluster, until, type TestCluster } from '../../support/kubernetes/cluster.ts';

const NS = 'agents';
const logger = createLogger({ level: 'silent', name: 'test' });

let cluster: TestCluster;
let store: PlatformState;

beforeAll(async () => {
  // Bookmarks every 100 ms; each watch ends after a second.
  cluster = await startCluster(NS, { bookmarkMs: 100 });
  store = openKubernetesPlatformState({
    kubeConfig: cluster.kubeConfig,
    namespace: NS,
    logger,
    watchTimeoutSeconds: 1,
  });
}, 30_000);
afterAll(async () => {
  await store?.close();
  await cluster?.close();
});

describe('informer watches', () => {
  it('resumes after a normal close without relisting, from the version of the last bookmark', async () => {
    const source = storeListWatch(store, 'AgentDeployment', NS);
    let lists = 0;
    const watchedFrom: string[] = [];
    const counted: ListWatch<AgentDeployment> = {
      list: async () => {
        lists++;
        return source.list();
      },
      watch: (rv, onEvent, onClose) => {
        watchedFrom.push(rv);
        return source.watch(rv, onEvent, onClose);
      },
    };
    const informer = new Informer(counted, { name: 'deployments', logger });
    await informer.start();
    try {
      const listedAt = Number(watchedFrom[0]);
      // Other kinds change meanwhile: the server's version moves on while this watch stays quiet.
      const core = cluster.kubeConfig.makeApiClient(CoreV1Api);
      await core.createNamespacedConfigMap({ namespace: NS, body: { metadata: { name: 'elsewhere' }, data: {} } });
      await until('three watches', () => watchedFrom.length >= 3, 20_000);
      expect(lists).toBe(1);
      expect(Math.max(...watchedFrom.slice(1).map(Number))).toBeGreaterThan(listedAt);
    } finally {
      informer.stop();
    }
  }, 30_000);
});

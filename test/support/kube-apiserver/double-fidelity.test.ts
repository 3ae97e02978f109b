// Rules of the real API server the operator depends on, as the double enforces them: immutable Secrets, the fields of
// a StatefulSet and a Service's clusterIP that never change, and the 1 MiB limit on a ConfigMap's data.
import { AppsV1Api, CoreV1Api } from '@kubernetes/client-node';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startCluster, type TestCluster } from '../kubernetes/cluster.ts';

const NS = 'agents';
let cluster: TestCluster;
let core: CoreV1Api;
let apps: AppsV1Api;
const code = async (p: Promise<unknown>) =>
  p.then(
    () => 200,
    (e: { code?: number }) => e.code,
  );

beforeAll(async () => {
  cluster = await startCluster(NS);
  core = cluster.kubeConfig.makeApiClient(CoreV1Api);
  apps = cluster.kubeConfig.makeApiClient(AppsV1Api);
});
afterAll(async () => {
  await cluster?.close();
});

describe('the double refuses what the real server refuses', () => {
  it('keeps an immutable Secret as it is', async () => {
    const s = await core.createNamespacedSecret({
      namespace: NS,
      body: { metadata: { name: 'env' }, immutable: true, stringData: { A: '1' } },
    });
    expect(
      await code(
        core.replaceNamespacedSecret({
          name: 'env',
          namespace: NS,
          body: { ...s, data: { A: Buffer.from('2').toString('base64') } },
        }),
      ),
    ).toBe(422);
    expect(
      await code(
        core.replaceNamespacedSecret({
          name: 'env',
          namespace: NS,
          body: { ...s, metadata: { ...s.metadata, labels: { x: 'y' } } },
        }),
      ),
    ).toBe(200);
  });

  it('changes only the mutable fields of a StatefulSet', async () => {
    const labels = { app: 'db' };
    const sts = await apps.createNamespacedStatefulSet({
      namespace: NS,
      body: {
        metadata: { name: 'db' },
        spec: {
          serviceName: 'db',
          replicas: 1,
          selector: { matchLabels: labels },
          template: { metadata: { labels }, spec: { containers: [{ name: 'pg', image: 'postgres:16' }] } },
        },
      },
    });
    expect(
      await code(
        apps.replaceNamespacedStatefulSet({
          name: 'db',
          namespace: NS,
          body: { ...sts, spec: { ...sts.spec!, replicas: 2 } },
        }),
      ),
    ).toBe(200);
    const cur = await apps.readNamespacedStatefulSet({ name: 'db', namespace: NS });
    expect(
      await code(
        apps.replaceNamespacedStatefulSet({
          name: 'db',
          namespace: NS,
          body: { ...cur, spec: { ...cur.spec!, serviceName: 'other' } },
        }),
      ),
    ).toBe(422);
  });

  it('refuses a changed clusterIP and a ConfigMap over 1 MiB', async () => {
    const svc = await core.createNamespacedService({
      namespace: NS,
      body: { metadata: { name: 'svc' }, spec: { clusterIP: '10.0.0.10', ports: [{ port: 80 }] } },
    });
    expect(
      await code(
        core.replaceNamespacedService({
          name: 'svc',
          namespace: NS,
          body: { ...svc, spec: { ...svc.spec!, clusterIP: '10.0.0.11' } },
        }),
      ),
    ).toBe(422);
    expect(
      await code(
        core.createNamespacedConfigMap({
          namespace: NS,
          body: { metadata: { name: 'big' }, data: { log: 'x'.repeat(1024 * 1024 + 1) } },
        }),
      ),
    ).toBe(422);
    expect(
      await code(
        core.createNamespacedConfigMap({
          namespace: NS,
          body: { metadata: { name: 'ok' }, data: { log: 'x'.repeat(1000 * 1024) } },
        }),
      ),
    ).toBe(200);
  });
});

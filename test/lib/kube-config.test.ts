// The operator's, control plane's and listener's API clients (src/lib/kube-config.ts) keep their connections to
// the API server: the client library alone opens one per request (a TLS handshake each time).
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { CoreV1Api, KubeConfig } from '@kubernetes/client-node';
import { stringify } from 'yaml';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { loadKubeConfig } from '../../src/lib/kube-config.ts';
import { startKube } from '../control-plane/helpers/kube.ts';
import type { KubeApiServer } from '../support/kube-apiserver/server.ts';

let kube: Awaited<ReturnType<typeof startKube>>;

beforeAll(async () => {
  kube = await startKube({ tls: true });
});
afterAll(async () => {
  await kube.stop();
});

/** Connections the server saw opened while `work` ran. */
async function connectionsOpenedBy(work: () => Promise<unknown>): Promise<number> {
  const before = kube.server.connections;
  await work();
  return kube.server.connections - before;
}

async function sequentialReads(api: CoreV1Api, n: number): Promise<void> {
  for (let i = 0; i < n; i++) await api.readNamespace({ name: 'agents' });
}

/** A kubeconfig like the double's, its CA in a file of its own (as in-cluster, and as rotation replaces it). */
function kubeconfigWithCaFile(
  server: KubeApiServer,
  dir: string,
  user: Record<string, unknown>,
): { path: string; caFile: string } {
  const written = server.writeKubeconfig(join(dir, 'base'), 'agents');
  const base = new KubeConfig();
  base.loadFromFile(written);
  const cluster = base.getCurrentCluster()!;
  const caFile = join(dir, 'ca.crt');
  writeFileSync(caFile, Buffer.from(cluster.caData!, 'base64'));
  const path = join(dir, 'kubeconfig');
  writeFileSync(
    path,
    stringify({
      apiVersion: 'v1',
      kind: 'Config',
      clusters: [{ name: 'c', cluster: { server: cluster.server, 'certificate-authority': caFile } }],
      users: [{ name: 'u', user }],
      contexts: [{ name: 'c', context: { cluster: 'c', user: 'u', namespace: 'agents' } }],
      'current-context': 'c',
    }),
  );
  return { path, caFile };
}

describe('API clients of loadKubeConfig', () => {
  // A request sent right as the previous response completes may find its connection not yet back in the pool and
  // open a second one (undici releases it a moment later); from then on the two are reused.
  it('send 20 requests in a row over one or two connections, where the library alone opens 20', async () => {
    const pooled = loadKubeConfig(kube.kubeconfig).makeApiClient(CoreV1Api);
    expect(await connectionsOpenedBy(() => sequentialReads(pooled, 20))).toBeLessThanOrEqual(2);

    const plain = new KubeConfig();
    plain.loadFromFile(kube.kubeconfig);
    expect(await connectionsOpenedBy(() => sequentialReads(plain.makeApiClient(CoreV1Api), 20))).toBe(20);
  });

  it('share the connections between every API client of one KubeConfig, and answer in parallel', async () => {
    const kc = loadKubeConfig(kube.kubeconfig);
    const a = kc.makeApiClient(CoreV1Api);
    const b = kc.makeApiClient(CoreV1Api);
    const opened = await connectionsOpenedBy(async () => {
      await sequentialReads(a, 3);
      const names = await Promise.all(
        Array.from({ length: 8 }, (_, i) => (i % 2 ? a : b).readNamespace({ name: 'agents' })),
      );
      expect(names.map((n) => n.metadata?.name)).toEqual(Array(8).fill('agents'));
      await sequentialReads(b, 3);
    });
    // One or two for the reads in a row, more only for the requests in flight at once.
    expect(opened).toBeGreaterThanOrEqual(1);
    expect(opened).toBeLessThanOrEqual(10);
    const open = await kube.server.openConnections();
    expect(await connectionsOpenedBy(() => sequentialReads(b, 10))).toBe(0);
    expect(await kube.server.openConnections()).toBe(open);
  });

  it('open new connections once the CA file changes, and close the ones made with the old CA', async () => {
    // A server of its own: no other client's connections open or close meanwhile.
    const own = await startKube({ tls: true });
    const dir = mkdtempSync(join(tmpdir(), 'ap-kc-'));
    try {
      const { path, caFile } = kubeconfigWithCaFile(own.server, dir, { token: own.server.token });
      const api = loadKubeConfig(path).makeApiClient(CoreV1Api);
      await sequentialReads(api, 10);
      const first = own.server.connections;
      expect(first).toBeGreaterThanOrEqual(1);
      expect(first).toBeLessThanOrEqual(2);
      expect(await own.server.openConnections()).toBe(first);
      // The same certificate re-issued in a new file (PEM allows text around the block): another TLS input.
      writeFileSync(caFile, `rotated CA bundle\n${readFileSync(caFile, 'utf8')}`);
      await sequentialReads(api, 10);
      const rotated = own.server.connections - first;
      expect(rotated).toBeGreaterThanOrEqual(1);
      expect(rotated).toBeLessThanOrEqual(2);
      // The connections made with the old CA are closed, not left open beside the new ones.
      await expect.poll(() => own.server.openConnections()).toBe(rotated);
    } finally {
      rmSync(dir, { recursive: true, force: true });
      await own.stop();
    }
  });

  it('pool the requests of an in-cluster identity (a token file, read again as the kubelet rotates it)', async () => {
    const dir = mkdtempSync(join(tmpdir(), 'ap-kc-'));
    try {
      const tokenFile = join(dir, 'token');
      writeFileSync(tokenFile, kube.server.token);
      // What KubeConfig.loadFromCluster makes of a pod's service account: the CA file and a token-file provider.
      const { path } = kubeconfigWithCaFile(kube.server, dir, {
        'auth-provider': { name: 'tokenFile', config: { tokenFile } },
      });
      const kc = loadKubeConfig(path);
      expect(kc.getCurrentUser()?.authProvider?.config?.tokenFile).toBe(tokenFile);
      const opened = await connectionsOpenedBy(() => sequentialReads(kc.makeApiClient(CoreV1Api), 10));
      expect(opened).toBeGreaterThanOrEqual(1);
      expect(opened).toBeLessThanOrEqual(2);
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  });

  it("leave a user whose exec plugin answers per request to the library's own connections", async () => {
    const dir = mkdtempSync(join(tmpdir(), 'ap-kc-'));
    try {
      const credential = JSON.stringify({
        apiVersion: 'client.authentication.k8s.io/v1beta1',
        kind: 'ExecCredential',
        status: { token: kube.server.token },
      });
      const { path } = kubeconfigWithCaFile(kube.server, dir, {
        exec: {
          apiVersion: 'client.authentication.k8s.io/v1beta1',
          command: process.execPath,
          args: ['-e', `process.stdout.write(${JSON.stringify(credential)})`],
          interactiveMode: 'Never',
        },
      });
      const api = loadKubeConfig(path).makeApiClient(CoreV1Api);
      expect(await connectionsOpenedBy(() => sequentialReads(api, 4))).toBe(4);
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  });
});

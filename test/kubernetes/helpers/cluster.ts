// A Kubernetes API-server double with the CRDs and the built-in kinds, and a KubeConfig for it.
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { KubeConfig } from '@kubernetes/client-node';
import { KubeApiServer } from '../../support/kube-apiserver/server.ts';
import { registerBuiltinKinds } from '../../support/kube-apiserver/builtins.ts';

export type TestCluster = { api: KubeApiServer; kubeConfig: KubeConfig; kubeconfigPath: string; close(): Promise<void> };

export async function startCluster(namespace = 'agents', opts: { historyLimit?: number } = {}): Promise<TestCluster> {
  const api = new KubeApiServer({ crdDir: join(import.meta.dirname, '../../../crds'), ...opts });
  registerBuiltinKinds(api.registry);
  await api.start();
  const dir = mkdtempSync(join(tmpdir(), 'ap-k8s-'));
  const kubeconfigPath = api.writeKubeconfig(join(dir, 'kubeconfig'), namespace);
  const kubeConfig = new KubeConfig();
  kubeConfig.loadFromFile(kubeconfigPath);
  return {
    api,
    kubeConfig,
    kubeconfigPath,
    async close() {
      await api.stop();
      rmSync(dir, { recursive: true, force: true });
    },
  };
}

/** Polls `check` until it returns a truthy value (or throws after `timeoutMs`, naming what was awaited). */
export async function until<T>(what: string, check: () => T | Promise<T>, timeoutMs = 15_000): Promise<NonNullable<T>> {
  const deadline = Date.now() + timeoutMs;
  let last: unknown;
  for (;;) {
    try {
      const v = await check();
      if (v) return v as NonNullable<T>;
    } catch (err) {
      last = err;
    }
    if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}${last ? `: ${String(last)}` : ''}`);
    await new Promise((r) => setTimeout(r, 50));
  }
}

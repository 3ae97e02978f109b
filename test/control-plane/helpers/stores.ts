// Both control-plane stores, opened fresh for one suite: the embedded store in a temp folder (`dir`), the kubernetes
// store (namespace "tenants" unless named) on an API-server double of its own (`kubeconfig`). For describe.each over
// Object.keys(...), or over storeEntries(...) for [name, open] pairs.
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { openEmbeddedPlatformState } from '../../../src/state/embedded/index.ts';
import { loadKubeConfig, openKubernetesPlatformState } from '../../../src/state/kubernetes/index.ts';
import type { PlatformState } from '../../../src/state/types.ts';
import { silentLogger } from '../../../src/lib/logger.ts';
import { startKube } from './kube.ts';

export type OpenedStore = { store: PlatformState; dir?: string; kubeconfig?: string; close: () => Promise<void> };

export function freshStores(
  tmpPrefix: string,
  namespace = 'tenants',
): Record<'embedded' | 'kubernetes', () => Promise<OpenedStore>> {
  return {
    embedded: async () => {
      const dir = mkdtempSync(join(tmpdir(), tmpPrefix));
      const store = openEmbeddedPlatformState({ dataDir: dir });
      return {
        store,
        dir,
        close: async () => {
          await store.close();
          rmSync(dir, { recursive: true, force: true });
        },
      };
    },
    kubernetes: async () => {
      const kube = await startKube();
      const store = openKubernetesPlatformState({
        kubeConfig: loadKubeConfig(kube.kubeconfig),
        namespace,
        logger: silentLogger(),
      });
      return {
        store,
        kubeconfig: kube.kubeconfig,
        close: async () => {
          await store.close();
          await kube.stop();
        },
      };
    },
  };
}

/** freshStores as [name, open] pairs, for describe.each(...)('... (%s store)', (name, open) => ...). */
export function storeEntries(tmpPrefix: string, namespace?: string): [string, () => Promise<OpenedStore>][] {
  return Object.entries(freshStores(tmpPrefix, namespace));
}

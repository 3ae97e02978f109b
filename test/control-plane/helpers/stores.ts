// Both control-plane stores, opened fresh for one suite: the embedded store in a temp folder, the kubernetes store
// (namespace "tenants") on an API-server double of its own. For describe.each over Object.keys(...).
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { openEmbeddedPlatformState } from '../../../src/state/embedded/index.ts';
import { loadKubeConfig, openKubernetesPlatformState } from '../../../src/state/kubernetes/index.ts';
import type { PlatformState } from '../../../src/state/types.ts';
import { silentLogger } from '../../../src/lib/logger.ts';
import { startKube } from './kube.ts';

export type OpenedStore = { store: PlatformState; close: () => Promise<void> };

export function freshStores(tmpPrefix: string): Record<'embedded' | 'kubernetes', () => Promise<OpenedStore>> {
  return {
    embedded: async () => {
      const dir = mkdtempSync(join(tmpdir(), tmpPrefix));
      const store = openEmbeddedPlatformState({ dataDir: dir });
      return {
        store,
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
        namespace: 'tenants',
        logger: silentLogger(),
      });
      return {
        store,
        close: async () => {
          await store.close();
          await kube.stop();
        },
      };
    },
  };
}

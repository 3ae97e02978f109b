// Opens the configured store adapter. The kubernetes adapter is loaded only when asked for.
import type { StoreConfig } from '../config.ts';
import type { Logger } from '../../lib/logger.ts';
import { openEmbeddedStore } from './embedded/index.ts';
import type { ControlPlaneStore } from './types.ts';

export async function openControlPlaneStore(config: StoreConfig, logger: Logger): Promise<ControlPlaneStore> {
  if (config.store === 'kubernetes') {
    const { openKubernetesStore, loadKubeConfig } = await import('./kubernetes/index.ts');
    return openKubernetesStore({ kubeConfig: loadKubeConfig(config.kubeconfig), namespace: config.namespace, logger });
  }
  return openEmbeddedStore({ dataDir: config.dataDir, namespace: config.namespace });
}

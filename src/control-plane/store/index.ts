// Opens the configured store adapter. The kubernetes adapter is loaded only when asked for.
import type { StoreConfig } from '../config.ts';
import { NotFoundError } from '../../lib/errors.ts';
import type { Logger } from '../../lib/logger.ts';
import { openEmbeddedStore } from './embedded/index.ts';
import type { ControlPlaneStore } from './types.ts';

export async function openControlPlaneStore(config: StoreConfig, logger: Logger): Promise<ControlPlaneStore> {
  if (config.store === 'kubernetes') {
    const { openKubernetesStore, loadKubeConfig } = await import('./kubernetes/index.ts');
    const store = openKubernetesStore({ kubeConfig: loadKubeConfig(config.kubeconfig), namespace: config.namespace, logger });
    // Fail at start with a useful message instead of 500s on every request.
    try {
      await store.list('AgentDeployment', config.namespace);
    } catch (err) {
      await store.close();
      if (err instanceof NotFoundError) {
        throw new Error('the AgentDeployment custom resource is not installed in this cluster: kubectl apply -f crds/');
      }
      throw err;
    }
    return store;
  }
  return openEmbeddedStore({ dataDir: config.dataDir, namespace: config.namespace });
}

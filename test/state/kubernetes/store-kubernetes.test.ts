import { loadKubeConfig, openKubernetesPlatformState } from '../../../src/state/kubernetes/index.ts';
import { silentLogger } from '../../../src/lib/logger.ts';
import { storeContract } from '../../control-plane/helpers/store-contract.ts';
import { startKube } from '../../control-plane/helpers/kube.ts';

storeContract('kubernetes (client-node against the API-server double)', async () => {
  const kube = await startKube({ historyLimit: 50 });
  const store = openKubernetesPlatformState({
    kubeConfig: loadKubeConfig(kube.kubeconfig),
    namespace: 'agents',
    logger: silentLogger(),
  });
  return {
    store,
    namespace: 'agents',
    otherNamespace: 'other',
    close: async () => {
      await store.close();
      await kube.stop();
    },
  };
});

// Secret sets in the cluster: one Secret each, owned by the object it belongs to (garbage-collected with it).
import type { V1Secret } from '@kubernetes/client-node';
import { NotFoundError } from '../../lib/errors.ts';
import { API_VERSION, LABEL_DEPLOYMENT } from '../../resources/index.ts';
import type { Kind } from '../resources.ts';
import type { SecretStore } from '../secrets.ts';
import { b64, call, unb64, type KubeContext } from './client.ts';

export function kubernetesSecrets(k: KubeContext): SecretStore {
  return {
    async putSecrets(
      namespace: string,
      name: string,
      owner: { kind: Kind; name: string; uid: string },
      values: Record<string, string>,
    ): Promise<void> {
      const body: V1Secret = {
        apiVersion: 'v1',
        kind: 'Secret',
        type: 'Opaque',
        metadata: {
          name,
          namespace,
          labels: owner.kind === 'AgentDeployment' ? { [LABEL_DEPLOYMENT]: owner.name } : {},
          ownerReferences: [
            { apiVersion: API_VERSION, kind: owner.kind, name: owner.name, uid: owner.uid, blockOwnerDeletion: true },
          ],
        },
        data: Object.fromEntries(Object.entries(values).map(([k, v]) => [k, b64(v)])),
      };
      await call(() => k.core.createNamespacedSecret({ namespace, body }));
    },

    async getSecrets(namespace: string, name: string): Promise<Record<string, string>> {
      const s = await call(() => k.core.readNamespacedSecret({ namespace, name }));
      return Object.fromEntries(Object.entries(s.data ?? {}).map(([k, v]) => [k, unb64(v)]));
    },

    async secretNames(namespace: string, name: string): Promise<string[]> {
      const s = await call(() => k.core.readNamespacedSecret({ namespace, name }));
      return Object.keys(s.data ?? {});
    },

    async deleteSecrets(namespace: string, name: string): Promise<void> {
      try {
        await call(() => k.core.deleteNamespacedSecret({ namespace, name }));
      } catch (err) {
        if (!(err instanceof NotFoundError)) throw err;
      }
    },
  };
}

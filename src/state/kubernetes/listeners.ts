// Listener records in the cluster: one ConfigMap each, named by (tenant, compute id) so creating it is the
// uniqueness check.
import type { V1ConfigMap } from '@kubernetes/client-node';
import { createHash } from 'node:crypto';
import { NotFoundError } from '../../lib/errors.ts';
import { isLabelValue, LABEL_TENANT } from '../../resources/index.ts';
import { AlreadyExistsError, StaleResourceVersionError } from '../errors.ts';
import type { ListenerRecord, ListenerStore } from '../listeners.ts';
import { call, type KubeContext } from './client.ts';

const LABEL_LISTENER_ID = 'agentplane.dev/listener-id';

export function kubernetesListeners(k: KubeContext): ListenerStore {
  function listenerMapName(tenant: string, computeId: string): string {
    const digest = createHash('sha256')
      .update(JSON.stringify([tenant, computeId]))
      .digest('hex')
      .slice(0, 40);
    return `agentplane-listener-${digest}`;
  }

  async function listenerMap(tenant: string, id: string): Promise<{ cm: V1ConfigMap; r: ListenerRecord } | undefined> {
    if (!isLabelValue(id)) return undefined;
    const list = await call(() =>
      k.core.listNamespacedConfigMap({
        namespace: k.namespace,
        labelSelector: `${LABEL_LISTENER_ID}=${id},${LABEL_TENANT}=${tenant}`,
      }),
    );
    for (const cm of list.items) {
      const r = listenerFromMap(cm);
      if (r && r.id === id && r.tenant === tenant && cm.metadata?.name === listenerMapName(tenant, r.computeId))
        return { cm, r };
    }
    return undefined;
  }

  return {
    async createListener(r: ListenerRecord): Promise<void> {
      const body: V1ConfigMap = {
        apiVersion: 'v1',
        kind: 'ConfigMap',
        metadata: {
          name: listenerMapName(r.tenant, r.computeId),
          namespace: k.namespace,
          labels: { [LABEL_LISTENER_ID]: r.id, [LABEL_TENANT]: r.tenant, 'app.kubernetes.io/managed-by': 'agentplane' },
        },
        data: { listener: JSON.stringify(r) },
      };
      try {
        await call(() => k.core.createNamespacedConfigMap({ namespace: k.namespace, body }));
      } catch (err) {
        if (err instanceof AlreadyExistsError) {
          throw new AlreadyExistsError(`A listener with compute_id "${r.computeId}" already exists in this workspace.`);
        }
        throw err;
      }
    },

    async getListener(tenant: string, id: string): Promise<ListenerRecord | undefined> {
      return (await listenerMap(tenant, id))?.r;
    },

    async listListeners(tenant: string): Promise<ListenerRecord[]> {
      const list = await call(() =>
        k.core.listNamespacedConfigMap({
          namespace: k.namespace,
          labelSelector: `${LABEL_LISTENER_ID},${LABEL_TENANT}=${tenant}`,
        }),
      );
      return list.items
        .map((cm) => ({ cm, r: listenerFromMap(cm) }))
        .filter(
          (x): x is { cm: V1ConfigMap; r: ListenerRecord } =>
            x.r !== undefined &&
            x.r.tenant === tenant &&
            x.cm.metadata?.name === listenerMapName(tenant, x.r.computeId),
        )
        .map((x) => x.r)
        .sort((a, b) => a.createdAt.localeCompare(b.createdAt) || a.id.localeCompare(b.id));
    },

    async updateListener(r: ListenerRecord): Promise<void> {
      for (let attempt = 0; ; attempt++) {
        const found = await listenerMap(r.tenant, r.id);
        if (!found) throw new NotFoundError(`Listener ID ${r.id} not found.`);
        const next: ListenerRecord = { ...r, computeId: found.r.computeId, computeType: found.r.computeType };
        try {
          await call(() =>
            k.core.replaceNamespacedConfigMap({
              namespace: k.namespace,
              name: found.cm.metadata!.name!,
              body: { ...found.cm, data: { listener: JSON.stringify(next) } },
            }),
          );
          return;
        } catch (err) {
          if (!(err instanceof StaleResourceVersionError) || attempt >= 5) throw err;
        }
      }
    },

    async deleteListener(tenant: string, id: string): Promise<boolean> {
      const found = await listenerMap(tenant, id);
      if (!found) return false;
      try {
        await call(() =>
          k.core.deleteNamespacedConfigMap({
            namespace: k.namespace,
            name: found.cm.metadata!.name!,
            body: { preconditions: { uid: found.cm.metadata!.uid } },
          }),
        );
        return true;
      } catch (err) {
        if (err instanceof NotFoundError) return false;
        throw err;
      }
    },
  };
}

function listenerFromMap(cm: V1ConfigMap): ListenerRecord | undefined {
  try {
    const r = JSON.parse(cm.data?.listener ?? '') as ListenerRecord;
    return typeof r.id === 'string' && typeof r.tenant === 'string' && typeof r.computeId === 'string' ? r : undefined;
  } catch {
    return undefined;
  }
}

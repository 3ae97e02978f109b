// API keys in the cluster: one Secret per key, named by its hash so lookup is a single GET. Also the per-tenant key
// hashes for the agents: a Secret each, mounted by agent pods (the kubelet refreshes it).
import type { V1Secret } from '@kubernetes/client-node';
import { NotFoundError } from '../../lib/errors.ts';
import { LABEL_TENANT, tenantKeysSecretName } from '../../resources/index.ts';
import type { ApiKeyRecord, ApiKeyStore, TenantKeySink } from '../api-keys.ts';
import { AlreadyExistsError } from '../errors.ts';
import { b64, call, unb64, type KubeContext } from './client.ts';

const LABEL_API_KEY = 'agentplane.dev/api-key';

export function kubernetesApiKeys(
  k: KubeContext,
): ApiKeyStore & { tenantKeySink(namespaceFor?: (tenant: string) => string): TenantKeySink } {
  function keySecretName(hash: string): string {
    return `agentplane-apikey-${hash.slice(0, 40)}`;
  }

  function keyFromSecret(s: V1Secret): (ApiKeyRecord & { hash: string; secretName: string }) | undefined {
    const d = Object.fromEntries(Object.entries(s.data ?? {}).map(([k, v]) => [k, unb64(v)]));
    if (!d.hash || !s.metadata?.name) return undefined;
    let tenants: string[];
    try {
      tenants = JSON.parse(d.tenants ?? '[]') as string[];
    } catch {
      return undefined; // not one of ours
    }
    return {
      id: d.id ?? '',
      hash: d.hash,
      name: d.name ?? '',
      tenants,
      createdAt: d.createdAt ?? '',
      ...(d.listenerId ? { listenerId: d.listenerId } : {}),
      secretName: s.metadata.name,
    };
  }

  async function keySecrets(): Promise<(ApiKeyRecord & { hash: string; secretName: string })[]> {
    const list = await call(() =>
      k.core.listNamespacedSecret({ namespace: k.namespace, labelSelector: `${LABEL_API_KEY}=true` }),
    );
    return list.items
      .map((s) => keyFromSecret(s))
      .filter((k): k is NonNullable<typeof k> => k !== undefined && k.secretName === keySecretName(k.hash))
      .sort((a, b) => a.createdAt.localeCompare(b.createdAt) || a.id.localeCompare(b.id));
  }

  return {
    async putApiKey(record: ApiKeyRecord, keyHash: string): Promise<void> {
      const body: V1Secret = {
        apiVersion: 'v1',
        kind: 'Secret',
        type: 'Opaque',
        metadata: { name: keySecretName(keyHash), namespace: k.namespace, labels: { [LABEL_API_KEY]: 'true' } },
        data: {
          hash: b64(keyHash),
          id: b64(record.id),
          name: b64(record.name),
          tenants: b64(JSON.stringify(record.tenants)),
          createdAt: b64(record.createdAt),
          ...(record.listenerId ? { listenerId: b64(record.listenerId) } : {}),
        },
      };
      await call(() => k.core.createNamespacedSecret({ namespace: k.namespace, body }));
    },

    async findApiKey(keyHash: string): Promise<ApiKeyRecord | undefined> {
      let s: V1Secret;
      try {
        s = await call(() => k.core.readNamespacedSecret({ namespace: k.namespace, name: keySecretName(keyHash) }));
      } catch (err) {
        if (err instanceof NotFoundError) return undefined;
        throw err;
      }
      const key = keyFromSecret(s);
      return key && key.hash === keyHash
        ? {
            id: key.id,
            name: key.name,
            tenants: key.tenants,
            createdAt: key.createdAt,
            ...(key.listenerId ? { listenerId: key.listenerId } : {}),
          }
        : undefined;
    },

    async listApiKeys(): Promise<(ApiKeyRecord & { hash: string })[]> {
      return (await keySecrets()).map(({ secretName: _s, ...k }) => k);
    },

    async deleteApiKey(id: string): Promise<boolean> {
      const found = (await keySecrets()).find((k) => k.id === id);
      if (!found) return false;
      try {
        await call(() => k.core.deleteNamespacedSecret({ namespace: k.namespace, name: found.secretName }));
        return true;
      } catch (err) {
        if (err instanceof NotFoundError) return false;
        throw err;
      }
    },

    tenantKeySink(namespaceFor: (tenant: string) => string = () => k.namespace): TenantKeySink {
      return {
        write: async (tenant, hashes) => {
          const name = tenantKeysSecretName(tenant);
          const namespace = namespaceFor(tenant);
          const data = { 'keys.json': b64(`${JSON.stringify({ hashes })}\n`) };
          const metadata = {
            name,
            namespace,
            labels: { [LABEL_TENANT]: tenant, 'app.kubernetes.io/managed-by': 'agentplane' },
          };
          try {
            await call(() =>
              k.core.createNamespacedSecret({
                namespace,
                body: { apiVersion: 'v1', kind: 'Secret', type: 'Opaque', metadata, data },
              }),
            );
            return;
          } catch (err) {
            if (!(err instanceof AlreadyExistsError)) throw err;
          }
          const current = await call(() => k.core.readNamespacedSecret({ namespace, name }));
          if (current.data?.['keys.json'] === data['keys.json']) return;
          await call(() =>
            k.core.replaceNamespacedSecret({
              namespace,
              name,
              body: {
                ...current,
                metadata: { ...current.metadata, labels: { ...current.metadata?.labels, ...metadata.labels } },
                data,
              },
            }),
          );
        },
      };
    },
  };
}

// Integrations in the cluster: one Secret per integration, labelled with its tenant; the token is a data key of it.
import type { V1Secret } from '@kubernetes/client-node';
import { NotFoundError } from '../../lib/errors.ts';
import { LABEL_TENANT } from '../../resources/index.ts';
import { AlreadyExistsError } from '../errors.ts';
import { integrationDetails, type IntegrationRecord, type IntegrationStore } from '../integrations.ts';
import { b64, call, unb64, type KubeContext } from './client.ts';

const LABEL_INTEGRATION = 'agentplane.dev/integration';
const LABEL_GITHUB_INSTALLATION = 'agentplane.dev/github-installation';

export function kubernetesIntegrations(k: KubeContext): IntegrationStore {
  function integrationSecretName(id: string): string {
    return `agentplane-integration-${id}`;
  }

  /** The integration's Secret when it exists and belongs to `tenant` (label and data agree). */
  async function integrationSecret(tenant: string, id: string): Promise<V1Secret | undefined> {
    let s: V1Secret;
    try {
      s = await call(() => k.core.readNamespacedSecret({ namespace: k.namespace, name: integrationSecretName(id) }));
    } catch (err) {
      if (err instanceof NotFoundError) return undefined;
      throw err;
    }
    const r = integrationFromSecret(s);
    return r && r.tenant === tenant && r.id === id && s.metadata?.labels?.[LABEL_TENANT] === tenant ? s : undefined;
  }

  const store: IntegrationStore = {
    async putIntegration(r: IntegrationRecord, token: string): Promise<void> {
      const body: V1Secret = {
        apiVersion: 'v1',
        kind: 'Secret',
        type: 'Opaque',
        metadata: {
          name: integrationSecretName(r.id),
          namespace: k.namespace,
          labels: {
            [LABEL_INTEGRATION]: 'true',
            [LABEL_TENANT]: r.tenant,
            'app.kubernetes.io/managed-by': 'agentplane',
          },
        },
        data: {
          id: b64(r.id),
          tenant: b64(r.tenant),
          name: b64(r.name),
          host: b64(r.host),
          ...(r.username === undefined ? {} : { username: b64(r.username) }),
          createdAt: b64(r.createdAt),
          details: b64(JSON.stringify(integrationDetails(r))),
          token: b64(token),
        },
      };
      if (r.installationId !== undefined) {
        body.metadata!.labels![LABEL_GITHUB_INSTALLATION] = String(r.installationId);
        if ((await store.findIntegrations({ installationId: r.installationId })).length)
          throw new AlreadyExistsError(`GitHub installation ${r.installationId} is already an integration`);
      }
      await call(() => k.core.createNamespacedSecret({ namespace: k.namespace, body }));
    },

    async findIntegrations(where: { id?: string; installationId?: number }): Promise<IntegrationRecord[]> {
      if (where.id !== undefined) {
        try {
          const s = await call(() =>
            k.core.readNamespacedSecret({ namespace: k.namespace, name: integrationSecretName(where.id!) }),
          );
          const r = integrationFromSecret(s);
          return r && r.id === where.id && s.metadata?.labels?.[LABEL_TENANT] === r.tenant ? [r] : [];
        } catch (err) {
          if (err instanceof NotFoundError) return [];
          throw err;
        }
      }
      if (where.installationId === undefined) return [];
      const list = await call(() =>
        k.core.listNamespacedSecret({
          namespace: k.namespace,
          labelSelector: `${LABEL_INTEGRATION}=true,${LABEL_GITHUB_INSTALLATION}=${where.installationId}`,
        }),
      );
      return list.items
        .filter((s) => s.metadata?.labels?.[LABEL_TENANT])
        .map(integrationFromSecret)
        .filter((r): r is IntegrationRecord => r !== undefined && r.installationId === where.installationId);
    },

    async listIntegrations(tenant: string): Promise<IntegrationRecord[]> {
      const list = await call(() =>
        k.core.listNamespacedSecret({
          namespace: k.namespace,
          labelSelector: `${LABEL_INTEGRATION}=true,${LABEL_TENANT}=${tenant}`,
        }),
      );
      return list.items
        .map(integrationFromSecret)
        .filter((r): r is IntegrationRecord => r !== undefined && r.tenant === tenant)
        .sort((a, b) => a.createdAt.localeCompare(b.createdAt) || a.id.localeCompare(b.id));
    },

    async getIntegration(tenant: string, id: string): Promise<IntegrationRecord | undefined> {
      const s = await integrationSecret(tenant, id);
      return s && integrationFromSecret(s);
    },

    async integrationToken(tenant: string, id: string): Promise<string | undefined> {
      const token = (await integrationSecret(tenant, id))?.data?.token;
      return token === undefined ? undefined : unb64(token);
    },

    async deleteIntegration(tenant: string, id: string): Promise<boolean> {
      const s = await integrationSecret(tenant, id);
      if (!s?.metadata?.uid) return false;
      try {
        await call(() =>
          k.core.deleteNamespacedSecret({
            namespace: k.namespace,
            name: integrationSecretName(id),
            body: { preconditions: { uid: s.metadata!.uid } },
          }),
        );
        return true;
      } catch (err) {
        if (err instanceof NotFoundError) return false;
        throw err;
      }
    },
  };
  return store;
}

function integrationFromSecret(s: V1Secret): IntegrationRecord | undefined {
  const d = Object.fromEntries(Object.entries(s.data ?? {}).map(([k, v]) => [k, unb64(v)]));
  if (!d.id || !d.tenant || !d.host) return undefined;
  return {
    id: d.id,
    tenant: d.tenant,
    name: d.name ?? '',
    host: d.host,
    ...(d.username === undefined ? {} : { username: d.username }),
    createdAt: d.createdAt ?? '',
    ...(d.details ? integrationDetails(JSON.parse(d.details) as IntegrationRecord) : {}),
  };
}

// References of deployments to cluster objects (service accounts, secrets): usable only when labelled with the tenant.
import { ApiException } from '@kubernetes/client-node';
import { NotFoundError } from '../../lib/errors.ts';
import { LABEL_TENANT } from '../../resources/index.ts';
import type { PlatformState, TenantReferences } from '../types.ts';
import { call, type KubeContext } from './client.ts';

export function kubernetesTenantReferences(k: KubeContext): Required<Pick<PlatformState, 'checkTenantReferences'>> {
  return {
    async checkTenantReferences(namespace: string, tenant: string, refs: TenantReferences) {
      const refused: { kind: 'ServiceAccount' | 'Secret'; name: string }[] = [];
      const labelled = async (kind: 'ServiceAccount' | 'Secret', name: string) => {
        try {
          const obj =
            kind === 'Secret'
              ? await call(() => k.core.readNamespacedSecret({ namespace, name }))
              : await call(() => k.core.readNamespacedServiceAccount({ namespace, name }));
          if (obj.metadata?.labels?.[LABEL_TENANT] !== tenant) refused.push({ kind, name });
        } catch (err) {
          // Elsewhere than its own namespace (a tenant's) the control plane may read only once the operator has made
          // the namespace and bound it there: until then the object cannot be the tenant's either.
          const forbidden = err instanceof ApiException && err.code === 403 && namespace !== k.namespace;
          if (!(err instanceof NotFoundError) && !forbidden) throw err;
          refused.push({ kind, name });
        }
      };
      await Promise.all([
        ...[...new Set(refs.serviceAccounts)].map((n) => labelled('ServiceAccount', n)),
        ...[...new Set(refs.secrets)].map((n) => labelled('Secret', n)),
      ]);
      return refused;
    },
  };
}

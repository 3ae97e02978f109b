// A namespace per tenant (optional): its name, the Namespace object, and the RoleBinding that lets the control
// plane keep the tenant's data-plane keys Secret there (the agents mount it from their own namespace).
import type { V1Namespace, V1RoleBinding } from '@kubernetes/client-node';
import { isLabelValue, LABEL_TENANT } from '../../../resources/names.ts';

const MANAGED = { 'app.kubernetes.io/part-of': 'agentplane', 'app.kubernetes.io/managed-by': 'agentplane-operator' };

export { tenantNamespaceName } from '../../../resources/names.ts';

export function makeTenantNamespace(name: string, tenantId: string): V1Namespace {
  return {
    apiVersion: 'v1',
    kind: 'Namespace',
    metadata: {
      name,
      labels: {
        ...MANAGED,
        ...(isLabelValue(tenantId) ? { [LABEL_TENANT]: tenantId } : {}),
      },
    },
  };
}

/** Binds `writer` (the control plane's ServiceAccount) to `role` (Secrets only) in the tenant namespace. */
export function makeKeysWriterBinding(
  namespace: string,
  writer: { namespace: string; name: string },
  role: string,
): V1RoleBinding {
  return {
    apiVersion: 'rbac.authorization.k8s.io/v1',
    kind: 'RoleBinding',
    metadata: { name: 'agentplane-tenant-keys', namespace, labels: { ...MANAGED } },
    roleRef: { apiGroup: 'rbac.authorization.k8s.io', kind: 'ClusterRole', name: role },
    subjects: [{ kind: 'ServiceAccount', name: writer.name, namespace: writer.namespace }],
  };
}

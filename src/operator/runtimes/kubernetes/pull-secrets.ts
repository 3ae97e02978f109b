// Copies of the operator's image pull secrets in tenant namespaces: a pod can only use a pull secret of its own
// namespace, and agents of a namespace per tenant pull from the same registry as everyone's. A copy carries the
// source's type and data only, and a label that marks it as ours, so copies no longer configured can be found and
// removed (and tenants cannot reference them in secret_references).
import type { V1Secret } from '@kubernetes/client-node';

export const LABEL_PULL_SECRET_COPY = 'agentplane.dev/pull-secret-copy';
const ANNOTATION_COPIED_FROM = 'agentplane.dev/copied-from';

export function makePullSecretCopy(source: V1Secret, namespace: string): V1Secret {
  const from = `${source.metadata!.namespace}/${source.metadata!.name}`;
  return {
    apiVersion: 'v1',
    kind: 'Secret',
    metadata: {
      name: source.metadata!.name!,
      namespace,
      labels: {
        'app.kubernetes.io/part-of': 'agentplane',
        'app.kubernetes.io/managed-by': 'agentplane-operator',
        [LABEL_PULL_SECRET_COPY]: 'true',
      },
      annotations: { [ANNOTATION_COPIED_FROM]: from },
    },
    type: source.type ?? 'Opaque',
    data: { ...(source.data ?? {}) },
  };
}

// Labels on every child: the recommended app.kubernetes.io set (what tools group by) and agentplane.dev ones
// (what the operator selects by). Selectors use only labels that never change for the life of a deployment.
import { isLabelValue, LABEL_DEPLOYMENT, LABEL_DEPLOYMENT_ID, LABEL_TENANT } from '../../../resources/names.ts';
import type { OwnerReference } from '../../../resources/meta.ts';

export const LABEL_REVISION = 'agentplane.dev/revision';
const LABEL_COMPONENT = 'app.kubernetes.io/component';
export const LABEL_INSTANCE = 'app.kubernetes.io/instance';
export const ANNOTATION_REVISION = 'agentplane.dev/revision';

/** Label an admin puts on ServiceAccounts and Secrets a tenant's agents may use (value: the tenant id). */
export { LABEL_TENANT };
/** Annotation on a tenant's ServiceAccount asking for its API token to be mounted into agent pods. */
export const ANNOTATION_AUTOMOUNT_TOKEN = 'agentplane.dev/automount-token';

export { tenantKeysSecretName } from '../../../resources/names.ts';

export type Component = 'server' | 'build' | 'database';

/** The AgentDeployment a child belongs to. */
export type Target = {
  namespace: string;
  /** AgentDeployment object name (`ag-<uuid>`). */
  name: string;
  deploymentId: string;
  tenantId: string;
  /**
   * Owner reference to the AgentDeployment: deleting it garbage-collects every child. None for children in a
   * tenant namespace (owner references cannot cross namespaces; the runtime deletes those by label).
   */
  owner?: OwnerReference;
  /** The AgentDeployment is being deleted (the runtime then starts nothing new for it). */
  deleting?: boolean;
};

const NAMES: Record<Component, string> = { server: 'agent-server', build: 'agent-build', database: 'postgres' };

export function selectorLabels(target: Target, component: Component): Record<string, string> {
  return { [LABEL_INSTANCE]: target.name, [LABEL_COMPONENT]: component };
}

export function childLabels(target: Target, component: Component): Record<string, string> {
  return {
    'app.kubernetes.io/name': NAMES[component],
    ...selectorLabels(target, component),
    'app.kubernetes.io/part-of': 'agentplane',
    'app.kubernetes.io/managed-by': 'agentplane-operator',
    [LABEL_DEPLOYMENT]: target.name,
    [LABEL_DEPLOYMENT_ID]: target.deploymentId,
    // Tenant ids are API strings; only label with them when Kubernetes accepts the value.
    ...(isLabelValue(target.tenantId) ? { [LABEL_TENANT]: target.tenantId } : {}),
  };
}

export function childMeta(target: Target, name: string, component: Component, extra: Record<string, string> = {}) {
  return {
    name,
    namespace: target.namespace,
    labels: { ...childLabels(target, component), ...extra },
    ...(target.owner ? { ownerReferences: [{ ...target.owner }] } : {}),
  };
}

/** Whether `obj` is a child the operator made for `target` (its labels say so): only those are ever removed. */
export function isChildOf(obj: { metadata?: { labels?: Record<string, string> } }, target: Target): boolean {
  const labels = obj.metadata?.labels ?? {};
  return labels['app.kubernetes.io/managed-by'] === 'agentplane-operator' && labels[LABEL_DEPLOYMENT] === target.name;
}

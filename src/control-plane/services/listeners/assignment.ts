// A deployment names its listener: it must be one of the tenant's, and the namespace must be one it offers. Until
// the listener reports, the deployment's revisions say whom they wait for.
import { NotFoundError, ValidationError } from '../../../lib/errors.ts';
import { isUuid } from '../../../resources/index.ts';
import type { PlatformState } from '../../../state/types.ts';

export function waitingMessage(listenerId: string): string {
  return `waiting for listener ${listenerId} to connect`;
}

/** 404 unless `listenerId` names a listener of `tenant`; 422 when the namespace is not one the listener offers. */
export async function listenerIssues(
  store: PlatformState,
  tenant: string,
  listenerId: string | null | undefined,
  namespace: string | undefined,
): Promise<void> {
  if (!listenerId) return;
  const r = isUuid(listenerId) ? await store.getListener(tenant, listenerId) : undefined;
  if (!r) throw new NotFoundError(`Listener ID ${listenerId} not found.`);
  const allowed = r.computeConfig.k8sNamespaces;
  // A listener offering no namespaces runs its deployments where its data plane serves (its --namespace); any
  // other namespace would be one its operator neither watches nor has rights in, so it is refused, not accepted.
  if (namespace !== undefined && !allowed.length) {
    throw new ValidationError(`listener ${listenerId} offers no namespaces`, [
      {
        loc: ['body', 'source_config', 'listener_config', 'k8s_namespace'],
        msg: `listener ${listenerId} offers no namespaces (its compute_config.k8s_namespaces is empty): omit k8s_namespace to run in the namespace its data plane serves`,
        type: 'value_error',
      },
    ]);
  }
  if (namespace !== undefined && !allowed.includes(namespace)) {
    throw new ValidationError(`listener ${listenerId} does not offer namespace ${namespace}`, [
      {
        loc: ['body', 'source_config', 'listener_config', 'k8s_namespace'],
        msg: `must be one of the listener's k8s_namespaces: ${allowed.join(', ')}`,
        type: 'value_error',
      },
    ]);
  }
}

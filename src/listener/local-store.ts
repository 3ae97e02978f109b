// What the listener's sync knows of the store it writes (the embedded one of the local runtime, or a cluster's custom
// resources): the deployments it made there, found by its label namespace by namespace, and the two careful
// operations on them (read-or-nothing, and an update retried on a concurrent write).
import { NotFoundError } from '../lib/errors.ts';
import type { Logger } from '../lib/logger.ts';
import type { AgentDeployment } from '../resources/index.ts';
import type { ListenerSnapshot } from '../api/schemas/listeners.ts';
import { StaleResourceVersionError } from '../state/errors.ts';
import type { ResourceStore } from '../state/resources.ts';
import type { SecretStore } from '../state/secrets.ts';
import type { RevisionLogStore } from '../state/revision-logs.ts';

/** Marks the local objects this listener manages (its listener id). */
export const LABEL_LISTENER = 'agentplane.dev/listener';

export type SyncStore = ResourceStore & SecretStore & RevisionLogStore;

/** The state both halves of the sync share: what they write to, and what they learnt from the control plane. */
export type SyncContext = {
  store: SyncStore;
  tenant: string;
  listenerId: string;
  /** Where a deployment goes when its listener_config names no namespace. */
  namespace: string;
  log: Logger;
  /** Last log line id the control plane holds, per `<revision>/<type>`. */
  shipped: Map<string, number>;
  /** Every namespace a snapshot named since this process started. */
  seen: Set<string>;
};

/**
 * The deployments this listener made, namespace by namespace (a listener in a cluster may read only the namespaces
 * it serves, never the whole cluster).
 */
export async function ourDeployments(ctx: SyncContext, snap: ListenerSnapshot | undefined): Promise<AgentDeployment[]> {
  for (const ns of snap?.namespaces ?? []) ctx.seen.add(ns);
  for (const d of snap?.deployments ?? []) {
    const ns = d.spec.sourceConfig.listenerConfig?.k8sNamespace;
    if (ns) ctx.seen.add(ns);
  }
  const namespaces = new Set([ctx.namespace, ...ctx.seen]);
  const lists = await Promise.all(
    [...namespaces].map((ns) =>
      ctx.store.list('AgentDeployment', ns, { labelSelector: `${LABEL_LISTENER}=${ctx.listenerId}` }),
    ),
  );
  return lists.flatMap((l) => l.items);
}

export async function updateDeployment(
  store: SyncStore,
  ns: string,
  name: string,
  change: (d: AgentDeployment) => AgentDeployment,
): Promise<void> {
  for (let attempt = 0; ; attempt++) {
    const cur = await store.get('AgentDeployment', ns, name);
    try {
      await store.update('AgentDeployment', change(cur));
      return;
    } catch (err) {
      if (err instanceof StaleResourceVersionError && attempt < 10) continue;
      throw err;
    }
  }
}

export async function getOptional<K extends 'AgentDeployment' | 'AgentRevision'>(
  store: SyncStore,
  kind: K,
  ns: string,
  name: string,
) {
  try {
    return await store.get(kind, ns, name);
  } catch (err) {
    if (err instanceof NotFoundError) return undefined;
    throw err;
  }
}

// What every listener operation works over, and reading a tenant's listener records (with their heartbeat) and
// the deployments assigned to them.
import { NotFoundError } from '../../../lib/errors.ts';
import type { LogLimits } from '../../../lib/log-limits.ts';
import type { Logger } from '../../../lib/logger.ts';
import { LABEL_TENANT, isUuid, type AgentDeployment } from '../../../resources/index.ts';
import type { PlatformState } from '../../../state/types.ts';
import type { ListenerRecord } from '../../../state/listeners.ts';
import type { buildCredentialResolver } from '../../../git/credentials.ts';
import type { Quotas } from '../quotas.ts';
import type { Listener } from '../../../api/schemas/listeners.ts';

export type ListenerDeps = {
  store: PlatformState;
  /** The store's namespace, where deployments and revisions live. */
  ns: string;
  logger: Logger;
  quotas: Quotas;
  /** A listener not heard from for this long shows as disconnected. */
  timeoutMs: number;
  logLimits: LogLimits;
  resolveCredential: ReturnType<typeof buildCredentialResolver>;
  /** When each listener's heartbeat was last written (by this process). */
  lastWrite: Map<string, number>;
};

export async function requireListener({ store }: ListenerDeps, tenant: string, id: string): Promise<ListenerRecord> {
  const r = isUuid(id) ? await store.getListener(tenant, id) : undefined;
  if (!r) throw new NotFoundError(`Listener ID ${id} not found.`);
  return r;
}

export async function deploymentsOf(
  { store, ns }: ListenerDeps,
  tenant: string,
  id: string,
): Promise<AgentDeployment[]> {
  const { items } = await store.list('AgentDeployment', ns, { labelSelector: `${LABEL_TENANT}=${tenant}` });
  return items
    .filter((d) => d.spec.tenantId === tenant && d.spec.sourceConfig.listenerId === id)
    .sort((a, b) => a.metadata.name.localeCompare(b.metadata.name));
}

export function toApi({ timeoutMs }: ListenerDeps, r: ListenerRecord, count: number): Listener {
  const seen = r.lastSeenAt ? Date.parse(r.lastSeenAt) : NaN;
  return {
    id: r.id,
    tenant_id: r.tenant,
    compute_type: r.computeType,
    compute_id: r.computeId,
    compute_config: { k8s_namespaces: r.computeConfig.k8sNamespaces },
    version: r.version,
    base_url: r.baseUrl ?? null,
    connected: Number.isFinite(seen) && Date.now() - seen < timeoutMs,
    last_seen_at: r.lastSeenAt ?? null,
    agent_version: r.agentVersion ?? null,
    deployment_count: count,
    created_at: r.createdAt,
    updated_at: r.updatedAt,
  };
}

export async function render(deps: ListenerDeps, r: ListenerRecord): Promise<Listener> {
  return toApi(
    deps,
    r,
    (await deploymentsOf(deps, r.tenant, r.id)).filter((d) => !d.metadata.deletionTimestamp).length,
  );
}

/** Heartbeat: written at most every few seconds per listener (a record write per long poll is plenty). */
export async function touch(deps: ListenerDeps, r: ListenerRecord, agentVersion?: string): Promise<void> {
  const { lastWrite, timeoutMs } = deps;
  const now = Date.now();
  const changedVersion = agentVersion !== undefined && agentVersion !== r.agentVersion;
  if (!changedVersion && now - (lastWrite.get(r.id) ?? 0) < 5_000) return;
  lastWrite.set(r.id, now);
  const wasSeen = r.lastSeenAt ? Date.parse(r.lastSeenAt) : 0;
  if (now - wasSeen >= timeoutMs) deps.logger.info({ listener_id: r.id, tenant: r.tenant }, 'listener connected');
  await deps.store.updateListener({
    ...r,
    lastSeenAt: new Date(now).toISOString(),
    ...(agentVersion !== undefined ? { agentVersion } : {}),
  });
}

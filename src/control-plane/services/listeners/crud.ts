// Listener records of a workspace: listing, registering, changing and deleting them, and their API keys.
import { randomUUID } from 'node:crypto';
import { BadRequestError, ConflictError, NotFoundError } from '../../../lib/errors.ts';
import type { ListenerRecord } from '../../../state/listeners.ts';
import { createApiKey } from '../../api-keys/keys.ts';
import { deploymentsOf, render, requireListener, toApi, type ListenerDeps } from './records.ts';
import type { Listener, ListenerCreate, ListenerPatch } from '../../../api/schemas/listeners.ts';

export async function listListeners(deps: ListenerDeps, tenant: string): Promise<{ resources: Listener[] }> {
  const records = await deps.store.listListeners(tenant);
  return { resources: await Promise.all(records.map((r) => render(deps, r))) };
}

export async function getListener(deps: ListenerDeps, tenant: string, id: string): Promise<Listener> {
  return render(deps, await requireListener(deps, tenant, id));
}

export async function createListener(deps: ListenerDeps, tenant: string, body: ListenerCreate): Promise<Listener> {
  const { store } = deps;
  const now = new Date().toISOString();
  const record: ListenerRecord = {
    id: randomUUID(),
    tenant,
    computeType: body.compute_type,
    computeId: body.compute_id,
    computeConfig: { k8sNamespaces: body.compute_config.k8s_namespaces },
    version: body.version ?? null,
    ...(body.base_url ? { baseUrl: body.base_url } : {}),
    createdAt: now,
    updatedAt: now,
  };
  await deps.quotas.admit(
    tenant,
    'listeners',
    async () => (await store.listListeners(tenant)).length,
    () => store.createListener(record),
  );
  deps.logger.info({ listener_id: record.id, tenant }, 'listener created');
  return toApi(deps, record, 0);
}

export async function patchListener(
  deps: ListenerDeps,
  tenant: string,
  id: string,
  body: ListenerPatch,
): Promise<Listener> {
  const r = await requireListener(deps, tenant, id);
  if (body.compute_id !== undefined && body.compute_id !== r.computeId)
    throw new BadRequestError('compute_id is immutable and cannot be changed.');
  if (body.compute_type !== undefined && body.compute_type !== r.computeType)
    throw new BadRequestError('compute_type is immutable and cannot be changed.');
  const next: ListenerRecord = {
    ...r,
    version: body.version === undefined ? r.version : body.version,
    baseUrl: body.base_url === undefined ? r.baseUrl : (body.base_url ?? undefined),
    computeConfig: body.compute_config ? { k8sNamespaces: body.compute_config.k8s_namespaces } : r.computeConfig,
    updatedAt: new Date().toISOString(),
  };
  await deps.store.updateListener(next);
  return render(deps, next);
}

export async function deleteListener(deps: ListenerDeps, tenant: string, id: string, cascade: boolean): Promise<void> {
  const { store, ns } = deps;
  const r = await requireListener(deps, tenant, id);
  const deployments = (await deploymentsOf(deps, tenant, id)).filter((d) => !d.metadata.deletionTimestamp);
  if (deployments.length && !cascade) {
    const names = deployments.map((d) => `${d.spec.displayName} (${d.spec.deploymentId})`).join(', ');
    throw new ConflictError(
      `Listener ID ${id} still has deployments: ${names}. Delete them first or pass cascade=true.`,
    );
  }
  for (const d of deployments) {
    await store.delete('AgentDeployment', ns, d.metadata.name).catch((err: unknown) => {
      if (!(err instanceof NotFoundError)) throw err;
    });
  }
  // Its keys go with it.
  for (const k of await store.listApiKeys()) if (k.listenerId === id) await store.deleteApiKey(k.id);
  await store.deleteListener(tenant, r.id);
  deps.logger.info({ listener_id: id, tenant, deployments: deployments.length }, 'listener deleted');
}

/** A key limited to this tenant and this listener's endpoints; shown once. */
export async function createListenerKey(deps: ListenerDeps, tenant: string, id: string, name?: string) {
  const r = await requireListener(deps, tenant, id);
  const { key, record } = await createApiKey(deps.store, {
    tenants: [tenant],
    listenerId: r.id,
    name: name ?? `listener ${r.computeId}`,
  });
  return {
    id: record.id,
    name: record.name,
    listener_id: r.id,
    tenant_id: tenant,
    key,
    created_at: record.createdAt,
  };
}

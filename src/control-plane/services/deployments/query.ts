// Reading deployments (one, or a filtered page) and deleting one.
import { NotFoundError } from '../../../lib/errors.ts';
import { LABEL_TENANT } from '../../../resources/index.ts';
import type { Deployment } from '../../../api/schemas/deployment-views.ts';
import type { DeploymentDeps } from './deps.ts';
import { notFound, render, requireDeployment } from './records.ts';

export type DeploymentListQuery = {
  limit: number;
  offset: number;
  name_contains?: string;
  status?: string[];
  state?: string[];
  deployment_type?: string;
  deployment_ids?: string[];
};

export async function getDeployment(deps: DeploymentDeps, tenant: string, id: string): Promise<Deployment> {
  return render(deps, await requireDeployment(deps, tenant, id));
}

export async function listDeployments(
  deps: DeploymentDeps,
  tenant: string,
  q: DeploymentListQuery,
): Promise<{ resources: Deployment[]; offset: number }> {
  const { store, ns } = deps;
  const selector = { labelSelector: `${LABEL_TENANT}=${tenant}` };
  // Two list calls for the whole page instead of reads per deployment.
  const [{ items }, { items: revs }] = await Promise.all([
    store.list('AgentDeployment', ns, selector),
    store.list('AgentRevision', ns, selector),
  ]);
  const byName = new Map(revs.map((r) => [r.metadata.name, r]));
  const rendered = await Promise.all(
    items.filter((d) => d.spec.tenantId === tenant).map((d) => render(deps, d, byName)),
  );
  const needle = q.name_contains?.toLowerCase();
  const filtered = rendered
    .filter((d) => !needle || d.name.toLowerCase().includes(needle))
    .filter((d) => !q.status?.length || q.status.includes(d.status))
    .filter((d) => !q.state?.length || q.state.includes(d.status_summary.state))
    .filter((d) => !q.deployment_type || d.source_config.deployment_type === q.deployment_type)
    .filter((d) => !q.deployment_ids?.length || q.deployment_ids.includes(d.id))
    .sort((a, b) => (a.created_at < b.created_at ? 1 : a.created_at > b.created_at ? -1 : a.id < b.id ? -1 : 1));
  const page = filtered.slice(q.offset, q.offset + q.limit);
  return { resources: page, offset: q.offset + page.length };
}

export async function deleteDeployment(deps: DeploymentDeps, tenant: string, id: string): Promise<void> {
  const dep = await requireDeployment(deps, tenant, id);
  try {
    await deps.store.delete('AgentDeployment', deps.ns, dep.metadata.name);
  } catch (err) {
    if (err instanceof NotFoundError) throw notFound(id);
    throw err;
  }
  deps.logger.info(
    { deployment_id: id },
    dep.metadata.finalizers?.length ? 'deployment marked for deletion' : 'deployment deleted',
  );
  // Its uploaded tarballs go now (a deployment being deleted references none); the delete itself has succeeded.
  if (dep.spec.source === 'internal_source' && deps.sourceUploads?.sweep) {
    await deps.sourceUploads.sweep(tenant).catch((err: unknown) => {
      deps.logger.warn({ err, deployment_id: id }, 'deleting the source tarballs of a deleted deployment failed');
    });
  }
}

// Which stored tarballs a workspace still needs: every hash a revision of one of its deployments records (so a
// redeploy or rollback rebuilds the same bytes) and the one each deployment's spec names. A deployment being deleted
// needs none: its revisions go with it, and so do its upload records (`deployments` lists the ids still alive).
import { LABEL_DEPLOYMENT, LABEL_TENANT } from '../../../resources/index.ts';
import type { ResourceStore } from '../../../state/resources.ts';

export type TarballReferences = { hashes: Set<string>; deployments: Set<string> };

export async function referencedTarballs(store: ResourceStore, ns: string, tenant: string): Promise<TarballReferences> {
  const selector = { labelSelector: `${LABEL_TENANT}=${tenant}` };
  const [{ items: deps }, { items: revs }] = await Promise.all([
    store.list('AgentDeployment', ns, selector),
    store.list('AgentRevision', ns, selector),
  ]);
  const live = new Set<string>();
  const ids = new Set<string>();
  const hashes = new Set<string>();
  for (const d of deps) {
    if (d.spec.tenantId !== tenant || d.metadata.deletionTimestamp) continue;
    live.add(d.metadata.name);
    ids.add(d.spec.deploymentId);
    const sha = d.spec.sourceRevisionConfig.sourceTarballSha256;
    if (sha) hashes.add(sha);
  }
  for (const r of revs) {
    const owner = r.metadata.labels?.[LABEL_DEPLOYMENT];
    const sha = r.spec.sourceRevisionConfig.sourceTarballSha256;
    if (sha && owner && live.has(owner) && !r.metadata.deletionTimestamp) hashes.add(sha);
  }
  return { hashes, deployments: ids };
}

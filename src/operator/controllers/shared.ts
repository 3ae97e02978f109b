// Small helpers both controllers use.
import { NotFoundError } from '../../lib/errors.ts';
import type { Kind, KindMap, ResourceStore } from '../../state/resources.ts';
import { LABEL_DEPLOYMENT, RevisionPhase, type AgentDeployment, type AgentRevision } from '../../resources/index.ts';
import type { RevisionView } from './agentdeployment/decide.ts';

export async function getOrUndefined<K extends Kind>(
  store: Pick<ResourceStore, 'get'>,
  kind: K,
  namespace: string,
  name: string,
): Promise<KindMap[K] | undefined> {
  try {
    return await store.get(kind, namespace, name);
  } catch (err) {
    if (err instanceof NotFoundError) return undefined;
    throw err;
  }
}

export async function revisionsOf(store: Pick<ResourceStore, 'list'>, dep: AgentDeployment): Promise<AgentRevision[]> {
  const { items } = await store.list('AgentRevision', dep.metadata.namespace, {
    labelSelector: `${LABEL_DEPLOYMENT}=${dep.metadata.name}`,
  });
  return items.filter((r) => r.spec.deploymentName === dep.metadata.name);
}

/** A revision created by the control plane or the operator has no status yet (the API shows CREATING). */
export function phaseOf(rev: AgentRevision): RevisionPhase {
  return rev.status?.phase ?? RevisionPhase.CREATING;
}

export function views(revisions: AgentRevision[]): RevisionView[] {
  return revisions.map((r) => ({ name: r.metadata.name, number: r.spec.revisionNumber, status: phaseOf(r) }));
}

export function deploymentRef(dep: AgentDeployment) {
  return {
    namespace: dep.metadata.namespace ?? 'default',
    deployment: dep.metadata.name,
    deploymentId: dep.spec.deploymentId,
  };
}

/** Deep equality for plain JSON data (status objects). */
export function sameJson(a: unknown, b: unknown): boolean {
  return JSON.stringify(sortKeys(a)) === JSON.stringify(sortKeys(b));
}

function sortKeys(v: unknown): unknown {
  if (Array.isArray(v)) return v.map(sortKeys);
  if (v && typeof v === 'object') {
    return Object.fromEntries(
      Object.entries(v as Record<string, unknown>)
        .filter(([, x]) => x !== undefined)
        .sort(([a], [b]) => a.localeCompare(b))
        .map(([k, x]) => [k, sortKeys(x)]),
    );
  }
  return v;
}

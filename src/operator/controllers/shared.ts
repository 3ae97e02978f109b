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

/**
 * Where the reconcilers read the custom resources: the operator's informer caches (no API request), or the store
 * itself (tests that drive a reconciler alone). A cache may lag the store; every write carries the resourceVersion
 * it read, so a write based on a stale copy is refused (409) and the key is reconciled again, and decisions that
 * judge several objects at once guard against a mix of old and new copies themselves (see revisionsToSkip).
 */
export type ResourceReader = {
  get<K extends Kind>(kind: K, namespace: string, name: string): Promise<KindMap[K] | undefined>;
  revisionsOf(dep: AgentDeployment): Promise<AgentRevision[]>;
};

export function storeReader(store: Pick<ResourceStore, 'get' | 'list'>): ResourceReader {
  return {
    get: (kind, namespace, name) => getOrUndefined(store, kind, namespace, name),
    revisionsOf: (dep) => revisionsOf(store, dep),
  };
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

// The resource port: AgentDeployment and AgentRevision objects, Kubernetes-shaped on purpose. The kubernetes backend
// maps it 1:1 onto the API server, the embedded backend (SQLite) behaves the same way, so code written against it
// runs unchanged on one machine and in a cluster.
//
// Semantics (both adapters):
// - create: fills uid, resourceVersion, generation=1, creationTimestamp; ignores `status` (status subresource).
//   A name that exists -> AlreadyExistsError (409).
// - update: writes metadata (labels, annotations, finalizers, ownerReferences) and spec; ignores status. Optimistic
//   on metadata.resourceVersion when it is set: stale -> StaleResourceVersionError (409). generation increments only
//   when spec changed. Removing the last finalizer of an object marked for deletion removes it.
// - updateStatus: writes status only (same optimistic check).
// - delete: with finalizers, sets deletionTimestamp (once) and keeps the object; without, removes it. Removal
//   garbage-collects dependents (objects and secrets whose ownerReferences name the removed uid), like Kubernetes.
// - watch: events after `resourceVersion` ('' or '0' = synthetic ADDED for every current object first), in
//   resourceVersion order. A version older than the store keeps history for -> onError(ResourceExpiredError) (410),
//   then list again. onError also ends a watch the server closed (kubernetes: timeouts, network); re-list or resume
//   from the last seen resourceVersion. Embedded watches also see writes of other processes on the same file (polled).
import type { AgentDeployment, AgentRevision } from '../resources/index.ts';

export type Kind = 'AgentDeployment' | 'AgentRevision';
export type KindMap = { AgentDeployment: AgentDeployment; AgentRevision: AgentRevision };
export type AnyResource = KindMap[Kind];

export type WatchEventType = 'ADDED' | 'MODIFIED' | 'DELETED';

export type ListOptions = {
  /** Kubernetes equality-based selector: "a=b,c!=d,e" (e = label exists). */
  labelSelector?: string;
};

export interface ResourceStore {
  get<K extends Kind>(kind: K, namespace: string, name: string): Promise<KindMap[K]>;
  list<K extends Kind>(
    kind: K,
    namespace?: string,
    opts?: ListOptions,
  ): Promise<{ items: KindMap[K][]; resourceVersion: string }>;
  create<K extends Kind>(kind: K, obj: KindMap[K]): Promise<KindMap[K]>;
  update<K extends Kind>(kind: K, obj: KindMap[K]): Promise<KindMap[K]>;
  updateStatus<K extends Kind>(kind: K, obj: KindMap[K]): Promise<KindMap[K]>;
  delete(kind: Kind, namespace: string, name: string): Promise<void>;
  /**
   * Streams changes after `resourceVersion`; resolves to a stop function (after which nothing is delivered).
   * `onError` is called at most once when the stream breaks (or the version is too old: ResourceExpiredError) or
   * the server ended it normally (WatchClosedError: the caller may watch again from its last version).
   */
  watch<K extends Kind>(
    kind: K,
    namespace: string | undefined,
    resourceVersion: string,
    onEvent: (type: WatchEventType, obj: KindMap[K]) => void,
    onError: (err: unknown) => void,
    /** A BOOKMARK: nothing changed for this watch up to `resourceVersion` (stores without bookmarks never call it). */
    onBookmark?: (resourceVersion: string) => void,
  ): Promise<() => void>;
}

/** Parses an equality-based label selector into predicates over a label map. */
export function labelSelectorMatcher(
  selector: string | undefined,
): (labels: Record<string, string> | undefined) => boolean {
  const terms = (selector ?? '')
    .split(',')
    .map((t) => t.trim())
    .filter(Boolean)
    .map((t) => {
      const neq = t.indexOf('!=');
      if (neq > 0) return { key: t.slice(0, neq).trim(), op: '!=' as const, value: t.slice(neq + 2).trim() };
      const eq = t.indexOf('=');
      if (eq > 0)
        return {
          key: t.slice(0, eq).trim(),
          op: '=' as const,
          value: t
            .slice(eq + 1)
            .replace(/^=/, '')
            .trim(),
        };
      if (t.startsWith('!')) return { key: t.slice(1).trim(), op: '!' as const, value: '' };
      return { key: t, op: 'exists' as const, value: '' };
    });
  return (labels) =>
    terms.every((t) => {
      const v = labels?.[t.key];
      if (t.op === '=') return v === t.value;
      if (t.op === '!=') return v !== t.value;
      if (t.op === '!') return v === undefined;
      return v !== undefined;
    });
}

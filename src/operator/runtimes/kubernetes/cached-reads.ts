// Reads of the children from the informers' caches instead of the API server: at steady state a resync then sends
// no request at all. What the operator writes goes into the cache from the write's answer (Informer.observe keeps
// the newer resourceVersion), so the reconcile after a write never compares against the copy from before it; a
// change by someone else reaches the cache through the watch, and the next resync applies over it as before.
import type { Informer, KubeObject } from '../../controller-kit/informer.ts';
import type { ObjectOps } from './apply.ts';

type Cache<T> = Pick<Informer<T & KubeObject>, 'hasSynced' | 'get' | 'observe' | 'forget'>;

/**
 * `ops` whose apply() reads come from `cache` once it has listed: a hit is the object, a miss (an object the
 * selector does not cover, a namespace not watched, one not created yet) falls back to a read from the server.
 * read() itself stays a live read: a compare-and-swap update needs the server's current resourceVersion.
 */
export function cachedOps<T extends { metadata?: object }>(ops: ObjectOps<T>, cache: Cache<T>): ObjectOps<T> {
  const seen = (obj: T): T => {
    const meta = obj?.metadata as KubeObject['metadata'] | undefined;
    if (meta?.name && meta.resourceVersion) cache.observe(obj as T & KubeObject);
    return obj;
  };
  return {
    read: ops.read,
    cached: (namespace, name) => (cache.hasSynced ? cache.get(`${namespace}/${name}`) : undefined),
    forget: (namespace, name) => cache.forget(`${namespace}/${name}`),
    apply: async (namespace, name, body) => seen(await ops.apply(namespace, name, body)),
    replace: async (namespace, name, body) => seen(await ops.replace(namespace, name, body)),
  };
}

// Adapters from the control plane's store port to what the operator runtime and the runtimes need.
import type { Kind, KindMap, ResourceStore, RevisionLogStore } from '../control-plane/store/types.ts';
import type { ListWatch } from './controller-kit/informer.ts';
import type { RevisionLogSink } from './runtimes/types.ts';

export function storeListWatch<K extends Kind>(
  store: ResourceStore,
  kind: K,
  namespace?: string,
): ListWatch<KindMap[K]> {
  return {
    list: () => store.list(kind, namespace),
    watch: (resourceVersion, onEvent, onClose) =>
      store.watch(kind, namespace, resourceVersion, (type, object) => onEvent({ type, object }), onClose),
  };
}

export function storeLogSink(store: RevisionLogStore): RevisionLogSink {
  return { append: (ref, type, lines) => store.appendLogs(ref.namespace, ref.revision, type, lines) };
}

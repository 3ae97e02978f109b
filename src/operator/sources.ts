// Adapters from the control plane's store port to what the operator runtime and the runtimes need.
import { WatchClosedError } from '../state/errors.ts';
import type { Kind, KindMap, ResourceStore } from '../state/resources.ts';
import type { RevisionLogStore } from '../state/revision-logs.ts';
import type { ListWatch } from './controller-kit/informer.ts';
import type { RevisionLogSink } from './runtimes/types.ts';

export function storeListWatch<K extends Kind>(
  store: ResourceStore,
  kind: K,
  namespace?: string,
): ListWatch<KindMap[K]> {
  return {
    list: () => store.list(kind, namespace),
    // A normal end of the watch is no error (the informer resumes from its version, no relist), and a bookmark moves
    // that version on, so a quiet watch resumes after it rather than from the last list.
    watch: (resourceVersion, onEvent, onClose) =>
      store.watch(
        kind,
        namespace,
        resourceVersion,
        (type, object) => onEvent({ type, object }),
        (err) => onClose(err instanceof WatchClosedError ? undefined : err),
        (rv) => onEvent({ type: 'BOOKMARK', object: { metadata: { name: '', resourceVersion: rv } } as KindMap[K] }),
      ),
  };
}

export function storeLogSink(store: RevisionLogStore): RevisionLogSink {
  return { append: (ref, type, lines) => store.appendLogs(ref.namespace, ref.revision, type, lines) };
}

// AgentDeployments and AgentRevisions in the cluster: the custom resources themselves, through CustomObjectsApi;
// watches through client-node's Watch, with bookmarks, resumed by the caller when the server ends them.
import { Watch, type KubeConfig } from '@kubernetes/client-node';
import { API_VERSION, GROUP, VERSION } from '../../resources/index.ts';
import { ResourceExpiredError, WatchClosedError } from '../errors.ts';
import type { Kind, KindMap, ListOptions, ResourceStore, WatchEventType } from '../resources.ts';
import { validateResource } from '../validate.ts';
import { call, type KubeContext, type Status } from './client.ts';

const PLURAL: Record<Kind, string> = { AgentDeployment: 'agentdeployments', AgentRevision: 'agentrevisions' };
/** Server-side end of one watch request, and the client's abort when nothing (not even a bookmark) arrives. */
const WATCH_TIMEOUT_SECONDS = 300;
const WATCH_IDLE_ABORT_MS = 150_000;

export function kubernetesResources(
  k: KubeContext,
  kubeConfig: KubeConfig,
  watchTimeoutSeconds = WATCH_TIMEOUT_SECONDS,
): ResourceStore & { close(): Promise<void> } {
  const watcher = new Watch(kubeConfig);
  // client-node aborts a watch after 30 s without data; a quiet store would then relist twice a minute. The server
  // ends each watch after WATCH_TIMEOUT_SECONDS (and sends bookmarks meanwhile), so the idle abort only has to
  // catch a dead connection. (`requestTimeoutMs` is not in client-node's typed surface; it is its only knob.)
  (watcher as unknown as { requestTimeoutMs: number }).requestTimeoutMs = WATCH_IDLE_ABORT_MS;
  const stops = new Set<() => void>();
  const params = (kind: Kind, namespace: string) => ({
    group: GROUP,
    version: VERSION,
    namespace,
    plural: PLURAL[kind],
  });

  const store: ResourceStore & { close(): Promise<void> } = {
    async close(): Promise<void> {
      for (const stop of stops) stop();
      stops.clear();
    },

    async get<K extends Kind>(kind: K, namespace: string, name: string): Promise<KindMap[K]> {
      return call(() => k.custom.getNamespacedCustomObject({ ...params(kind, namespace), name })) as Promise<
        KindMap[K]
      >;
    },

    async list<K extends Kind>(kind: K, namespace?: string, opts: ListOptions = {}) {
      const res = (await call(() =>
        namespace === undefined
          ? k.custom.listClusterCustomObject({
              group: GROUP,
              version: VERSION,
              plural: PLURAL[kind],
              labelSelector: opts.labelSelector,
            })
          : k.custom.listNamespacedCustomObject({
              ...params(kind, namespace),
              labelSelector: opts.labelSelector,
            }),
      )) as { items: KindMap[K][]; metadata: { resourceVersion: string } };
      return { items: res.items, resourceVersion: res.metadata.resourceVersion };
    },

    async create<K extends Kind>(kind: K, input: KindMap[K]): Promise<KindMap[K]> {
      // Validate locally first so both stores answer bad input the same way (the server would say 422 too).
      const obj = validateResource(kind, { ...input, apiVersion: API_VERSION, kind });
      const namespace = obj.metadata.namespace ?? k.namespace;
      return call(() =>
        k.custom.createNamespacedCustomObject({
          ...params(kind, namespace),
          body: { ...obj, metadata: { ...obj.metadata, namespace } },
        }),
      ) as Promise<KindMap[K]>;
    },

    async update<K extends Kind>(kind: K, input: KindMap[K]): Promise<KindMap[K]> {
      const obj = validateResource(kind, input);
      const namespace = obj.metadata.namespace ?? k.namespace;
      // Custom resources need a resourceVersion on update; without one the caller asked for "last write wins".
      const resourceVersion =
        obj.metadata.resourceVersion ?? (await store.get(kind, namespace, obj.metadata.name)).metadata.resourceVersion;
      return call(() =>
        k.custom.replaceNamespacedCustomObject({
          ...params(kind, namespace),
          name: obj.metadata.name,
          body: { ...obj, metadata: { ...obj.metadata, namespace, resourceVersion } },
        }),
      ) as Promise<KindMap[K]>;
    },

    async updateStatus<K extends Kind>(kind: K, input: KindMap[K]): Promise<KindMap[K]> {
      const obj = validateResource(kind, input);
      const namespace = obj.metadata.namespace ?? k.namespace;
      const resourceVersion =
        obj.metadata.resourceVersion ?? (await store.get(kind, namespace, obj.metadata.name)).metadata.resourceVersion;
      return call(() =>
        k.custom.replaceNamespacedCustomObjectStatus({
          ...params(kind, namespace),
          name: obj.metadata.name,
          body: { ...obj, metadata: { ...obj.metadata, namespace, resourceVersion } },
        }),
      ) as Promise<KindMap[K]>;
    },

    async delete(kind: Kind, namespace: string, name: string): Promise<void> {
      await call(() =>
        k.custom.deleteNamespacedCustomObject({
          ...params(kind, namespace),
          name,
          propagationPolicy: 'Background',
        }),
      );
    },

    async watch<K extends Kind>(
      kind: K,
      namespace: string | undefined,
      resourceVersion: string,
      onEvent: (type: WatchEventType, obj: KindMap[K]) => void,
      onError: (err: unknown) => void,
      onBookmark?: (resourceVersion: string) => void,
    ): Promise<() => void> {
      const path =
        namespace === undefined
          ? `/apis/${GROUP}/${VERSION}/${PLURAL[kind]}`
          : `/apis/${GROUP}/${VERSION}/namespaces/${namespace}/${PLURAL[kind]}`;
      let stopped = false;
      let failed = false;
      const fail = (err: unknown) => {
        if (stopped || failed) return;
        failed = true;
        onError(err);
      };
      const controller = await watcher.watch(
        path,
        {
          resourceVersion: resourceVersion || undefined,
          allowWatchBookmarks: true,
          timeoutSeconds: watchTimeoutSeconds,
        },
        (type: string, obj: unknown) => {
          if (stopped || failed) return;
          if (type === 'ADDED' || type === 'MODIFIED' || type === 'DELETED') onEvent(type, obj as KindMap[K]);
          else if (type === 'BOOKMARK') {
            const rv = (obj as { metadata?: { resourceVersion?: string } }).metadata?.resourceVersion;
            if (rv) onBookmark?.(rv);
          } else if (type === 'ERROR') {
            const s = obj as Status;
            fail(
              s.code === 410
                ? new ResourceExpiredError(s.message ?? 'resource version too old')
                : new Error(s.message ?? 'watch error'),
            );
          }
        },
        (err: unknown) => fail(err ?? new WatchClosedError('watch closed by the server')),
      );
      const stop = () => {
        stopped = true;
        stops.delete(stop);
        controller.abort();
      };
      stops.add(stop);
      return stop;
    },
  };
  return store;
}

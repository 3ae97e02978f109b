// ListWatch sources for the built-in children the runtime observes, over @kubernetes/client-node: typed list
// calls and the client's Watch (raw JSON events). The operator's Informer handles relists, 410s and backoff.
import { AppsV1Api, BatchV1Api, CoreV1Api, Watch, type KubeConfig } from '@kubernetes/client-node';
import type { KubeObject, ListWatch } from '../../controller-kit/informer.ts';

export type ChildKind = 'jobs' | 'deployments' | 'replicasets' | 'pods' | 'secrets' | 'services';

const PATHS: Record<ChildKind, string> = {
  jobs: '/apis/batch/v1',
  deployments: '/apis/apps/v1',
  replicasets: '/apis/apps/v1',
  pods: '/api/v1',
  secrets: '/api/v1',
  services: '/api/v1',
};

type RawList = { items: unknown[]; metadata?: { resourceVersion?: string } };

export type WatchTiming = {
  /** Asked of the server: it ends the watch normally after this long, and the informer resumes from its RV. */
  timeoutSeconds: number;
  /**
   * client-node aborts a watch silent for this long (30 s by default) as an error, which makes the informer relist.
   * The API server sends a bookmark about once a minute on a quiet watch, so the limit must be above that.
   */
  idleTimeoutMs: number;
};

export const DEFAULT_WATCH_TIMING: WatchTiming = { timeoutSeconds: 300, idleTimeoutMs: 150_000 };

/** `namespace` undefined: every namespace (the children of a namespace per tenant). */
export function childListWatch<T extends KubeObject>(
  kc: KubeConfig,
  kind: ChildKind,
  namespace: string | undefined,
  labelSelector: string,
  timing: WatchTiming = DEFAULT_WATCH_TIMING,
  /** e.g. `metadata.name=x`: one named object, which RBAC can grant by resourceNames. */
  fieldSelector?: string,
): ListWatch<T> {
  const apps = kc.makeApiClient(AppsV1Api);
  const batch = kc.makeApiClient(BatchV1Api);
  const core = kc.makeApiClient(CoreV1Api);
  const watcher = new Watch(kc);
  // Not part of client-node's typed surface, but the only knob for its inactivity abort.
  (watcher as unknown as { requestTimeoutMs: number }).requestTimeoutMs = timing.idleTimeoutMs;
  const list = async (): Promise<RawList> => {
    if (namespace === undefined) {
      const q = { labelSelector, fieldSelector };
      switch (kind) {
        case 'jobs':
          return batch.listJobForAllNamespaces(q);
        case 'deployments':
          return apps.listDeploymentForAllNamespaces(q);
        case 'replicasets':
          return apps.listReplicaSetForAllNamespaces(q);
        case 'pods':
          return core.listPodForAllNamespaces(q);
        case 'secrets':
          return core.listSecretForAllNamespaces(q);
        case 'services':
          return core.listServiceForAllNamespaces(q);
      }
    }
    const q = { namespace, labelSelector, fieldSelector };
    switch (kind) {
      case 'jobs':
        return batch.listNamespacedJob(q);
      case 'deployments':
        return apps.listNamespacedDeployment(q);
      case 'replicasets':
        return apps.listNamespacedReplicaSet(q);
      case 'pods':
        return core.listNamespacedPod(q);
      case 'secrets':
        return core.listNamespacedSecret(q);
      case 'services':
        return core.listNamespacedService(q);
    }
  };
  return {
    async list() {
      const res = await list();
      return { items: res.items as T[], resourceVersion: res.metadata?.resourceVersion ?? '' };
    },
    async watch(resourceVersion, onEvent, onClose) {
      let done = false;
      const finish = (err?: unknown) => {
        if (done) return;
        done = true;
        onClose(err);
      };
      const controller = await watcher.watch(
        `${PATHS[kind]}${namespace === undefined ? '' : `/namespaces/${namespace}`}/${kind}`,
        {
          resourceVersion: resourceVersion || undefined,
          allowWatchBookmarks: true,
          labelSelector,
          ...(fieldSelector ? { fieldSelector } : {}),
          timeoutSeconds: timing.timeoutSeconds,
        },
        (type: string, obj: unknown) => {
          if (done) return;
          if (type === 'ADDED' || type === 'MODIFIED' || type === 'DELETED') onEvent({ type, object: obj as T });
          // A bookmark only moves the resourceVersion on, so the next watch resumes after it.
          else if (type === 'BOOKMARK') onEvent({ type, object: obj as T });
          else if (type === 'ERROR') {
            const s = obj as { code?: number; message?: string };
            finish(Object.assign(new Error(s.message ?? 'watch error'), { code: s.code }));
          }
        },
        (err: unknown) => finish(err ?? undefined),
      );
      return () => {
        done = true;
        controller.abort();
      };
    },
  };
}

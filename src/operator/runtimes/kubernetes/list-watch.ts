// ListWatch sources for the built-in children the runtime observes, over @kubernetes/client-node: typed list
// calls and the client's Watch (raw JSON events). The operator's Informer handles relists, 410s and backoff.
import { AppsV1Api, BatchV1Api, CoreV1Api, Watch, type KubeConfig } from '@kubernetes/client-node';
import type { KubeObject, ListWatch } from '../../runtime/informer.ts';

export type ChildKind = 'jobs' | 'deployments' | 'replicasets' | 'pods';

const PATHS: Record<ChildKind, (ns: string) => string> = {
  jobs: (ns) => `/apis/batch/v1/namespaces/${ns}/jobs`,
  deployments: (ns) => `/apis/apps/v1/namespaces/${ns}/deployments`,
  replicasets: (ns) => `/apis/apps/v1/namespaces/${ns}/replicasets`,
  pods: (ns) => `/api/v1/namespaces/${ns}/pods`,
};

type RawList = { items: unknown[]; metadata?: { resourceVersion?: string } };

export function childListWatch<T extends KubeObject>(kc: KubeConfig, kind: ChildKind, namespace: string, labelSelector: string): ListWatch<T> {
  const apps = kc.makeApiClient(AppsV1Api);
  const batch = kc.makeApiClient(BatchV1Api);
  const core = kc.makeApiClient(CoreV1Api);
  const watcher = new Watch(kc);
  const list = async (): Promise<RawList> => {
    const q = { namespace, labelSelector };
    switch (kind) {
      case 'jobs':
        return batch.listNamespacedJob(q);
      case 'deployments':
        return apps.listNamespacedDeployment(q);
      case 'replicasets':
        return apps.listNamespacedReplicaSet(q);
      case 'pods':
        return core.listNamespacedPod(q);
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
        PATHS[kind](namespace),
        { resourceVersion: resourceVersion || undefined, allowWatchBookmarks: true, labelSelector },
        (type: string, obj: unknown) => {
          if (done) return;
          if (type === 'ADDED' || type === 'MODIFIED' || type === 'DELETED') onEvent({ type, object: obj as T });
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

// ListWatch sources for the children the runtime observes (built-in kinds and Gateway API HTTPRoutes), over
// @kubernetes/client-node: typed list calls and the client's Watch (raw JSON events). The operator's Informer handles
// relists, 410s and backoff.
import {
  AppsV1Api,
  AutoscalingV2Api,
  BatchV1Api,
  CoreV1Api,
  CustomObjectsApi,
  NetworkingV1Api,
  Watch,
  type KubeConfig,
} from '@kubernetes/client-node';
import type { KubeObject, ListWatch } from '../../controller-kit/informer.ts';

export type ChildKind =
  | 'jobs'
  | 'deployments'
  | 'replicasets'
  | 'pods'
  | 'secrets'
  | 'services'
  | 'statefulsets'
  | 'networkpolicies'
  | 'ingresses'
  | 'horizontalpodautoscalers'
  | 'httproutes';

type RawList = { items: unknown[]; metadata?: { resourceVersion?: string } };
type Query = { labelSelector: string; fieldSelector?: string };
type Clients = {
  apps: AppsV1Api;
  batch: BatchV1Api;
  core: CoreV1Api;
  net: NetworkingV1Api;
  autoscaling: AutoscalingV2Api;
  custom: CustomObjectsApi;
};
const ROUTES = { group: 'gateway.networking.k8s.io', version: 'v1', plural: 'httproutes' } as const;

/** Per kind: its API path and the typed list calls, in one namespace and in all of them. */
const KINDS: Record<
  ChildKind,
  {
    path: string;
    inNamespace: (c: Clients, q: Query & { namespace: string }) => Promise<RawList>;
    everywhere: (c: Clients, q: Query) => Promise<RawList>;
  }
> = {
  jobs: {
    path: '/apis/batch/v1',
    inNamespace: (c, q) => c.batch.listNamespacedJob(q),
    everywhere: (c, q) => c.batch.listJobForAllNamespaces(q),
  },
  deployments: {
    path: '/apis/apps/v1',
    inNamespace: (c, q) => c.apps.listNamespacedDeployment(q),
    everywhere: (c, q) => c.apps.listDeploymentForAllNamespaces(q),
  },
  replicasets: {
    path: '/apis/apps/v1',
    inNamespace: (c, q) => c.apps.listNamespacedReplicaSet(q),
    everywhere: (c, q) => c.apps.listReplicaSetForAllNamespaces(q),
  },
  statefulsets: {
    path: '/apis/apps/v1',
    inNamespace: (c, q) => c.apps.listNamespacedStatefulSet(q),
    everywhere: (c, q) => c.apps.listStatefulSetForAllNamespaces(q),
  },
  pods: {
    path: '/api/v1',
    inNamespace: (c, q) => c.core.listNamespacedPod(q),
    everywhere: (c, q) => c.core.listPodForAllNamespaces(q),
  },
  secrets: {
    path: '/api/v1',
    inNamespace: (c, q) => c.core.listNamespacedSecret(q),
    everywhere: (c, q) => c.core.listSecretForAllNamespaces(q),
  },
  services: {
    path: '/api/v1',
    inNamespace: (c, q) => c.core.listNamespacedService(q),
    everywhere: (c, q) => c.core.listServiceForAllNamespaces(q),
  },
  networkpolicies: {
    path: '/apis/networking.k8s.io/v1',
    inNamespace: (c, q) => c.net.listNamespacedNetworkPolicy(q),
    everywhere: (c, q) => c.net.listNetworkPolicyForAllNamespaces(q),
  },
  ingresses: {
    path: '/apis/networking.k8s.io/v1',
    inNamespace: (c, q) => c.net.listNamespacedIngress(q),
    everywhere: (c, q) => c.net.listIngressForAllNamespaces(q),
  },
  horizontalpodautoscalers: {
    path: '/apis/autoscaling/v2',
    inNamespace: (c, q) => c.autoscaling.listNamespacedHorizontalPodAutoscaler(q),
    everywhere: (c, q) => c.autoscaling.listHorizontalPodAutoscalerForAllNamespaces(q),
  },
  httproutes: {
    path: `/apis/${ROUTES.group}/${ROUTES.version}`,
    inNamespace: async (c, q) => (await c.custom.listNamespacedCustomObject({ ...ROUTES, ...q })) as RawList,
    everywhere: async (c, q) => (await c.custom.listClusterCustomObject({ ...ROUTES, ...q })) as RawList,
  },
};

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
  const clients: Clients = {
    apps: kc.makeApiClient(AppsV1Api),
    batch: kc.makeApiClient(BatchV1Api),
    core: kc.makeApiClient(CoreV1Api),
    net: kc.makeApiClient(NetworkingV1Api),
    autoscaling: kc.makeApiClient(AutoscalingV2Api),
    custom: kc.makeApiClient(CustomObjectsApi),
  };
  const watcher = new Watch(kc);
  // Not part of client-node's typed surface, but the only knob for its inactivity abort.
  (watcher as unknown as { requestTimeoutMs: number }).requestTimeoutMs = timing.idleTimeoutMs;
  const { path, inNamespace, everywhere } = KINDS[kind];
  const query: Query = { labelSelector, ...(fieldSelector ? { fieldSelector } : {}) };
  const list = (): Promise<RawList> =>
    namespace === undefined ? everywhere(clients, query) : inNamespace(clients, { ...query, namespace });
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
        `${path}${namespace === undefined ? '' : `/namespaces/${namespace}`}/${kind}`,
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

// What every concern of the Kubernetes runtime shares: the API clients, the child informers, the create-or-update
// operations per kind, and where (and whether) children of the AgentDeployment the controller holds are written.
import {
  AppsV1Api,
  AutoscalingV2Api,
  BatchV1Api,
  CoreV1Api,
  CustomObjectsApi,
  DiscoveryV1Api,
  NetworkingV1Api,
  PatchStrategy,
  RbacAuthorizationV1Api,
  KubernetesObjectApi,
  type KubeConfig,
  type KubernetesObject,
  type V1Deployment,
  type V1EndpointSlice,
  type V1Ingress,
  type V1Job,
  type V1LimitRange,
  type V1NetworkPolicy,
  type V1Pod,
  type V1ReplicaSet,
  type V1ResourceQuota,
  type V1RoleBinding,
  type V1Secret,
  type V1Service,
  type V1StatefulSet,
  type V2HorizontalPodAutoscaler,
} from '@kubernetes/client-node';
import type { Logger } from '../../../lib/logger.ts';
import { LABEL_DEPLOYMENT, ownerReferenceTo, type AgentDeployment } from '../../../resources/index.ts';
import type { Informer, KubeObject } from '../../controller-kit/informer.ts';
import type { GitCredential } from '../../../git/credentials.ts';
import type { RevisionLogSink, RevisionRef } from '../types.ts';
import { applyOptions, FIELD_MANAGER, isStatus, type ObjectOps } from './apply.ts';
import type { KubernetesRuntimeConfig } from './config.ts';
import type { Target } from './labels.ts';
import type { HttpRoute } from './http-route.ts';
import { tenantNamespaceName } from '../../../resources/names.ts';

export type Obj<T> = T & KubeObject;
/**
 * A deployment the idle policy covers, as its last deploy saw it (idle.ts); `activityToken` is what its pods want
 * in Authorization before they tell their activity (server.ts makeActivitySecret).
 */
export type IdleEntry = { ref: RevisionRef; target: Target; timeoutMs: number; activityToken: string };
export type DeploymentRef = Omit<RevisionRef, 'revision'>;

export type KubernetesRuntimeOptions = {
  kubeConfig: KubeConfig;
  /** Namespace of the AgentDeployments and of everything the runtime creates. */
  namespace: string;
  config: KubernetesRuntimeConfig;
  logs: RevisionLogSink;
  logger: Logger;
  resyncMs?: number;
  /**
   * The git credential of a deployment's integration (a GitHub installation token minted for this build, or a
   * stored credential); it reaches the build only through a Secret owned by the build Job. Throws a one-line reason
   * when the integration cannot give one (the build fails with it).
   */
  gitCredential?: (tenantId: string, integrationId: string, repoUrl: string) => Promise<GitCredential | undefined>;
};

type KindOps = {
  job: ObjectOps<V1Job>;
  deployment: ObjectOps<V1Deployment>;
  statefulSet: ObjectOps<V1StatefulSet>;
  service: ObjectOps<V1Service>;
  secret: ObjectOps<V1Secret>;
  ingress: ObjectOps<V1Ingress>;
  httpRoute: ObjectOps<HttpRoute>;
  autoscaler: ObjectOps<V2HorizontalPodAutoscaler>;
  networkPolicy: ObjectOps<V1NetworkPolicy>;
  roleBinding: ObjectOps<V1RoleBinding>;
  resourceQuota: ObjectOps<V1ResourceQuota>;
  limitRange: ObjectOps<V1LimitRange>;
  endpointSlice: ObjectOps<V1EndpointSlice>;
};

/** The runtime's state as its concerns see it (the class in index.ts owns it; the concerns only use it). */
export type RuntimeContext = {
  opts: KubernetesRuntimeOptions;
  log: Logger;
  /** A namespace per tenant: agent servers' children live in the tenant's namespace, not ours. */
  perTenant: boolean;
  apps: AppsV1Api;
  batch: BatchV1Api;
  core: CoreV1Api;
  net: NetworkingV1Api;
  custom: CustomObjectsApi;
  autoscaling: AutoscalingV2Api;
  discovery: DiscoveryV1Api;
  ops: KindOps;
  jobs: Informer<Obj<V1Job>>;
  deployments: Informer<Obj<V1Deployment>>;
  replicaSets: Informer<Obj<V1ReplicaSet>>;
  pods: Informer<Obj<V1Pod>>;
  /** Build pods: `pods` itself unless builds run in a namespace of their own that `pods` does not watch. */
  buildPods: Informer<Obj<V1Pod>>;
  /** Every Ingress where agent servers run (ours and others': admit refuses a host another one serves). */
  ingresses: Informer<Obj<V1Ingress>>;
  /** Every HTTPRoute there, with a Gateway configured. */
  httpRoutes?: Informer<Obj<HttpRoute>>;
  /** Secrets labelled with a tenant in our namespace (what secret_references may name); none per tenant. */
  tenantSecrets?: Informer<Obj<V1Secret>>;
  /** Deployment URLs learnt by deploys, by `<namespace>/<deployment>`. */
  urls: Map<string, string>;
  /** Uids of AgentDeployments whose cleanup ran (a uid is never reused; one short string per deleted deployment). */
  cleanedUp: Set<string>;
  /** The revision whose rollout last removed its predecessors' environment Secrets, by `<namespace>/<deployment>`. */
  envSwept: Map<string, string>;
  /** Optional children (`<kind>/<namespace>/<name>`) this process knows to be absent; deploy.ts clears a mark it writes. */
  absent: Set<string>;
  /** Deployments the idle policy covers, by `<namespace>/<deployment>` of their Deployment (idle.ts). */
  idle: Map<string, IdleEntry>;
};

export type ApiClients = Pick<
  RuntimeContext,
  'apps' | 'batch' | 'core' | 'net' | 'custom' | 'autoscaling' | 'discovery' | 'ops'
>;

/** Where the Gateway API serves HTTPRoutes (a CRD: the typed clients have no methods for it). */
export const HTTP_ROUTES = { group: 'gateway.networking.k8s.io', version: 'v1', plural: 'httproutes' } as const;

export function makeApiClients(kc: KubeConfig): ApiClients {
  const apps = kc.makeApiClient(AppsV1Api);
  const batch = kc.makeApiClient(BatchV1Api);
  const core = kc.makeApiClient(CoreV1Api);
  const net = kc.makeApiClient(NetworkingV1Api);
  const custom = kc.makeApiClient(CustomObjectsApi);
  const autoscaling = kc.makeApiClient(AutoscalingV2Api);
  const rbac = kc.makeApiClient(RbacAuthorizationV1Api);
  // The client's generic object API does server-side apply itself: it serializes the typed object to its wire
  // names (a NetworkPolicy's `_from` is `from`) and finds the resource path by discovery, cached per apiVersion.
  const objects = KubernetesObjectApi.makeApiClient(kc);
  const ssa = <T>(_namespace: string, _name: string, body: T): Promise<T> =>
    objects.patch(
      body as KubernetesObject,
      undefined,
      undefined,
      applyOptions.fieldManager,
      applyOptions.force,
      PatchStrategy.ServerSideApply,
    ) as Promise<T>;
  const discovery = kc.makeApiClient(DiscoveryV1Api);
  const ops: KindOps = {
    job: {
      read: (namespace, name) => batch.readNamespacedJob({ name, namespace }),
      apply: ssa,
      replace: (namespace, name, body) =>
        batch.replaceNamespacedJob({ name, namespace, body, fieldManager: FIELD_MANAGER }),
    },
    deployment: {
      read: (namespace, name) => apps.readNamespacedDeployment({ name, namespace }),
      apply: ssa,
      replace: (namespace, name, body) =>
        apps.replaceNamespacedDeployment({ name, namespace, body, fieldManager: FIELD_MANAGER }),
    },
    statefulSet: {
      read: (namespace, name) => apps.readNamespacedStatefulSet({ name, namespace }),
      apply: ssa,
      replace: (namespace, name, body) =>
        apps.replaceNamespacedStatefulSet({ name, namespace, body, fieldManager: FIELD_MANAGER }),
    },
    service: {
      read: (namespace, name) => core.readNamespacedService({ name, namespace }),
      apply: ssa,
      replace: (namespace, name, body) =>
        core.replaceNamespacedService({ name, namespace, body, fieldManager: FIELD_MANAGER }),
    },
    secret: {
      read: (namespace, name) => core.readNamespacedSecret({ name, namespace }),
      apply: ssa,
      replace: (namespace, name, body) =>
        core.replaceNamespacedSecret({ name, namespace, body, fieldManager: FIELD_MANAGER }),
    },
    ingress: {
      read: (namespace, name) => net.readNamespacedIngress({ name, namespace }),
      apply: ssa,
      replace: (namespace, name, body) =>
        net.replaceNamespacedIngress({ name, namespace, body, fieldManager: FIELD_MANAGER }),
    },
    httpRoute: {
      read: async (namespace, name) =>
        (await custom.getNamespacedCustomObject({ ...HTTP_ROUTES, namespace, name })) as HttpRoute,
      apply: ssa,
      replace: async (namespace, name, body) =>
        (await custom.replaceNamespacedCustomObject({
          ...HTTP_ROUTES,
          namespace,
          name,
          body,
          fieldManager: FIELD_MANAGER,
        })) as HttpRoute,
    },
    autoscaler: {
      read: (namespace, name) => autoscaling.readNamespacedHorizontalPodAutoscaler({ name, namespace }),
      apply: ssa,
      replace: (namespace, name, body) =>
        autoscaling.replaceNamespacedHorizontalPodAutoscaler({ name, namespace, body, fieldManager: FIELD_MANAGER }),
    },
    networkPolicy: {
      read: (namespace, name) => net.readNamespacedNetworkPolicy({ name, namespace }),
      apply: ssa,
      replace: (namespace, name, body) =>
        net.replaceNamespacedNetworkPolicy({ name, namespace, body, fieldManager: FIELD_MANAGER }),
    },
    roleBinding: {
      read: (namespace, name) => rbac.readNamespacedRoleBinding({ name, namespace }),
      apply: ssa,
      replace: (namespace, name, body) =>
        rbac.replaceNamespacedRoleBinding({ name, namespace, body, fieldManager: FIELD_MANAGER }),
    },
    resourceQuota: {
      read: (namespace, name) => core.readNamespacedResourceQuota({ name, namespace }),
      apply: ssa,
      replace: (namespace, name, body) =>
        core.replaceNamespacedResourceQuota({ name, namespace, body, fieldManager: FIELD_MANAGER }),
    },
    limitRange: {
      read: (namespace, name) => core.readNamespacedLimitRange({ name, namespace }),
      apply: ssa,
      replace: (namespace, name, body) =>
        core.replaceNamespacedLimitRange({ name, namespace, body, fieldManager: FIELD_MANAGER }),
    },
    endpointSlice: {
      read: (namespace, name) => discovery.readNamespacedEndpointSlice({ name, namespace }),
      apply: ssa,
      replace: (namespace, name, body) =>
        discovery.replaceNamespacedEndpointSlice({ name, namespace, body, fieldManager: FIELD_MANAGER }),
    },
  };
  return { apps, batch, core, net, custom, autoscaling, discovery, ops };
}

export async function orUndefined<T>(read: () => Promise<T>): Promise<T | undefined> {
  try {
    return await read();
  } catch (err) {
    if (isStatus(err, 404)) return undefined;
    throw err;
  }
}

/**
 * Deletes a child that is no longer wanted; reads first so a converged deployment sends no write. With `ours`, an
 * object of that name that is not the operator's (someone else's, by its labels) is left alone.
 */
export async function deleteIfPresent<T>(
  ctx: Pick<RuntimeContext, 'absent'>,
  key: string,
  del: () => Promise<unknown>,
  read: () => Promise<T>,
  /** Drops the deleted object from a read cache (cached-reads.ts). */
  forget?: () => void,
  ours?: (obj: T) => boolean,
): Promise<void> {
  // Known gone: this process saw it absent or deleted it, and only the runtime creates it (clearing the mark).
  // Without this, every resync of every deployment without an Ingress or autoscaler reads a 404 for each.
  if (ctx.absent.has(key)) return;
  let current: T;
  try {
    current = await read();
  } catch (err) {
    if (!isStatus(err, 404)) throw err;
    ctx.absent.add(key);
    return;
  }
  if (ours && !ours(current)) {
    ctx.absent.add(key);
    return;
  }
  try {
    await del();
  } catch (err) {
    if (!isStatus(err, 404)) throw err;
  }
  forget?.();
  ctx.absent.add(key);
}

/**
 * The controller read `dep` before this runtime call, perhaps before a cleanup that ran meanwhile (calls of one
 * deployment are serialised, reads are not): a cleaned-up uid counts as deleted, so nothing is written after it.
 */
export function beingDeleted(ctx: RuntimeContext, dep: AgentDeployment): boolean {
  return Boolean(dep.metadata.deletionTimestamp) || ctx.cleanedUp.has(dep.metadata.uid ?? '');
}

export function targetName(ref: DeploymentRef): Target {
  // Only name-derived fields are used for image names; owner comes from target().
  return {
    namespace: ref.namespace,
    name: ref.deployment,
    deploymentId: ref.deploymentId,
    tenantId: '',
    owner: { apiVersion: '', kind: '', name: '', uid: '' },
  };
}

/** Where the agent server's children go: the tenant's namespace (no owner reference can reach there) or ours. */
export function serverTarget(ctx: RuntimeContext, dep: AgentDeployment): Target {
  const owned = ownedTarget(ctx, dep);
  if (!ctx.perTenant) return owned;
  const { owner: _owner, ...rest } = owned;
  return { ...rest, namespace: tenantNamespaceName(ctx.opts.config.tenantNamespaces.prefix, owned.tenantId) };
}

/** Where build Jobs run: the configured build namespace, else the AgentDeployments' own. */
export function buildNamespace(ctx: Pick<RuntimeContext, 'opts'>): string {
  return ctx.opts.config.buildNamespace ?? ctx.opts.namespace;
}

/**
 * A build's children (Job, credential Secret, NetworkPolicy): owned by the AgentDeployment when they share its
 * namespace; in a build namespace of their own no owner reference can reach, and cleanup deletes them by label.
 */
export function buildTarget(ctx: RuntimeContext, dep: AgentDeployment): Target {
  const owned = ownedTarget(ctx, dep);
  const namespace = buildNamespace(ctx);
  if (namespace === owned.namespace) return owned;
  const { owner: _owner, ...rest } = owned;
  return { ...rest, namespace };
}

/** Children in the AgentDeployment's own namespace, owned by it. */
export function ownedTarget(ctx: RuntimeContext, dep: AgentDeployment): Target {
  return {
    namespace: dep.metadata.namespace ?? 'default',
    name: dep.metadata.name,
    deploymentId: dep.spec.deploymentId,
    tenantId: dep.spec.tenantId,
    owner: ownerReferenceTo(dep),
    deleting: beingDeleted(ctx, dep),
  };
}

/** The Deployment of a deployment's agent server, wherever it runs (names are unique: `ag-<uuid>`). */
export function serverDeployment(ctx: RuntimeContext, ref: DeploymentRef): Obj<V1Deployment> | undefined {
  if (!ctx.perTenant) return ctx.deployments.get(`${ref.namespace}/${ref.deployment}`);
  return ctx.deployments
    .list()
    .find((d) => d.metadata.name === ref.deployment && d.metadata.labels?.[LABEL_DEPLOYMENT] === ref.deployment);
}

// The Kubernetes runtime: builds run as Jobs (BuildKit), each deployment is one Deployment rolled from revision to
// revision, with its Secret, Service, optional Ingress and dev Postgres. Children are built by the pure builders,
// written only when they differ, and observed through informers whose changes wake the controllers. This class
// owns the clients, informers and per-deployment ordering; each concern is a module of its own (builds, deploy,
// rollout, cleanup, tenant-namespace).
import type {
  V1Deployment,
  V1Ingress,
  V1Job,
  V1NetworkPolicy,
  V1Pod,
  V1ReplicaSet,
  V1Secret,
  V1Service,
  V1StatefulSet,
  V2HorizontalPodAutoscaler,
} from '@kubernetes/client-node';
import { LABEL_DEPLOYMENT, runsImage, type AgentDeployment } from '../../../resources/index.ts';
import { Informer, type KubeObject } from '../../controller-kit/informer.ts';
import type {
  BuildSpec,
  BuildStatus,
  HeldResources,
  RevisionRef,
  Runtime,
  ServerSpec,
  ServerStatus,
} from '../types.ts';
import { build, builtImage, cancelBuild, NO_SOURCE_FETCH } from './builds.ts';
import { cachedOps } from './cached-reads.ts';
import { cleanup } from './cleanup.ts';
import {
  makeApiClients,
  type DeploymentRef,
  type KubernetesRuntimeOptions,
  type Obj,
  type RuntimeContext,
} from './context.ts';
import { deploy } from './deploy.ts';
import { watchIdle } from './idle.ts';
import type { HttpRoute } from './http-route.ts';
import { LABEL_INSTANCE, LABEL_REVISION, LABEL_TENANT } from './labels.ts';
import { childListWatch, DEFAULT_WATCH_TIMING, type ChildKind } from './list-watch.ts';
import { deploymentUrlOf, rollBack, routedRevision, serverStatus } from './rollout.ts';
import { resyncPullSecrets } from './tenant-namespace.ts';

export { tenantNamespaceName } from './tenant-namespace.ts';

const MANAGED = 'app.kubernetes.io/managed-by=agentplane-operator';

export class KubernetesRuntime implements Runtime {
  private readonly ctx: RuntimeContext;
  private readonly locks = new Map<string, Promise<void>>();
  private notify: (ref: RevisionRef) => void = () => {};
  /** The image pull secrets of our namespace, watched by name when tenant namespaces hold copies of them. */
  private readonly pullSources: Informer<Obj<V1Secret>>[] = [];
  private pullSync: Promise<void> = Promise.resolve();
  private stopIdle: () => void = () => {};
  /** Caches that only serve reads (cached-reads.ts); HTTPRoutes apart, since their CRD may not be installed. */
  private readonly readCaches: Informer<KubeObject>[] = [];

  constructor(private readonly opts: KubernetesRuntimeOptions) {
    const kc = opts.kubeConfig;
    const perTenant = opts.config.tenantNamespaces.enabled;
    const log = opts.logger.child({ component: 'kubernetes-runtime' });
    const builds = opts.config.buildNamespace ?? opts.namespace;
    const informer = <T extends KubeObject>(
      kind: ChildKind,
      namespace = opts.namespace,
      name: string = kind,
      selector = MANAGED,
    ) =>
      // With a namespace per tenant the children live in many namespaces: watch them cluster-wide.
      new Informer<T>(childListWatch<T>(kc, kind, perTenant ? undefined : namespace, selector), {
        name,
        logger: log,
        resyncMs: opts.resyncMs ?? 0,
      });
    const readCache = <T extends KubeObject>(kind: ChildKind, selector = MANAGED) => {
      // No resync: these only answer reads; the controllers' resyncs come from the informers above.
      const inf = new Informer<T>(childListWatch<T>(kc, kind, perTenant ? undefined : opts.namespace, selector), {
        name: kind,
        logger: log,
      });
      this.readCaches.push(inf as unknown as Informer<KubeObject>);
      return inf;
    };
    const pods = informer<Obj<V1Pod>>('pods');
    const deployments = informer<Obj<V1Deployment>>('deployments');
    const clients = makeApiClients(kc);
    // Every Ingress in reach, not only ours: a host served by any of them is refused to a deployment (admit).
    const ingresses = readCache<Obj<V1Ingress>>('ingresses', '');
    const httpRoutes = opts.config.gateway
      ? new Informer<Obj<HttpRoute>>(childListWatch(kc, 'httproutes', perTenant ? undefined : opts.namespace, ''), {
          name: 'httproutes',
          logger: log,
        })
      : undefined;
    const ops = clients.ops;
    ops.deployment = cachedOps(ops.deployment, deployments);
    ops.service = cachedOps(ops.service, readCache<Obj<V1Service>>('services'));
    ops.networkPolicy = cachedOps(ops.networkPolicy, readCache<Obj<V1NetworkPolicy>>('networkpolicies'));
    ops.statefulSet = cachedOps(ops.statefulSet, readCache<Obj<V1StatefulSet>>('statefulsets'));
    ops.autoscaler = cachedOps(ops.autoscaler, readCache<Obj<V2HorizontalPodAutoscaler>>('horizontalpodautoscalers'));
    ops.ingress = cachedOps(ops.ingress, ingresses);
    if (httpRoutes) ops.httpRoute = cachedOps(ops.httpRoute, httpRoutes);
    // Secrets only in our own namespace: watching them in every tenant namespace would take a right to read every
    // Secret of the cluster, which this operator never holds (with a namespace per tenant they are read one by one).
    if (!perTenant) ops.secret = cachedOps(ops.secret, readCache<Obj<V1Secret>>('secrets'));
    this.ctx = {
      opts,
      log,
      perTenant,
      ...clients,
      ingresses,
      httpRoutes,
      // The Secrets a deployment may reference carry the tenant label (policy.ts secretReferenceViolation).
      tenantSecrets: perTenant ? undefined : readCache<Obj<V1Secret>>('secrets', LABEL_TENANT),
      // Jobs are builds only: they live in the build namespace.
      jobs: informer<Obj<V1Job>>('jobs', builds),
      deployments,
      replicaSets: informer<Obj<V1ReplicaSet>>('replicasets'),
      pods,
      buildPods: perTenant || builds === opts.namespace ? pods : informer<Obj<V1Pod>>('pods', builds, 'build pods'),
      urls: new Map(),
      cleanedUp: new Set(),
      envSwept: new Map(),
      absent: new Set(),
      idle: new Map(),
    };
    for (const inf of this.childInformers() as Informer<Obj<{ metadata?: { labels?: Record<string, string> } }>>[]) {
      inf.onChange((obj) => this.changed(obj));
    }
    if (perTenant) {
      for (const name of new Set(opts.config.imagePullSecrets)) {
        const source = new Informer<Obj<V1Secret>>(
          childListWatch(kc, 'secrets', opts.namespace, '', DEFAULT_WATCH_TIMING, `metadata.name=${name}`),
          {
            name: `pull-secret ${name}`,
            logger: log,
            resyncMs: 0,
          },
        );
        // A rotated (or removed) pull secret reaches the tenant namespaces in use without waiting for a deploy.
        source.onChange(() => this.resyncPullSecrets());
        this.pullSources.push(source);
      }
    }
  }

  private childInformers() {
    const { jobs, deployments, replicaSets, pods, buildPods } = this.ctx;
    return [jobs, deployments, replicaSets, pods, ...(buildPods === pods ? [] : [buildPods])];
  }

  /** Lists and watches the children; resolves once every cache is filled. */
  async start(): Promise<void> {
    // HTTPRoutes are not awaited: without the Gateway API installed their list keeps failing, and reads fall back to
    // the server (which then answers what the deploy reports) instead of holding the operator's start.
    void this.ctx.httpRoutes?.start();
    await Promise.all(
      [...this.childInformers(), ...this.pullSources, ...this.readCaches].map((i) =>
        (i as Informer<KubeObject>).start(),
      ),
    );
    if (this.opts.config.idle.activator) this.stopIdle = watchIdle(this.ctx, (ref) => this.notify(ref));
  }

  async shutdown(): Promise<void> {
    this.stopIdle();
    for (const inf of [...this.childInformers(), ...this.pullSources, ...this.readCaches]) inf.stop();
    this.ctx.httpRoutes?.stop();
    await this.pullSync;
  }

  onChange(notify: (ref: RevisionRef) => void): void {
    this.notify = notify;
  }

  supports(source: string): { ok: true } | { ok: false; message: string } {
    // internal_docker: pushed to the deployment's repository in build.registry, pulled with the agents' pull secrets.
    if (runsImage(source)) return { ok: true };
    if (source === 'github') {
      return this.opts.config.registry
        ? { ok: true }
        : {
            ok: false,
            message:
              'Building from source needs a registry: set build.registry (and build.pushSecret) in the Helm values.',
          };
    }
    if (source === 'internal_source') {
      if (!this.opts.config.registry) {
        return {
          ok: false,
          message:
            'Building an uploaded source tarball needs a registry: set build.registry (and build.pushSecret) in the Helm values.',
        };
      }
      return this.opts.config.sourceFetch ? { ok: true } : { ok: false, message: NO_SOURCE_FETCH };
    }
    return { ok: false, message: `Unknown source "${source}".` };
  }

  build(spec: BuildSpec, held: HeldResources): Promise<BuildStatus> {
    return build(this.ctx, spec, held.deployment);
  }

  async hasBuild(ref: RevisionRef): Promise<boolean> {
    return Boolean(await builtImage(this.ctx, ref));
  }

  /**
   * Deploys, stops and cleans up of one deployment run one at a time: a cleanup never interleaves with a deploy
   * that read the deployment before its deletion and would write children after them.
   */
  deploy(spec: ServerSpec, held: HeldResources): Promise<ServerStatus> {
    return this.exclusive(spec, () => deploy(this.ctx, spec, held));
  }

  serverStatus(ref: RevisionRef): ServerStatus | undefined {
    return serverStatus(this.ctx, ref);
  }

  routedRevision(ref: DeploymentRef): string | undefined {
    return routedRevision(this.ctx, ref);
  }

  /** A rolling update moves traffic by itself once the new pods are ready; nothing else to switch. */
  async route(_ref: DeploymentRef, _revision: string): Promise<void> {}

  url(ref: DeploymentRef): string {
    return deploymentUrlOf(this.ctx, ref);
  }

  /** Stops a revision that must not run: its build if still running, and its rollout (rollout.ts rolls back). */
  async stop(ref: RevisionRef, held: HeldResources): Promise<void> {
    await cancelBuild(this.ctx, ref);
    await this.exclusive(ref, () => rollBack(this.ctx, ref, held.deployment));
  }

  async cleanup(ref: DeploymentRef, deployment: AgentDeployment): Promise<void> {
    await this.exclusive(ref, () => cleanup(this.ctx, ref, deployment));
  }

  /** Re-syncs the tenant namespaces' pull secret copies, one pass at a time. */
  private resyncPullSecrets(): void {
    this.pullSync = this.pullSync.then(() => resyncPullSecrets(this.ctx));
  }

  /** Runs `fn` after every earlier exclusive call for the same deployment has finished. */
  private async exclusive<T>(ref: DeploymentRef, fn: () => Promise<T>): Promise<T> {
    const key = `${ref.namespace}/${ref.deployment}`;
    const run = (this.locks.get(key) ?? Promise.resolve()).then(fn);
    const tail = run.then(
      () => undefined,
      () => undefined,
    );
    this.locks.set(key, tail);
    try {
      return await run;
    } finally {
      if (this.locks.get(key) === tail) this.locks.delete(key);
    }
  }

  private changed(obj: Obj<{ metadata?: { labels?: Record<string, string> } }>): void {
    const labels = obj.metadata.labels ?? {};
    const deployment = labels[LABEL_DEPLOYMENT] ?? labels[LABEL_INSTANCE];
    if (!deployment) return;
    // Children may live in a tenant or the build namespace; the AgentDeployment and its revisions are always in ours.
    const namespace = this.opts.namespace;
    const tpl = (obj as { spec?: { template?: { metadata?: { labels?: Record<string, string> } } } }).spec?.template
      ?.metadata?.labels;
    const revision = labels[LABEL_REVISION] ?? tpl?.[LABEL_REVISION];
    if (revision)
      this.notify({ namespace, deployment, deploymentId: labels['agentplane.dev/deployment-id'] ?? '', revision });
  }
}

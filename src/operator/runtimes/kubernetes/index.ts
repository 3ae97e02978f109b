// The Kubernetes runtime: builds run as Jobs (BuildKit), each deployment is one Deployment rolled from revision to
// revision, with its Secret, Service, optional Ingress and dev Postgres. Children are built by the pure builders,
// written only when they differ, and observed through informers whose changes wake the controllers.
import { deploymentAuthEnv } from '../../../lib/deployment-token.ts';
import { randomBytes } from 'node:crypto';
import {
  AppsV1Api,
  AutoscalingV2Api,
  BatchV1Api,
  CoreV1Api,
  CustomObjectsApi,
  NetworkingV1Api,
  RbacAuthorizationV1Api,
  type KubeConfig,
  type V1Deployment,
  type V1Ingress,
  type V1Job,
  type V1NetworkPolicy,
  type V1Pod,
  type V1ReplicaSet,
  type V1RoleBinding,
  type V1Secret,
  type V1Service,
  type V1StatefulSet,
  type V2HorizontalPodAutoscaler,
} from '@kubernetes/client-node';
import type { Logger } from '../../../lib/logger.ts';
import {
  GROUP,
  VERSION,
  LABEL_DEPLOYMENT,
  ownerReferenceTo,
  type AgentDeployment,
  type AgentRevision,
} from '../../../resources/index.ts';
import { Informer, type KubeObject } from '../../controller-kit/informer.ts';
import type {
  BuildSpec,
  BuildStatus,
  GitCredential,
  RevisionLogSink,
  RevisionRef,
  Runtime,
  ServerSpec,
  ServerStatus,
} from '../types.ts';
import { apply, isStatus, type ObjectOps } from './apply.ts';
import {
  BUILD_CONTAINER,
  buildCredentialSecretName,
  buildJobName,
  CLONE_CONTAINER,
  imageRepository,
  makeBuildCredentialSecret,
  makeBuildJob,
  PUSH_CONTAINER,
} from './build-job.ts';
import { serviceHost, type KubernetesRuntimeConfig } from './config.ts';
import { gitCredentialsFor, gitCredentialsSecretName } from './git-credentials.ts';
import { LABEL_INSTANCE, LABEL_REVISION, type Target } from './labels.ts';
import { makeKeysWriterBinding, makeTenantNamespace, tenantNamespaceName } from './tenant-namespace.ts';
import { childListWatch, DEFAULT_WATCH_TIMING } from './list-watch.ts';
import { LABEL_PULL_SECRET_COPY, makePullSecretCopy } from './pull-secrets.ts';
import { makeAgentNetworkPolicy, makeBuildNetworkPolicy, makePostgresNetworkPolicy } from './network-policy.ts';
import { buildStatusOf, rolloutStatusOf } from './observe.ts';
import {
  boundsViolation,
  hostOwner,
  secretReferenceViolation,
  verifyServiceAccount,
  type VerifiedServiceAccount,
} from './policy.ts';
import { makePostgresSecret, makePostgresService, makePostgresStatefulSet } from './postgres.ts';
import {
  ANNOTATION_URL,
  databaseFor,
  makeAutoscaler,
  deploymentUrl,
  ingressHost,
  makeDeployment,
  makeIngress,
  makeSecret,
  makeService,
  serverName,
} from './server.ts';

export type { KubernetesRuntimeConfig } from './config.ts';
export { tenantNamespaceName } from './tenant-namespace.ts';

const ANNOTATION_IMAGE = 'agentplane.dev/image';
const ANNOTATION_COMMIT = 'agentplane.dev/commit';
const ANNOTATION_LOGGED = 'agentplane.dev/logs-collected';
// Revision logs live in a ConfigMap, which the API server refuses over 1 MiB: at most this much of each build
// container's log is kept (its end, where failures are), and no line longer than LOG_LINE_BYTES.
const LOG_FETCH_BYTES = 4 * 1024 * 1024;
const LOG_CONTAINER_BYTES = 192 * 1024;
const LOG_LINE_BYTES = 4 * 1024;

/** The last lines of a log within `maxBytes` (UTF-8), each cut to LOG_LINE_BYTES; says how much was left out. */
export function capLog(lines: string[], maxBytes: number): string[] {
  const cut = lines.map((l) =>
    Buffer.byteLength(l) > LOG_LINE_BYTES
      ? `${Buffer.from(l)
          .subarray(0, LOG_LINE_BYTES)
          .toString('utf8')
          .replace(/\uFFFD$/, '')}… (line cut)`
      : l,
  );
  const kept: string[] = [];
  let bytes = 0;
  for (let i = cut.length - 1; i >= 0; i--) {
    bytes += Buffer.byteLength(cut[i]!) + 1;
    if (bytes > maxBytes) {
      kept.unshift(`… ${i + 1} earlier line(s) left out`);
      break;
    }
    kept.unshift(cut[i]!);
  }
  return kept;
}
const MANAGED = 'app.kubernetes.io/managed-by=agentplane-operator';

type Obj<T> = T & KubeObject;
type DeploymentRef = Omit<RevisionRef, 'revision'>;

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

export class KubernetesRuntime implements Runtime {
  private readonly apps: AppsV1Api;
  private readonly batch: BatchV1Api;
  private readonly core: CoreV1Api;
  private readonly net: NetworkingV1Api;
  private readonly custom: CustomObjectsApi;
  private readonly jobs: Informer<Obj<V1Job>>;
  private readonly deployments: Informer<Obj<V1Deployment>>;
  private readonly replicaSets: Informer<Obj<V1ReplicaSet>>;
  private readonly pods: Informer<Obj<V1Pod>>;
  private readonly urls = new Map<string, string>();
  private readonly locks = new Map<string, Promise<void>>();
  private notify: (ref: RevisionRef) => void = () => {};
  private readonly log: Logger;
  private readonly ops: {
    job: ObjectOps<V1Job>;
    deployment: ObjectOps<V1Deployment>;
    statefulSet: ObjectOps<V1StatefulSet>;
    service: ObjectOps<V1Service>;
    secret: ObjectOps<V1Secret>;
    ingress: ObjectOps<V1Ingress>;
    autoscaler: ObjectOps<V2HorizontalPodAutoscaler>;
    networkPolicy: ObjectOps<V1NetworkPolicy>;
    roleBinding: ObjectOps<V1RoleBinding>;
  };
  private readonly autoscaling: AutoscalingV2Api;
  private readonly perTenant: boolean;
  /** The image pull secrets of our namespace, watched by name when tenant namespaces hold copies of them. */
  private readonly pullSources: Informer<Obj<V1Secret>>[] = [];
  private pullSync: Promise<void> = Promise.resolve();

  constructor(private readonly opts: KubernetesRuntimeOptions) {
    const kc = opts.kubeConfig;
    this.perTenant = opts.config.tenantNamespaces.enabled;
    this.apps = kc.makeApiClient(AppsV1Api);
    this.batch = kc.makeApiClient(BatchV1Api);
    this.core = kc.makeApiClient(CoreV1Api);
    this.net = kc.makeApiClient(NetworkingV1Api);
    this.custom = kc.makeApiClient(CustomObjectsApi);
    this.autoscaling = kc.makeApiClient(AutoscalingV2Api);
    this.log = opts.logger.child({ component: 'kubernetes-runtime' });
    const informer = <T extends KubeObject>(kind: 'jobs' | 'deployments' | 'replicasets' | 'pods') =>
      // With a namespace per tenant the children live in many namespaces: watch them cluster-wide.
      new Informer<T>(childListWatch<T>(kc, kind, this.perTenant ? undefined : opts.namespace, MANAGED), {
        name: kind,
        logger: this.log,
        resyncMs: opts.resyncMs ?? 0,
      });
    this.jobs = informer('jobs');
    this.deployments = informer('deployments');
    this.replicaSets = informer('replicasets');
    this.pods = informer('pods');
    for (const inf of [this.jobs, this.deployments, this.replicaSets, this.pods] as Informer<
      Obj<{ metadata?: { labels?: Record<string, string> } }>
    >[]) {
      inf.onChange((obj) => this.changed(obj));
    }
    if (this.perTenant) {
      for (const name of new Set(opts.config.imagePullSecrets)) {
        const source = new Informer<Obj<V1Secret>>(
          childListWatch(kc, 'secrets', opts.namespace, '', DEFAULT_WATCH_TIMING, `metadata.name=${name}`),
          {
            name: `pull-secret ${name}`,
            logger: this.log,
            resyncMs: 0,
          },
        );
        // A rotated (or removed) pull secret reaches the tenant namespaces in use without waiting for a deploy.
        source.onChange(() => this.resyncPullSecrets());
        this.pullSources.push(source);
      }
    }
    const { apps, batch, core, net, autoscaling } = this;
    const rbac = kc.makeApiClient(RbacAuthorizationV1Api);
    this.ops = {
      job: {
        read: (namespace, name) => batch.readNamespacedJob({ name, namespace }),
        create: (namespace, body) => batch.createNamespacedJob({ namespace, body }),
        replace: (namespace, name, body) => batch.replaceNamespacedJob({ name, namespace, body }),
      },
      deployment: {
        read: (namespace, name) => apps.readNamespacedDeployment({ name, namespace }),
        create: (namespace, body) => apps.createNamespacedDeployment({ namespace, body }),
        replace: (namespace, name, body) => apps.replaceNamespacedDeployment({ name, namespace, body }),
      },
      statefulSet: {
        read: (namespace, name) => apps.readNamespacedStatefulSet({ name, namespace }),
        create: (namespace, body) => apps.createNamespacedStatefulSet({ namespace, body }),
        replace: (namespace, name, body) => apps.replaceNamespacedStatefulSet({ name, namespace, body }),
      },
      service: {
        read: (namespace, name) => core.readNamespacedService({ name, namespace }),
        create: (namespace, body) => core.createNamespacedService({ namespace, body }),
        replace: (namespace, name, body) => core.replaceNamespacedService({ name, namespace, body }),
      },
      secret: {
        read: (namespace, name) => core.readNamespacedSecret({ name, namespace }),
        create: (namespace, body) => core.createNamespacedSecret({ namespace, body }),
        replace: (namespace, name, body) => core.replaceNamespacedSecret({ name, namespace, body }),
      },
      ingress: {
        read: (namespace, name) => net.readNamespacedIngress({ name, namespace }),
        create: (namespace, body) => net.createNamespacedIngress({ namespace, body }),
        replace: (namespace, name, body) => net.replaceNamespacedIngress({ name, namespace, body }),
      },
      autoscaler: {
        read: (namespace, name) => autoscaling.readNamespacedHorizontalPodAutoscaler({ name, namespace }),
        create: (namespace, body) => autoscaling.createNamespacedHorizontalPodAutoscaler({ namespace, body }),
        replace: (namespace, name, body) =>
          autoscaling.replaceNamespacedHorizontalPodAutoscaler({ name, namespace, body }),
      },
      networkPolicy: {
        read: (namespace, name) => net.readNamespacedNetworkPolicy({ name, namespace }),
        create: (namespace, body) => net.createNamespacedNetworkPolicy({ namespace, body }),
        replace: (namespace, name, body) => net.replaceNamespacedNetworkPolicy({ name, namespace, body }),
      },
      roleBinding: {
        read: (namespace, name) => rbac.readNamespacedRoleBinding({ name, namespace }),
        create: (namespace, body) => rbac.createNamespacedRoleBinding({ namespace, body }),
        replace: (namespace, name, body) => rbac.replaceNamespacedRoleBinding({ name, namespace, body }),
      },
    };
  }

  /** Lists and watches the children; resolves once every cache is filled. */
  async start(): Promise<void> {
    await Promise.all([
      this.jobs.start(),
      this.deployments.start(),
      this.replicaSets.start(),
      this.pods.start(),
      ...this.pullSources.map((i) => i.start()),
    ]);
  }

  async shutdown(): Promise<void> {
    for (const inf of [this.jobs, this.deployments, this.replicaSets, this.pods, ...this.pullSources]) inf.stop();
    await this.pullSync;
  }

  onChange(notify: (ref: RevisionRef) => void): void {
    this.notify = notify;
  }

  supports(source: string): { ok: true } | { ok: false; message: string } {
    if (source === 'external_docker') return { ok: true };
    if (source === 'github') {
      return this.opts.config.registry
        ? { ok: true }
        : {
            ok: false,
            message:
              'Building from source needs a registry: set build.registry (and build.pushSecret) in the Helm values.',
          };
    }
    return { ok: false, message: `Unknown source "${source}".` };
  }

  // ---- builds ----

  async build(spec: BuildSpec): Promise<BuildStatus> {
    const key = `${spec.namespace}/${buildJobName(spec.revision)}`;
    let job: V1Job | undefined = this.jobs.get(key);
    if (!job) {
      // Builds stay in the operator's namespace even with a namespace per tenant: that is where the push secret is,
      // and a copy in every tenant namespace would widen who can read it.
      const target = await this.ownedTarget(spec);
      if (target.deleting) return { phase: 'Running' };
      // An integration's credential (minted now, for this build) wins over the tenant's shared Secret.
      let credential: GitCredential | undefined;
      if (spec.integrationId && spec.tenantId && this.opts.gitCredential) {
        try {
          credential = await this.opts.gitCredential(spec.tenantId, spec.integrationId, spec.repoUrl);
        } catch (err) {
          return { phase: 'Failed', message: String((err as Error).message).split('\n')[0]! };
        }
      }
      const gitCredentialsSecret = credential
        ? buildCredentialSecretName(spec.revision)
        : await this.gitCredentials(target, spec);
      let desired: V1Job;
      try {
        desired = makeBuildJob(target, { ...spec, gitCredentialsSecret }, this.opts.config);
      } catch (err) {
        return { phase: 'Failed', message: (err as Error).message };
      }
      if (this.opts.config.networkPolicy.enabled)
        await apply(this.ops.networkPolicy, makeBuildNetworkPolicy(target, this.opts.config));
      const created = await apply(this.ops.job, desired, { createOnly: true });
      job = created.object;
      // The pod waits for the Secret (its volume); the Secret names the Job as its owner, so it needs the Job's uid.
      if (credential && job.metadata?.uid) {
        try {
          await this.core.createNamespacedSecret({
            namespace: job.metadata.namespace!,
            body: makeBuildCredentialSecret(job, credential),
          });
        } catch (err) {
          if (!isStatus(err, 409)) throw err;
        }
      }
      this.log.info({ revision: spec.revision, job: job.metadata?.name }, 'build job created');
    }
    return this.observeBuild(spec, job);
  }

  /** The tenant's own git credentials Secret, when it covers the repository (why not is logged, never shown). */
  private async gitCredentials(target: Target, spec: BuildSpec): Promise<string | undefined> {
    const prefix = this.opts.config.gitCredentialsSecretPrefix;
    if (!prefix) return undefined;
    const name = gitCredentialsSecretName(prefix, target.tenantId);
    const secret = await orUndefined(() => this.core.readNamespacedSecret({ name, namespace: target.namespace }));
    const chosen = gitCredentialsFor(secret, target.tenantId, spec.repoUrl);
    if ('reason' in chosen) {
      this.log.info(
        { revision: spec.revision, secret: name, reason: chosen.reason },
        'build clones without git credentials',
      );
      return undefined;
    }
    return chosen.name;
  }

  async hasBuild(ref: RevisionRef): Promise<boolean> {
    return Boolean(await this.builtImage(ref));
  }

  private async builtImage(ref: RevisionRef): Promise<string | undefined> {
    const name = buildJobName(ref.revision);
    const cached = this.jobs.get(`${ref.namespace}/${name}`);
    if (cached) return cached.metadata.annotations?.[ANNOTATION_IMAGE];
    try {
      return (await this.batch.readNamespacedJob({ name, namespace: ref.namespace })).metadata?.annotations?.[
        ANNOTATION_IMAGE
      ];
    } catch (err) {
      if (isStatus(err, 404)) return undefined;
      throw err;
    }
  }

  private async observeBuild(spec: BuildSpec, job: V1Job): Promise<BuildStatus> {
    const ann = job.metadata?.annotations ?? {};
    if (ann[ANNOTATION_IMAGE] && ann[ANNOTATION_COMMIT])
      return { phase: 'Succeeded', commitSha: ann[ANNOTATION_COMMIT], image: ann[ANNOTATION_IMAGE] };
    const jobName = job.metadata!.name!;
    const repository = imageRepository(this.opts.config, this.targetName(spec));
    let pod: V1Pod | undefined = this.pods
      .list()
      .find(
        (p) =>
          p.metadata.labels?.['job-name'] === jobName ||
          p.metadata.labels?.['batch.kubernetes.io/job-name'] === jobName,
      );
    let status = buildStatusOf(job, pod, repository);
    if (status.phase === 'Running') return status;
    // Separate watches may deliver the Job's end before its pod's: read the pod itself before concluding.
    const fresh = (
      await this.core.listNamespacedPod({ namespace: spec.namespace, labelSelector: `job-name=${jobName}` })
    ).items[0];
    if (fresh) {
      pod = fresh;
      status = buildStatusOf(job, pod, repository);
    }
    const credentialSecret = buildCredentialSecretName(spec.revision);
    const usesCredential = (job.spec?.template.spec?.volumes ?? []).some(
      (v) => v.secret?.secretName === credentialSecret,
    );
    if (!ann[ANNOTATION_LOGGED]) {
      // The build's own credential Secret is not needed any more (builds without an integration have none).
      if (usesCredential)
        await this.core
          .deleteNamespacedSecret({ name: credentialSecret, namespace: spec.namespace })
          .catch((err: unknown) => {
            // 403: the chart grants deleting Secrets only with a namespace per tenant; the Secret then goes with its Job.
            if (isStatus(err, 403))
              this.log.info(
                { revision: spec.revision },
                'build credential Secret left to garbage collection with its Job',
              );
            else if (!isStatus(err, 404))
              this.log.warn({ revision: spec.revision }, 'removing the build credential failed');
          });
      await this.collectBuildLog(spec, pod, status);
      // Recording the result on the Job keeps it after the pod is gone and makes the log copy happen once.
      const annotations = {
        ...ann,
        [ANNOTATION_LOGGED]: 'true',
        ...(status.phase === 'Succeeded'
          ? { [ANNOTATION_IMAGE]: status.image!, [ANNOTATION_COMMIT]: status.commitSha }
          : {}),
      };
      await apply(this.ops.job, { ...job, metadata: { ...job.metadata, annotations } } as V1Job, { owned: false });
    }
    return status;
  }

  private async collectBuildLog(spec: BuildSpec, pod: V1Pod | undefined, status: BuildStatus): Promise<void> {
    const lines: string[] = [];
    for (const container of [CLONE_CONTAINER, BUILD_CONTAINER, PUSH_CONTAINER]) {
      if (!pod?.metadata?.name) break;
      try {
        const text = await this.core.readNamespacedPodLog({
          name: pod.metadata.name,
          namespace: spec.namespace,
          container,
          tailLines: 500,
          limitBytes: LOG_FETCH_BYTES,
        });
        lines.push(
          ...capLog(String(text).split('\n').filter(Boolean), LOG_CONTAINER_BYTES).map((l) => `[${container}] ${l}`),
        );
      } catch (err) {
        lines.push(`[${container}] log unavailable: ${(err as Error).message.split('\n')[0]}`);
      }
    }
    lines.push(
      status.phase === 'Failed'
        ? status.message
        : `Build succeeded: ${status.phase === 'Succeeded' ? status.image : ''}`,
    );
    await this.opts.logs.append(spec, 'build', lines);
  }

  // ---- servers ----

  /**
   * Deploys, stops and cleans up of one deployment run one at a time: a cleanup never interleaves with a deploy
   * that read the deployment before its deletion and would write children after them.
   */
  async deploy(spec: ServerSpec): Promise<ServerStatus> {
    return this.exclusive(spec, () => this.deployNow(spec));
  }

  private async deployNow(spec: ServerSpec): Promise<ServerStatus> {
    const rev = await this.getCustom<AgentRevision>('agentrevisions', spec.namespace, spec.revision);
    const target = await this.target(spec);
    // Nothing new for a deployment being deleted: children written after its cleanup would outlive it.
    if (target.deleting) return { phase: 'Starting' };
    const image =
      rev.spec.source === 'external_docker' ? rev.spec.sourceRevisionConfig.imageUri : await this.builtImage(spec);
    if (!image)
      return {
        phase: 'Failed',
        message:
          rev.spec.source === 'external_docker'
            ? 'image_uri is required for external_docker'
            : 'No built image for this revision.',
      };
    const cfg = this.opts.config;
    const env = { ...spec.env, ...deploymentAuthEnv(cfg.agentAuth, spec.tenantId, spec.deploymentId) };
    const envNames = Object.keys(env).sort();
    const refs = rev.spec.secretReferences ?? [];
    const sourceConfig = rev.spec.sourceConfig;

    // What the tenant asked for is checked before anything is written: a refused revision leaves no trace.
    const admitted = await this.admit(target, rev);
    if ('message' in admitted) {
      await this.opts.logs.append(spec, 'deploy', [admitted.message]);
      return { phase: 'Failed', message: admitted.message };
    }
    const publicAccess = sourceConfig.accessMode === 'public';
    const { host } = admitted;
    let url: string;
    let deployment: V1Deployment;
    try {
      // A custom_url with a scheme is what users call (TLS may end before the Ingress); else what we serve.
      url = sourceConfig.customUrl?.includes('://')
        ? new URL(sourceConfig.customUrl).origin
        : deploymentUrl(target, host, cfg);
      deployment = makeDeployment(
        target,
        {
          revision: spec.revision,
          image,
          resourceSpec: sourceConfig.resourceSpec,
          envNames,
          secretReferences: refs,
          url,
          serviceAccount: admitted.serviceAccount,
          public: publicAccess,
        },
        cfg,
      );
    } catch (err) {
      return { phase: 'Failed', message: (err as Error).message };
    }
    const internalDb = databaseFor(envNames, refs).kind === 'internal';
    if (internalDb && cfg.postgres.mode === 'external') {
      return {
        phase: 'Failed',
        message:
          'No DATABASE_URI: this cluster needs an external Postgres (postgres mode external); add a secret or secret_reference named DATABASE_URI.',
      };
    }
    if (this.perTenant) await this.ensureTenantNamespace(target);
    // Policies first, so no pod of the deployment ever runs unprotected.
    if (cfg.networkPolicy.enabled) {
      await apply(this.ops.networkPolicy, makeAgentNetworkPolicy(target, cfg));
      if (internalDb) await apply(this.ops.networkPolicy, makePostgresNetworkPolicy(target));
    }
    if (envNames.length) await apply(this.ops.secret, makeSecret(target, spec.revision, env), { createOnly: true });
    if (internalDb) {
      await apply(this.ops.secret, makePostgresSecret(target, randomBytes(18).toString('base64url'), cfg), {
        createOnly: true,
      });
      await apply(this.ops.service, makePostgresService(target));
      await apply(this.ops.statefulSet, makePostgresStatefulSet(target, cfg));
    }
    const written = await apply(this.ops.deployment, deployment);
    await apply(this.ops.service, makeService(target));
    const ingressName = { name: serverName(target), namespace: target.namespace };
    if (host) await apply(this.ops.ingress, makeIngress(target, host, cfg));
    // A custom_url (or base domain) removed: the host is no longer served.
    else
      await this.deleteIfPresent(
        () => this.net.deleteNamespacedIngress(ingressName),
        () => this.net.readNamespacedIngress(ingressName),
      );
    const hpa = makeAutoscaler(target, sourceConfig.resourceSpec);
    if (hpa) await apply(this.ops.autoscaler, hpa);
    else
      await this.deleteIfPresent(
        () =>
          this.autoscaling.deleteNamespacedHorizontalPodAutoscaler({
            name: serverName(target),
            namespace: target.namespace,
          }),
        () =>
          this.autoscaling.readNamespacedHorizontalPodAutoscaler({
            name: serverName(target),
            namespace: target.namespace,
          }),
      );
    this.urls.set(`${spec.namespace}/${spec.deployment}`, url);
    if (written.wrote) this.log.info({ deployment: spec.deployment, revision: spec.revision }, 'rollout started');

    const current = written.wrote
      ? written.object
      : (this.deployments.get(`${target.namespace}/${serverName(target)}`) ?? written.object);
    const status = rolloutStatusOf(
      current,
      this.replicaSets.list(),
      this.pods.list(),
      spec.revision,
      cfg.crashLoopRestarts,
    ) ?? { phase: 'Starting' };
    if (status.phase === 'Failed') await this.opts.logs.append(spec, 'deploy', [status.message]);
    return status;
  }

  serverStatus(ref: RevisionRef): ServerStatus | undefined {
    const d = this.serverDeployment(ref);
    return rolloutStatusOf(
      d,
      this.replicaSets.list(),
      this.pods.list(),
      ref.revision,
      this.opts.config.crashLoopRestarts,
    );
  }

  /**
   * The revision whose pods serve: the Deployment's once its rollout is done, else the newest ReplicaSet that
   * still has available pods (the old revision during a rollout or after a rollback).
   */
  routedRevision(ref: DeploymentRef): string | undefined {
    const d = this.serverDeployment(ref);
    if (!d) return undefined;
    const running = d.spec?.template?.metadata?.labels?.[LABEL_REVISION];
    if (running && this.serverStatus({ ...ref, revision: running })?.phase === 'Ready') return running;
    const serving = this.ownedReplicaSets(d)
      .filter((rs) => (rs.status?.availableReplicas ?? 0) > 0)
      .sort((a, b) => revisionNumberOf(b) - revisionNumberOf(a))[0];
    return serving?.spec?.template?.metadata?.labels?.[LABEL_REVISION];
  }

  /** A rolling update moves traffic by itself once the new pods are ready; nothing else to switch. */
  async route(_ref: DeploymentRef, _revision: string): Promise<void> {}

  url(ref: DeploymentRef): string {
    const known =
      this.urls.get(`${ref.namespace}/${ref.deployment}`) ??
      this.serverDeployment(ref)?.metadata.annotations?.[ANNOTATION_URL];
    if (known) return known;
    const base = this.opts.config.ingress.baseDomain;
    return base
      ? `http://${ref.deployment}.${base}`
      : `http://${serviceHost(ref.deployment, ref.namespace, this.opts.config)}`;
  }

  /**
   * Stops a revision that must not run: when the Deployment is rolling to it (say it failed), roll back to the
   * pod template of the revision still serving, or scale to zero when none serves.
   */
  async stop(ref: RevisionRef): Promise<void> {
    await this.cancelBuild(ref);
    await this.exclusive(ref, () => this.rollBackNow(ref));
  }

  private async rollBackNow(ref: RevisionRef): Promise<void> {
    const d = this.serverDeployment(ref);
    if (!d || d.spec?.template?.metadata?.labels?.[LABEL_REVISION] !== ref.revision) return;
    const routed = this.routedRevision(ref);
    if (routed === ref.revision) return;
    // A deployment being deleted keeps what it has (apply could recreate a child its cleanup just removed).
    if (await this.beingDeleted(ref)) return;
    const back = routed
      ? this.ownedReplicaSets(d).find((rs) => rs.spec?.template?.metadata?.labels?.[LABEL_REVISION] === routed)
      : undefined;
    if (back?.spec?.template) {
      const { ['pod-template-hash']: _h, ...labels } = back.spec.template.metadata?.labels ?? {};
      const template = { ...back.spec.template, metadata: { ...back.spec.template.metadata, labels } };
      await apply(this.ops.deployment, { ...d, spec: { ...d.spec!, template } } as V1Deployment, { owned: false });
      this.log.info({ deployment: ref.deployment, from: ref.revision, to: routed }, 'rolled back');
    } else if ((d.spec?.replicas ?? 0) > 0) {
      await apply(this.ops.deployment, { ...d, spec: { ...d.spec!, replicas: 0 } } as V1Deployment, { owned: false });
      this.log.info({ deployment: ref.deployment, revision: ref.revision }, 'scaled to zero');
    }
  }

  /** A build still running for a revision that will never run (superseded) is stopped; finished ones stay. */
  private async cancelBuild(ref: RevisionRef): Promise<void> {
    const job = this.jobs.get(`${ref.namespace}/${buildJobName(ref.revision)}`);
    const finished = job?.status?.conditions?.some(
      (c) => (c.type === 'Complete' || c.type === 'Failed') && c.status === 'True',
    );
    if (!job || finished || job.metadata.annotations?.[ANNOTATION_IMAGE]) return;
    try {
      await this.batch.deleteNamespacedJob({
        name: job.metadata.name,
        namespace: ref.namespace,
        propagationPolicy: 'Background',
      });
      this.log.info({ revision: ref.revision }, 'build cancelled');
    } catch (err) {
      if (!isStatus(err, 404)) throw err;
    }
  }

  /**
   * Children in the AgentDeployment's namespace carry owner references to it and the garbage collector removes
   * them. In a tenant namespace owner references cannot point across namespaces, so the children are deleted here
   * by label, while the deployment's finalizer holds it (the controller removes the finalizer after this).
   */
  async cleanup(ref: DeploymentRef): Promise<void> {
    await this.exclusive(ref, () => this.cleanupNow(ref));
  }

  private async cleanupNow(ref: DeploymentRef): Promise<void> {
    if (this.perTenant) {
      const dep = await orUndefined(() =>
        this.getCustom<AgentDeployment>('agentdeployments', ref.namespace, ref.deployment),
      );
      if (dep)
        await this.deleteTenantChildren(
          tenantNamespaceName(this.opts.config.tenantNamespaces.prefix, dep.spec.tenantId),
          ref.deployment,
        );
    }
    this.urls.delete(`${ref.namespace}/${ref.deployment}`);
  }

  private async deleteTenantChildren(namespace: string, deployment: string): Promise<void> {
    const labelSelector = `${LABEL_DEPLOYMENT}=${deployment}`;
    const q = { namespace, labelSelector };
    const names = (list: { items: { metadata?: { name?: string } }[] }) => list.items.map((o) => o.metadata!.name!);
    const { apps, core, net, autoscaling, batch } = this;
    const kinds: [string, () => Promise<string[]>, (name: string) => Promise<unknown>][] = [
      [
        'deployments',
        async () => names(await apps.listNamespacedDeployment(q)),
        (name) => apps.deleteNamespacedDeployment({ name, namespace }),
      ],
      [
        'statefulsets',
        async () => names(await apps.listNamespacedStatefulSet(q)),
        (name) => apps.deleteNamespacedStatefulSet({ name, namespace }),
      ],
      [
        'horizontalpodautoscalers',
        async () => names(await autoscaling.listNamespacedHorizontalPodAutoscaler(q)),
        (name) => autoscaling.deleteNamespacedHorizontalPodAutoscaler({ name, namespace }),
      ],
      [
        'ingresses',
        async () => names(await net.listNamespacedIngress(q)),
        (name) => net.deleteNamespacedIngress({ name, namespace }),
      ],
      [
        'services',
        async () => names(await core.listNamespacedService(q)),
        (name) => core.deleteNamespacedService({ name, namespace }),
      ],
      [
        'secrets',
        async () => names(await core.listNamespacedSecret(q)),
        (name) => core.deleteNamespacedSecret({ name, namespace }),
      ],
      [
        'jobs',
        async () => names(await batch.listNamespacedJob(q)),
        (name) => batch.deleteNamespacedJob({ name, namespace, propagationPolicy: 'Background' }),
      ],
      // Last: the pods above are gone or going before their traffic rules are.
      [
        'networkpolicies',
        async () => names(await net.listNamespacedNetworkPolicy(q)),
        (name) => net.deleteNamespacedNetworkPolicy({ name, namespace }),
      ],
    ];
    for (const [kind, list, del] of kinds) {
      for (const name of await list()) {
        try {
          await del(name);
        } catch (err) {
          if (!isStatus(err, 404)) throw err;
        }
        this.log.info({ namespace, kind, name }, 'deleted tenant namespace child');
      }
    }
  }

  /**
   * The tenant's namespace, created on first use and labelled with the tenant (what admins select by), with the
   * control plane allowed to keep the tenant's keys Secret in it.
   */
  private async ensureTenantNamespace(target: Target): Promise<void> {
    const name = target.namespace;
    const existing = await orUndefined(() => this.core.readNamespace({ name }));
    // A terminating namespace refuses new content (403) until its controller has emptied and removed it; then it
    // is created afresh. Failing the reconcile retries it with backoff meanwhile.
    if (existing?.metadata?.deletionTimestamp)
      throw new Error(`tenant namespace ${name} is being deleted; its deployments wait until it is gone`);
    if (!existing) {
      try {
        await this.core.createNamespace({ body: makeTenantNamespace(name, target.tenantId) });
        this.log.info({ namespace: name }, 'tenant namespace created');
      } catch (err) {
        if (!isStatus(err, 409)) throw err;
      }
    }
    const { keysWriter, keysRole } = this.opts.config.tenantNamespaces;
    if (keysWriter && keysRole) await apply(this.ops.roleBinding, makeKeysWriterBinding(name, keysWriter, keysRole));
    await this.syncPullSecrets(name);
  }

  /**
   * Makes the tenant namespace hold exactly the configured image pull secrets, as copies of ours: written when the
   * source differs, removed when the source is gone or no longer configured.
   */
  private async syncPullSecrets(namespace: string): Promise<void> {
    const wanted = new Set(this.opts.config.imagePullSecrets);
    for (const name of wanted) {
      const source = await orUndefined(() => this.core.readNamespacedSecret({ name, namespace: this.opts.namespace }));
      if (source) await apply(this.ops.secret, makePullSecretCopy(source, namespace));
      else
        this.log.warn(
          { secret: name, namespace: this.opts.namespace },
          'image pull secret not found; agent pods cannot use it',
        );
    }
    const copies = (
      await this.core.listNamespacedSecret({ namespace, labelSelector: `${LABEL_PULL_SECRET_COPY}=true` })
    ).items;
    for (const copy of copies) {
      const name = copy.metadata!.name!;
      const sourceGone =
        wanted.has(name) &&
        !(await orUndefined(() => this.core.readNamespacedSecret({ name, namespace: this.opts.namespace })));
      if (wanted.has(name) && !sourceGone) continue;
      try {
        await this.core.deleteNamespacedSecret({ name, namespace });
        this.log.info({ namespace, secret: name }, 'removed image pull secret copy');
      } catch (err) {
        if (!isStatus(err, 404)) throw err;
      }
    }
  }

  /** Re-syncs the pull secret copies of every tenant namespace that runs an agent, one pass at a time. */
  private resyncPullSecrets(): void {
    this.pullSync = this.pullSync.then(async () => {
      const namespaces = new Set(
        this.deployments
          .list()
          .map((d) => d.metadata.namespace)
          .filter((ns): ns is string => Boolean(ns) && ns !== this.opts.namespace),
      );
      for (const ns of namespaces) {
        try {
          const current = await orUndefined(() => this.core.readNamespace({ name: ns }));
          if (current && !current.metadata?.deletionTimestamp) await this.syncPullSecrets(ns);
        } catch (err) {
          this.log.warn({ err, namespace: ns }, 'syncing image pull secrets failed; the next deploy retries');
        }
      }
    });
  }

  /** The Deployment of a deployment's agent server, wherever it runs (names are unique: `ag-<uuid>`). */
  private serverDeployment(ref: DeploymentRef): Obj<V1Deployment> | undefined {
    if (!this.perTenant) return this.deployments.get(`${ref.namespace}/${ref.deployment}`);
    return this.deployments
      .list()
      .find((d) => d.metadata.name === ref.deployment && d.metadata.labels?.[LABEL_DEPLOYMENT] === ref.deployment);
  }

  /**
   * The tenant-controlled parts of a revision against the cluster: bounds, the ServiceAccount, every referenced
   * Secret and the Ingress host (allowed domain, not served by another deployment).
   */
  private async admit(
    target: Target,
    rev: AgentRevision,
  ): Promise<{ message: string } | { host?: string; serviceAccount?: VerifiedServiceAccount }> {
    const cfg = this.opts.config;
    const { resourceSpec, customUrl } = rev.spec.sourceConfig;
    const bounds = boundsViolation(resourceSpec, cfg.limits);
    if (bounds) return { message: bounds };
    let serviceAccount: VerifiedServiceAccount | undefined;
    if (resourceSpec?.serviceAccountName) {
      const name = resourceSpec.serviceAccountName;
      const account = await orUndefined(() =>
        this.core.readNamespacedServiceAccount({ name, namespace: target.namespace }),
      );
      const verified = verifyServiceAccount(name, account, target.tenantId);
      if (!verified.ok) return { message: verified.message };
      serviceAccount = verified.serviceAccount;
    }
    for (const ref of rev.spec.secretReferences ?? []) {
      const secret = await orUndefined(() =>
        this.core.readNamespacedSecret({ name: ref.secretName, namespace: target.namespace }),
      );
      const problem = secretReferenceViolation(ref, secret, target.tenantId, cfg);
      if (problem) return { message: problem };
    }
    let host: string | undefined;
    try {
      host = ingressHost(target, customUrl, cfg);
    } catch (err) {
      return { message: (err as Error).message };
    }
    if (host) {
      const ingresses = this.perTenant
        ? (await this.net.listIngressForAllNamespaces()).items
        : (await this.net.listNamespacedIngress({ namespace: target.namespace })).items;
      const owner = hostOwner(host, ingresses, target);
      if (owner) return { message: `host "${host}" is already served by another deployment (${owner})` };
    }
    return { host, serviceAccount };
  }

  // ---- helpers ----

  private async beingDeleted(ref: DeploymentRef): Promise<boolean> {
    const dep = await orUndefined(() =>
      this.getCustom<AgentDeployment>('agentdeployments', ref.namespace, ref.deployment),
    );
    return !dep || Boolean(dep.metadata.deletionTimestamp);
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

  /** Deletes a child that is no longer wanted; reads first so a converged deployment sends no write. */
  private async deleteIfPresent(del: () => Promise<unknown>, read: () => Promise<unknown>): Promise<void> {
    try {
      await read();
    } catch (err) {
      if (isStatus(err, 404)) return;
      throw err;
    }
    try {
      await del();
    } catch (err) {
      if (!isStatus(err, 404)) throw err;
    }
  }

  private ownedReplicaSets(d: V1Deployment): V1ReplicaSet[] {
    return this.replicaSets.list().filter((rs) => rs.metadata.ownerReferences?.some((o) => o.uid === d.metadata?.uid));
  }

  private changed(obj: Obj<{ metadata?: { labels?: Record<string, string> } }>): void {
    const labels = obj.metadata.labels ?? {};
    const deployment = labels[LABEL_DEPLOYMENT] ?? labels[LABEL_INSTANCE];
    if (!deployment) return;
    // Children may live in a tenant namespace; the AgentDeployment and its revisions are always in ours.
    const namespace = this.perTenant ? this.opts.namespace : (obj.metadata.namespace ?? this.opts.namespace);
    const tpl = (obj as { spec?: { template?: { metadata?: { labels?: Record<string, string> } } } }).spec?.template
      ?.metadata?.labels;
    const revision = labels[LABEL_REVISION] ?? tpl?.[LABEL_REVISION];
    if (revision)
      this.notify({ namespace, deployment, deploymentId: labels['agentplane.dev/deployment-id'] ?? '', revision });
  }

  private targetName(ref: DeploymentRef): Target {
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
  private async target(ref: DeploymentRef): Promise<Target> {
    const owned = await this.ownedTarget(ref);
    if (!this.perTenant) return owned;
    const { owner: _owner, ...rest } = owned;
    return { ...rest, namespace: tenantNamespaceName(this.opts.config.tenantNamespaces.prefix, owned.tenantId) };
  }

  /** Children in the AgentDeployment's own namespace, owned by it. */
  private async ownedTarget(ref: DeploymentRef): Promise<Target> {
    const dep = await this.getCustom<AgentDeployment>('agentdeployments', ref.namespace, ref.deployment);
    return {
      namespace: ref.namespace,
      name: ref.deployment,
      deploymentId: dep.spec.deploymentId,
      tenantId: dep.spec.tenantId,
      owner: ownerReferenceTo(dep),
      deleting: Boolean(dep.metadata.deletionTimestamp),
    };
  }

  private async getCustom<T>(plural: string, namespace: string, name: string): Promise<T> {
    return (await this.custom.getNamespacedCustomObject({
      group: GROUP,
      version: VERSION,
      namespace,
      plural,
      name,
    })) as T;
  }
}

async function orUndefined<T>(read: () => Promise<T>): Promise<T | undefined> {
  try {
    return await read();
  } catch (err) {
    if (isStatus(err, 404)) return undefined;
    throw err;
  }
}

function revisionNumberOf(rs: V1ReplicaSet): number {
  return Number(rs.metadata?.annotations?.['deployment.kubernetes.io/revision'] ?? 0);
}

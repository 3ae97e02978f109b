// The Kubernetes runtime: builds run as Jobs (BuildKit), each deployment is one Deployment rolled from revision to
// revision, with its Secret, Service, optional Ingress and dev Postgres. Children are built by the pure builders,
// written only when they differ, and observed through informers whose changes wake the controllers.
import { randomBytes } from 'node:crypto';
import {
  AppsV1Api,
  AutoscalingV2Api,
  BatchV1Api,
  CoreV1Api,
  CustomObjectsApi,
  NetworkingV1Api,
  type KubeConfig,
  type V1Deployment,
  type V1Ingress,
  type V1Job,
  type V1Pod,
  type V1ReplicaSet,
  type V1Secret,
  type V1Service,
  type V1StatefulSet,
  type V2HorizontalPodAutoscaler,
} from '@kubernetes/client-node';
import type { Logger } from '../../../lib/logger.ts';
import { GROUP, VERSION, LABEL_DEPLOYMENT, ownerReferenceTo, type AgentDeployment, type AgentRevision } from '../../../resources/index.ts';
import { Informer, type KubeObject } from '../../runtime/informer.ts';
import type { BuildSpec, BuildStatus, RevisionLogSink, RevisionRef, Runtime, ServerSpec, ServerStatus } from '../types.ts';
import { apply, isStatus, type ObjectOps } from './apply.ts';
import { BUILD_CONTAINER, buildJobName, CLONE_CONTAINER, imageRepository, makeBuildJob } from './build-job.ts';
import type { KubernetesRuntimeConfig } from './config.ts';
import { LABEL_INSTANCE, LABEL_REVISION, type Target } from './labels.ts';
import { childListWatch } from './list-watch.ts';
import { buildStatusOf, rolloutStatusOf } from './observe.ts';
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

export { kubernetesRuntimeConfigSchema, type KubernetesRuntimeConfig } from './config.ts';

const ANNOTATION_IMAGE = 'agentplane.dev/image';
const ANNOTATION_COMMIT = 'agentplane.dev/commit';
const ANNOTATION_LOGGED = 'agentplane.dev/logs-collected';
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
  };
  private readonly autoscaling: AutoscalingV2Api;

  constructor(private readonly opts: KubernetesRuntimeOptions) {
    const kc = opts.kubeConfig;
    this.apps = kc.makeApiClient(AppsV1Api);
    this.batch = kc.makeApiClient(BatchV1Api);
    this.core = kc.makeApiClient(CoreV1Api);
    this.net = kc.makeApiClient(NetworkingV1Api);
    this.custom = kc.makeApiClient(CustomObjectsApi);
    this.autoscaling = kc.makeApiClient(AutoscalingV2Api);
    this.log = opts.logger.child({ component: 'kubernetes-runtime' });
    const informer = <T extends KubeObject>(kind: 'jobs' | 'deployments' | 'replicasets' | 'pods') =>
      new Informer<T>(childListWatch<T>(kc, kind, opts.namespace, MANAGED), { name: kind, logger: this.log, resyncMs: opts.resyncMs ?? 0 });
    this.jobs = informer('jobs');
    this.deployments = informer('deployments');
    this.replicaSets = informer('replicasets');
    this.pods = informer('pods');
    for (const inf of [this.jobs, this.deployments, this.replicaSets, this.pods] as Informer<Obj<{ metadata?: { labels?: Record<string, string> } }>>[]) {
      inf.onChange((obj) => this.changed(obj));
    }
    const { apps, batch, core, net, autoscaling } = this;
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
        replace: (namespace, name, body) => autoscaling.replaceNamespacedHorizontalPodAutoscaler({ name, namespace, body }),
      },
    };
  }

  /** Lists and watches the children; resolves once every cache is filled. */
  async start(): Promise<void> {
    await Promise.all([this.jobs.start(), this.deployments.start(), this.replicaSets.start(), this.pods.start()]);
  }

  async shutdown(): Promise<void> {
    for (const inf of [this.jobs, this.deployments, this.replicaSets, this.pods]) inf.stop();
  }

  onChange(notify: (ref: RevisionRef) => void): void {
    this.notify = notify;
  }

  supports(source: string): { ok: true } | { ok: false; message: string } {
    if (source === 'external_docker') return { ok: true };
    if (source === 'github') {
      return this.opts.config.registry
        ? { ok: true }
        : { ok: false, message: 'Building from source needs a registry: set build.registry (and build.pushSecret) in the Helm values.' };
    }
    return { ok: false, message: `Unknown source "${source}".` };
  }

  // ---- builds ----

  async build(spec: BuildSpec): Promise<BuildStatus> {
    const key = `${spec.namespace}/${buildJobName(spec.revision)}`;
    let job: V1Job | undefined = this.jobs.get(key);
    if (!job) {
      const target = await this.target(spec);
      let desired: V1Job;
      try {
        desired = makeBuildJob(target, spec, this.opts.config);
      } catch (err) {
        return { phase: 'Failed', message: (err as Error).message };
      }
      job = (await apply(this.ops.job, desired, { createOnly: true })).object;
      this.log.info({ revision: spec.revision, job: job.metadata?.name }, 'build job created');
    }
    return this.observeBuild(spec, job);
  }

  async hasBuild(ref: RevisionRef): Promise<boolean> {
    return Boolean(await this.builtImage(ref));
  }

  private async builtImage(ref: RevisionRef): Promise<string | undefined> {
    const name = buildJobName(ref.revision);
    const cached = this.jobs.get(`${ref.namespace}/${name}`);
    if (cached) return cached.metadata.annotations?.[ANNOTATION_IMAGE];
    try {
      return (await this.batch.readNamespacedJob({ name, namespace: ref.namespace })).metadata?.annotations?.[ANNOTATION_IMAGE];
    } catch (err) {
      if (isStatus(err, 404)) return undefined;
      throw err;
    }
  }

  private async observeBuild(spec: BuildSpec, job: V1Job): Promise<BuildStatus> {
    const ann = job.metadata?.annotations ?? {};
    if (ann[ANNOTATION_IMAGE] && ann[ANNOTATION_COMMIT]) return { phase: 'Succeeded', commitSha: ann[ANNOTATION_COMMIT], image: ann[ANNOTATION_IMAGE] };
    const jobName = job.metadata!.name!;
    const repository = imageRepository(this.opts.config, this.targetName(spec));
    let pod: V1Pod | undefined = this.pods.list().find((p) => p.metadata.labels?.['job-name'] === jobName || p.metadata.labels?.['batch.kubernetes.io/job-name'] === jobName);
    let status = buildStatusOf(job, pod, repository);
    if (status.phase === 'Running') return status;
    // Separate watches may deliver the Job's end before its pod's: read the pod itself before concluding.
    const fresh = (await this.core.listNamespacedPod({ namespace: spec.namespace, labelSelector: `job-name=${jobName}` })).items[0];
    if (fresh) {
      pod = fresh;
      status = buildStatusOf(job, pod, repository);
    }
    if (!ann[ANNOTATION_LOGGED]) {
      await this.collectBuildLog(spec, pod, status);
      // Recording the result on the Job keeps it after the pod is gone and makes the log copy happen once.
      const annotations = {
        ...ann,
        [ANNOTATION_LOGGED]: 'true',
        ...(status.phase === 'Succeeded' ? { [ANNOTATION_IMAGE]: status.image!, [ANNOTATION_COMMIT]: status.commitSha } : {}),
      };
      await apply(this.ops.job, { ...job, metadata: { ...job.metadata, annotations } } as V1Job);
    }
    return status;
  }

  private async collectBuildLog(spec: BuildSpec, pod: V1Pod | undefined, status: BuildStatus): Promise<void> {
    const lines: string[] = [];
    for (const container of [CLONE_CONTAINER, BUILD_CONTAINER]) {
      if (!pod?.metadata?.name) break;
      try {
        const text = await this.core.readNamespacedPodLog({ name: pod.metadata.name, namespace: spec.namespace, container, tailLines: 500 });
        lines.push(...String(text).split('\n').filter(Boolean).map((l) => `[${container}] ${l}`));
      } catch (err) {
        lines.push(`[${container}] log unavailable: ${(err as Error).message.split('\n')[0]}`);
      }
    }
    lines.push(status.phase === 'Failed' ? status.message : `Build succeeded: ${status.phase === 'Succeeded' ? status.image : ''}`);
    await this.opts.logs.append(spec, 'build', lines);
  }

  // ---- servers ----

  async deploy(spec: ServerSpec): Promise<ServerStatus> {
    const rev = await this.getCustom<AgentRevision>('agentrevisions', spec.namespace, spec.revision);
    const target = await this.target(spec);
    const image = rev.spec.source === 'external_docker' ? rev.spec.sourceRevisionConfig.imageUri : await this.builtImage(spec);
    if (!image) return { phase: 'Failed', message: rev.spec.source === 'external_docker' ? 'image_uri is required for external_docker' : 'No built image for this revision.' };
    const cfg = this.opts.config;
    const envNames = Object.keys(spec.env).sort();
    const refs = rev.spec.secretReferences ?? [];
    const sourceConfig = rev.spec.sourceConfig;

    let host: string | undefined;
    let url: string;
    let deployment: V1Deployment;
    try {
      host = ingressHost(target, sourceConfig.customUrl, cfg);
      // A custom_url with a scheme is what users call (TLS may end before the Ingress); else what we serve.
      url = sourceConfig.customUrl?.includes('://') ? new URL(sourceConfig.customUrl).origin : deploymentUrl(target, host, cfg);
      deployment = makeDeployment(target, { revision: spec.revision, image, resourceSpec: sourceConfig.resourceSpec, envNames, secretReferences: refs, url }, cfg);
    } catch (err) {
      return { phase: 'Failed', message: (err as Error).message };
    }
    if (envNames.length) await apply(this.ops.secret, makeSecret(target, spec.revision, spec.env), { createOnly: true });
    if (databaseFor(envNames, refs).kind === 'internal') {
      if (cfg.postgres.mode === 'external') {
        return { phase: 'Failed', message: 'No DATABASE_URI: this cluster needs an external Postgres (postgres mode external); add a secret or secret_reference named DATABASE_URI.' };
      }
      await apply(this.ops.secret, makePostgresSecret(target, randomBytes(18).toString('base64url')), { createOnly: true });
      await apply(this.ops.service, makePostgresService(target));
      await apply(this.ops.statefulSet, makePostgresStatefulSet(target, cfg));
    }
    const written = await apply(this.ops.deployment, deployment);
    await apply(this.ops.service, makeService(target));
    if (host) await apply(this.ops.ingress, makeIngress(target, host, cfg));
    const hpa = makeAutoscaler(target, sourceConfig.resourceSpec);
    if (hpa) await apply(this.ops.autoscaler, hpa);
    else await this.deleteIfPresent(() => this.autoscaling.deleteNamespacedHorizontalPodAutoscaler({ name: serverName(target), namespace: spec.namespace }), () => this.autoscaling.readNamespacedHorizontalPodAutoscaler({ name: serverName(target), namespace: spec.namespace }));
    this.urls.set(`${spec.namespace}/${spec.deployment}`, url);
    if (written.wrote) this.log.info({ deployment: spec.deployment, revision: spec.revision }, 'rollout started');

    const current = written.wrote ? written.object : (this.deployments.get(`${spec.namespace}/${serverName(target)}`) ?? written.object);
    const status = rolloutStatusOf(current, this.replicaSets.list(), this.pods.list(), spec.revision) ?? { phase: 'Starting' };
    if (status.phase === 'Failed') await this.opts.logs.append(spec, 'deploy', [status.message]);
    return status;
  }

  serverStatus(ref: RevisionRef): ServerStatus | undefined {
    const d = this.deployments.get(`${ref.namespace}/${ref.deployment}`);
    return rolloutStatusOf(d, this.replicaSets.list(), this.pods.list(), ref.revision);
  }

  /**
   * The revision whose pods serve: the Deployment's once its rollout is done, else the newest ReplicaSet that
   * still has available pods (the old revision during a rollout or after a rollback).
   */
  routedRevision(ref: DeploymentRef): string | undefined {
    const d = this.deployments.get(`${ref.namespace}/${ref.deployment}`);
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
    const known = this.urls.get(`${ref.namespace}/${ref.deployment}`) ?? this.deployments.get(`${ref.namespace}/${ref.deployment}`)?.metadata.annotations?.[ANNOTATION_URL];
    if (known) return known;
    const base = this.opts.config.ingress.baseDomain;
    return base ? `http://${ref.deployment}.${base}` : `http://${ref.deployment}.${ref.namespace}.svc.cluster.local`;
  }

  /**
   * Stops a revision that must not run: when the Deployment is rolling to it (say it failed), roll back to the
   * pod template of the revision still serving, or scale to zero when none serves.
   */
  async stop(ref: RevisionRef): Promise<void> {
    await this.cancelBuild(ref);
    const d = this.deployments.get(`${ref.namespace}/${ref.deployment}`);
    if (!d || d.spec?.template?.metadata?.labels?.[LABEL_REVISION] !== ref.revision) return;
    const routed = this.routedRevision(ref);
    if (routed === ref.revision) return;
    const back = routed ? this.ownedReplicaSets(d).find((rs) => rs.spec?.template?.metadata?.labels?.[LABEL_REVISION] === routed) : undefined;
    if (back?.spec?.template) {
      const { ['pod-template-hash']: _h, ...labels } = back.spec.template.metadata?.labels ?? {};
      const template = { ...back.spec.template, metadata: { ...back.spec.template.metadata, labels } };
      await apply(this.ops.deployment, { ...d, spec: { ...d.spec!, template } } as V1Deployment);
      this.log.info({ deployment: ref.deployment, from: ref.revision, to: routed }, 'rolled back');
    } else if ((d.spec?.replicas ?? 0) > 0) {
      await apply(this.ops.deployment, { ...d, spec: { ...d.spec!, replicas: 0 } } as V1Deployment);
      this.log.info({ deployment: ref.deployment, revision: ref.revision }, 'scaled to zero');
    }
  }

  /** A build still running for a revision that will never run (superseded) is stopped; finished ones stay. */
  private async cancelBuild(ref: RevisionRef): Promise<void> {
    const job = this.jobs.get(`${ref.namespace}/${buildJobName(ref.revision)}`);
    const finished = job?.status?.conditions?.some((c) => (c.type === 'Complete' || c.type === 'Failed') && c.status === 'True');
    if (!job || finished || job.metadata.annotations?.[ANNOTATION_IMAGE]) return;
    try {
      await this.batch.deleteNamespacedJob({ name: job.metadata.name, namespace: ref.namespace, propagationPolicy: 'Background' });
      this.log.info({ revision: ref.revision }, 'build cancelled');
    } catch (err) {
      if (!isStatus(err, 404)) throw err;
    }
  }

  /** Children carry owner references to the AgentDeployment; the garbage collector removes them. */
  async cleanup(ref: DeploymentRef): Promise<void> {
    this.urls.delete(`${ref.namespace}/${ref.deployment}`);
  }

  // ---- helpers ----

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
    const namespace = obj.metadata.namespace ?? this.opts.namespace;
    const tpl = (obj as { spec?: { template?: { metadata?: { labels?: Record<string, string> } } } }).spec?.template?.metadata?.labels;
    const revision = labels[LABEL_REVISION] ?? tpl?.[LABEL_REVISION];
    if (revision) this.notify({ namespace, deployment, deploymentId: labels['agentplane.dev/deployment-id'] ?? '', revision });
  }

  private targetName(ref: DeploymentRef): Target {
    // Only name-derived fields are used for image names; owner comes from target().
    return { namespace: ref.namespace, name: ref.deployment, deploymentId: ref.deploymentId, tenantId: '', owner: { apiVersion: '', kind: '', name: '', uid: '' } };
  }

  private async target(ref: DeploymentRef): Promise<Target> {
    const dep = await this.getCustom<AgentDeployment>('agentdeployments', ref.namespace, ref.deployment);
    return { namespace: ref.namespace, name: ref.deployment, deploymentId: dep.spec.deploymentId, tenantId: dep.spec.tenantId, owner: ownerReferenceTo(dep) };
  }

  private async getCustom<T>(plural: string, namespace: string, name: string): Promise<T> {
    return (await this.custom.getNamespacedCustomObject({ group: GROUP, version: VERSION, namespace, plural, name })) as T;
  }
}

function revisionNumberOf(rs: V1ReplicaSet): number {
  return Number(rs.metadata?.annotations?.['deployment.kubernetes.io/revision'] ?? 0);
}

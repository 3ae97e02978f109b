// Builds: one BuildKit Job per revision in the build namespace (the operator's unless one is configured), observed through the Job and pod informers;
// the result (image, commit) is recorded on the Job, and the build's log is copied to the revision once.
import type { V1Job, V1Pod, V1Secret } from '@kubernetes/client-node';
import type { GitCredential } from '../../../git/credentials.ts';
import type { AgentDeployment } from '../../../resources/index.ts';
import type { BuildSpec, BuildStatus, RevisionRef } from '../types.ts';
import { apply, isStatus } from './apply.ts';
import {
  BUILD_CONTAINER,
  buildCredentialSecretName,
  buildJobName,
  buildSourceTokenSecretName,
  CLONE_CONTAINER,
  imageRepository,
  makeBuildCredentialSecret,
  makeBuildJob,
  makeSourceTokenSecret,
  PUSH_CONTAINER,
} from './build-job.ts';
import { mintSourceFetchToken } from '../../../lib/source-fetch-token.ts';
import { buildNamespace, buildTarget, orUndefined, targetName, type RuntimeContext } from './context.ts';
import { gitCredentialsFor, gitCredentialsSecretName } from '../../../git/tenant-secret.ts';
import type { Target } from './labels.ts';
import { makeBuildNetworkPolicy } from './network-policy.ts';
import { buildCreateRefused, buildStatusOf } from './observe.ts';

export const ANNOTATION_IMAGE = 'agentplane.dev/image';
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

/** Starts the build if it is neither running nor done; reports its state. */
export async function build(ctx: RuntimeContext, spec: BuildSpec, dep: AgentDeployment): Promise<BuildStatus> {
  const key = `${buildNamespace(ctx)}/${buildJobName(spec.revision)}`;
  let job: V1Job | undefined = ctx.jobs.get(key);
  if (!job) {
    // Builds stay in the build namespace even with a namespace per tenant: that is where the push secret is, and a
    // copy in every tenant namespace would widen who can read it.
    const target = buildTarget(ctx, dep);
    if (target.deleting) return { phase: 'Running' };
    // An integration's credential (minted now, for this build) wins over the tenant's shared Secret.
    let credential: GitCredential | undefined;
    if (spec.integrationId && spec.tenantId && ctx.opts.gitCredential) {
      try {
        credential = await ctx.opts.gitCredential(spec.tenantId, spec.integrationId, spec.repoUrl);
      } catch (err) {
        return { phase: 'Failed', message: String((err as Error).message).split('\n')[0]! };
      }
    }
    const gitCredentialsSecret = credential
      ? buildCredentialSecretName(spec.revision)
      : await gitCredentials(ctx, target, spec);
    const fetch = ctx.opts.config.sourceFetch;
    if (spec.sourceArchive && !fetch) return { phase: 'Failed', message: NO_SOURCE_FETCH };
    const sourceArchive =
      spec.sourceArchive && fetch
        ? { url: `${fetch.url}/v2/source-archives/${spec.sourceArchive.sha256}`, sha256: spec.sourceArchive.sha256 }
        : undefined;
    let desired: V1Job;
    try {
      desired = makeBuildJob(target, { ...spec, gitCredentialsSecret, sourceArchive }, ctx.opts.config);
    } catch (err) {
      return { phase: 'Failed', message: (err as Error).message };
    }
    if (ctx.opts.config.networkPolicy.enabled)
      await apply(ctx.ops.networkPolicy, makeBuildNetworkPolicy(target, ctx.opts.config));
    const created = await apply(ctx.ops.job, desired, { createOnly: true });
    job = created.object;
    // The pod waits for the Secret (its volume); the Secret names the Job as its owner, so it needs the Job's uid.
    if (credential && job.metadata?.uid) await createOnce(ctx, makeBuildCredentialSecret(job, credential));
    if (spec.sourceArchive && fetch && job.metadata?.uid && spec.tenantId) {
      // Good for this revision's tarball only, until the build's deadline (the Job cannot run longer).
      const token = mintSourceFetchToken(fetch.tokenKey, {
        tenant: spec.tenantId,
        deploymentId: spec.deploymentId,
        revision: spec.revision,
        sha256: spec.sourceArchive.sha256,
        expires: Math.floor(Date.now() / 1000) + ctx.opts.config.buildTimeoutSeconds + 60,
      });
      await createOnce(ctx, makeSourceTokenSecret(job, token));
    }
    ctx.log.info({ revision: spec.revision, job: job.metadata?.name }, 'build job created');
  }
  return observeBuild(ctx, spec, job);
}

/** Why a tarball build cannot run here, as the revision shows it. */
export const NO_SOURCE_FETCH =
  'Builds of uploaded source tarballs need the control plane to serve them: set controlPlane.sourceUploads in the ' +
  'Helm values (the operator then gets --source-fetch-url and --source-uploads-key).';

async function createOnce(ctx: RuntimeContext, body: V1Secret): Promise<void> {
  try {
    await ctx.core.createNamespacedSecret({ namespace: body.metadata!.namespace!, body });
  } catch (err) {
    if (!isStatus(err, 409)) throw err;
  }
}

/** The tenant's own git credentials Secret, when it covers the repository (why not is logged, never shown). */
async function gitCredentials(ctx: RuntimeContext, target: Target, spec: BuildSpec): Promise<string | undefined> {
  const prefix = ctx.opts.config.gitCredentialsSecretPrefix;
  if (!prefix) return undefined;
  const name = gitCredentialsSecretName(prefix, target.tenantId);
  const secret = await orUndefined(() => ctx.core.readNamespacedSecret({ name, namespace: target.namespace }));
  const chosen = gitCredentialsFor(secret, target.tenantId, spec.repoUrl);
  if ('reason' in chosen) {
    ctx.log.info(
      { revision: spec.revision, secret: name, reason: chosen.reason },
      'build clones without git credentials',
    );
    return undefined;
  }
  return chosen.name;
}

/**
 * The image recorded on the revision's status when its build succeeded: a digest in this deployment's repository of
 * the configured registry (anything else, e.g. a local runtime's `git:` id, is not trusted as one). It outlives the
 * build Job, so a rollback to an old revision needs neither the Job nor a rebuild.
 */
export function recordedImage(ctx: RuntimeContext, ref: RevisionRef, image: string | undefined): string | undefined {
  if (!image || !ctx.opts.config.registry) return undefined;
  const prefix = `${imageRepository(ctx.opts.config, targetName(ref))}@sha256:`;
  return image.startsWith(prefix) && /^[0-9a-f]{64}$/.test(image.slice(prefix.length)) ? image : undefined;
}

/** The image a finished build of this revision pushed, if any. */
export async function builtImage(ctx: RuntimeContext, ref: RevisionRef): Promise<string | undefined> {
  const name = buildJobName(ref.revision);
  const namespace = buildNamespace(ctx);
  const cached = ctx.jobs.get(`${namespace}/${name}`);
  if (cached) return cached.metadata.annotations?.[ANNOTATION_IMAGE];
  try {
    return (await ctx.batch.readNamespacedJob({ name, namespace })).metadata?.annotations?.[ANNOTATION_IMAGE];
  } catch (err) {
    if (isStatus(err, 404)) return undefined;
    throw err;
  }
}

/**
 * A build Job without a pod: the Job controller may be failing to create it (FailedCreate Events on the Job,
 * e.g. Pod Security admission); once that persists the build fails with the refusal. Revisions still BUILDING
 * are looked at again on every resync of the revision informer (a minute), so this is seen within a minute or two.
 */
async function buildPodRefused(ctx: RuntimeContext, job: V1Job, running: BuildStatus): Promise<BuildStatus> {
  const { name, namespace, uid } = job.metadata!;
  const events = await ctx.core
    .listNamespacedEvent({
      namespace: namespace!,
      fieldSelector: `involvedObject.kind=Job,involvedObject.name=${name!}`,
    })
    .catch((err: unknown) => {
      ctx.log.warn({ err, job: name }, 'cannot read the build Job events');
      return { items: [] };
    });
  const refused = buildCreateRefused(
    events.items.filter((e) => !uid || !e.involvedObject.uid || e.involvedObject.uid === uid),
    Date.now(),
  );
  return refused ? { phase: 'Failed', message: `Build pod cannot be created (FailedCreate): ${refused}` } : running;
}

/**
 * The pod of a build Job among the watched pods: its job-name label and its namespace. With a namespace per tenant
 * the pods of every tenant namespace are watched, and a pod elsewhere carrying the same label is not this build's.
 */
export function buildPodOf<P extends V1Pod>(pods: readonly P[], job: V1Job): P | undefined {
  const name = job.metadata?.name;
  const namespace = job.metadata?.namespace;
  return pods.find(
    (p) =>
      p.metadata?.namespace === namespace &&
      (p.metadata?.labels?.['job-name'] === name || p.metadata?.labels?.['batch.kubernetes.io/job-name'] === name),
  );
}

async function observeBuild(ctx: RuntimeContext, spec: BuildSpec, job: V1Job): Promise<BuildStatus> {
  const ann = job.metadata?.annotations ?? {};
  if (ann[ANNOTATION_IMAGE] && ann[ANNOTATION_COMMIT])
    return { phase: 'Succeeded', commitSha: ann[ANNOTATION_COMMIT], image: ann[ANNOTATION_IMAGE] };
  const jobName = job.metadata!.name!;
  const repository = imageRepository(ctx.opts.config, targetName(spec));
  const namespace = job.metadata!.namespace!;
  let pod: V1Pod | undefined = buildPodOf(ctx.buildPods.list(), job);
  let status = buildStatusOf(job, pod, repository);
  if (status.phase === 'Running') return pod ? status : buildPodRefused(ctx, job, status);
  // Separate watches may deliver the Job's end before its pod's: read the pod itself before concluding.
  const fresh = (await ctx.core.listNamespacedPod({ namespace, labelSelector: `job-name=${jobName}` })).items[0];
  if (fresh) {
    pod = fresh;
    status = buildStatusOf(job, pod, repository);
  }
  const ownSecrets = [buildCredentialSecretName(spec.revision), buildSourceTokenSecretName(spec.revision)];
  const usedSecrets = (job.spec?.template.spec?.volumes ?? [])
    .map((v) => v.secret?.secretName)
    .filter((name): name is string => !!name && ownSecrets.includes(name));
  if (!ann[ANNOTATION_LOGGED]) {
    // The build's own credential and fetch token Secrets are not needed any more (most builds have neither).
    for (const credentialSecret of usedSecrets)
      await ctx.core.deleteNamespacedSecret({ name: credentialSecret, namespace }).catch((err: unknown) => {
        // 403: the chart grants deleting Secrets only with a namespace per tenant; the Secret then goes with its Job.
        if (isStatus(err, 403))
          ctx.log.info({ revision: spec.revision }, 'build credential Secret left to garbage collection with its Job');
        else if (!isStatus(err, 404)) ctx.log.warn({ revision: spec.revision }, 'removing the build credential failed');
      });
    await collectBuildLog(ctx, spec, pod, status);
    // Recording the result on the Job keeps it after the pod is gone and makes the log copy happen once.
    const annotations = {
      ...ann,
      [ANNOTATION_LOGGED]: 'true',
      ...(status.phase === 'Succeeded'
        ? { [ANNOTATION_IMAGE]: status.image!, [ANNOTATION_COMMIT]: status.commitSha }
        : {}),
    };
    await apply(ctx.ops.job, { ...job, metadata: { ...job.metadata, annotations } } as V1Job, { owned: false });
  }
  return status;
}

async function collectBuildLog(
  ctx: RuntimeContext,
  spec: BuildSpec,
  pod: V1Pod | undefined,
  status: BuildStatus,
): Promise<void> {
  const lines: string[] = [];
  const namespace = pod?.metadata?.namespace ?? buildNamespace(ctx);
  for (const container of [CLONE_CONTAINER, BUILD_CONTAINER, PUSH_CONTAINER]) {
    if (!pod?.metadata?.name) break;
    try {
      const text = await ctx.core.readNamespacedPodLog({
        name: pod.metadata.name,
        namespace,
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
    status.phase === 'Failed' ? status.message : `Build succeeded: ${status.phase === 'Succeeded' ? status.image : ''}`,
  );
  await ctx.opts.logs.append(spec, 'build', lines);
}

/** A build still running for a revision that will never run (superseded) is stopped; finished ones stay. */
export async function cancelBuild(ctx: RuntimeContext, ref: RevisionRef): Promise<void> {
  const job = ctx.jobs.get(`${buildNamespace(ctx)}/${buildJobName(ref.revision)}`);
  const finished = job?.status?.conditions?.some(
    (c) => (c.type === 'Complete' || c.type === 'Failed') && c.status === 'True',
  );
  if (!job || finished || job.metadata.annotations?.[ANNOTATION_IMAGE]) return;
  try {
    await ctx.batch.deleteNamespacedJob({
      name: job.metadata.name,
      namespace: job.metadata.namespace ?? buildNamespace(ctx),
      propagationPolicy: 'Background',
    });
    ctx.log.info({ revision: ref.revision }, 'build cancelled');
  } catch (err) {
    if (!isStatus(err, 404)) throw err;
  }
}

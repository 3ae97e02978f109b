// Pure decisions: what the cluster's objects say about a revision's build and rollout. The runtime reads the
// objects and hands them here; the revision controller turns the answers into BUILDING, BUILD_FAILED, DEPLOYING,
// DEPLOYED or DEPLOY_FAILED.
import type { CoreV1Event, V1Deployment, V1Job, V1Pod, V1ReplicaSet } from '@kubernetes/client-node';
import type { BuildStatus, ServerStatus } from '../types.ts';
import { parseBuildResult, PUSH_CONTAINER } from './build-job.ts';
import { LABEL_REVISION } from './labels.ts';

function condition(
  obj: { status?: { conditions?: { type: string; status: string; reason?: string; message?: string }[] } },
  type: string,
) {
  return obj.status?.conditions?.find((c) => c.type === type);
}

/** Why a pod's containers ended badly, most telling first ("clone: exit 1: repo_ref ... is not a branch"). */
export function podFailure(pod: V1Pod | undefined): string | undefined {
  if (!pod) return undefined;
  const statuses = [...(pod.status?.initContainerStatuses ?? []), ...(pod.status?.containerStatuses ?? [])];
  for (const s of statuses) {
    const t = s.state?.terminated;
    if (t && t.exitCode !== 0) {
      const detail = t.message?.trim() || t.reason || '';
      return `${s.name}: exit ${t.exitCode}${detail ? `: ${detail}` : ''}`;
    }
    const w = s.state?.waiting;
    if (w && w.reason && w.reason !== 'ContainerCreating' && w.reason !== 'PodInitializing') {
      return `${s.name}: ${w.reason}${w.message ? `: ${w.message}` : ''}`;
    }
  }
  return undefined;
}

/** Waiting reasons a build pod does not recover from by itself. */
const BUILD_POD_STUCK = new Set([
  'ImagePullBackOff',
  'ErrImageNeverPull',
  'InvalidImageName',
  'CreateContainerConfigError',
  'CreateContainerError',
]);
/** How long a build pod may stay unschedulable (a cluster autoscaler adding a node) before the build fails. */
export const UNSCHEDULABLE_GRACE_MS = 120_000;

/**
 * Why a build pod that has not run cannot start, if it cannot: an image that cannot be pulled, a configuration
 * the kubelet refuses, or no node to run on for longer than UNSCHEDULABLE_GRACE_MS.
 */
export function buildPodStuck(pod: V1Pod | undefined, now: number): string | undefined {
  if (!pod || pod.status?.phase !== 'Pending') return undefined;
  const statuses = [...(pod.status?.initContainerStatuses ?? []), ...(pod.status?.containerStatuses ?? [])];
  for (const s of statuses) {
    const w = s.state?.waiting;
    if (w?.reason && BUILD_POD_STUCK.has(w.reason)) return `${s.name}: ${w.reason}${w.message ? `: ${w.message}` : ''}`;
  }
  const scheduled = condition(pod, 'PodScheduled') as
    { status: string; reason?: string; message?: string; lastTransitionTime?: Date | string } | undefined;
  if (scheduled?.status === 'False' && scheduled.reason === 'Unschedulable') {
    const since = scheduled.lastTransitionTime ? new Date(scheduled.lastTransitionTime).getTime() : now;
    if (now - since >= UNSCHEDULABLE_GRACE_MS)
      return `Unschedulable for ${Math.round((now - since) / 1000)} s: ${scheduled.message ?? 'no node fits the build pod'}`;
  }
  return undefined;
}

/**
 * The build's state from its Job and the Job's pod. `repository` is where the image was pushed; the recorded
 * image is `<repository>@<digest>`, so a later push to the same tag never changes what a revision runs.
 */
export function buildStatusOf(job: V1Job, pod: V1Pod | undefined, repository: string, now = Date.now()): BuildStatus {
  const failed = condition(job, 'Failed');
  if (failed?.status === 'True') {
    const why = podFailure(pod) ?? failed.message ?? 'the build job failed';
    return { phase: 'Failed', message: `Build failed (${failed.reason ?? 'Failed'}): ${why}` };
  }
  const complete = condition(job, 'Complete');
  if (complete?.status === 'True' || (job.status?.succeeded ?? 0) > 0) {
    const container = pod?.status?.containerStatuses?.find((c) => c.name === PUSH_CONTAINER);
    const result = parseBuildResult(container?.state?.terminated?.message);
    if (!result)
      return {
        phase: 'Failed',
        message: 'Build finished but reported no image digest (build pod gone or no termination message)',
      };
    return { phase: 'Succeeded', commitSha: result.commit, image: `${repository}@${result.digest}` };
  }
  const stuck = buildPodStuck(pod, now);
  if (stuck) return { phase: 'Failed', message: `Build pod cannot start: ${stuck}` };
  return { phase: 'Running' };
}

// ErrImagePull is left out: it may be transient and turns into ImagePullBackOff when it is not.
const FATAL_WAITING = new Set([
  'CrashLoopBackOff',
  'ImagePullBackOff',
  'InvalidImageName',
  'CreateContainerConfigError',
]);

/** What a pod's containers say about why it does not serve, most telling first (OOMKilled before the loop it causes). */
function podTrouble(pod: V1Pod): { reason: string; message: string } | undefined {
  for (const s of pod.status?.containerStatuses ?? []) {
    const last = s.lastState?.terminated;
    const waiting = s.state?.waiting;
    if (last?.reason === 'OOMKilled' || s.state?.terminated?.reason === 'OOMKilled') {
      return {
        reason: 'OOMKilled',
        message: `container ${s.name} ran out of memory (restarts: ${s.restartCount ?? 0})`,
      };
    }
    if (waiting?.reason && waiting.reason !== 'ContainerCreating') {
      const detail =
        waiting.message ?? (last ? `last exit ${last.exitCode}${last.reason ? ` (${last.reason})` : ''}` : '');
      return { reason: waiting.reason, message: `container ${s.name}${detail ? `: ${detail}` : ''}` };
    }
  }
  return undefined;
}

/**
 * A revision that rolled out: Ready while at least one of its pods is available (or none is wanted); otherwise
 * Starting with the pods' trouble (CrashLoopBackOff, OOMKilled, ImagePullBackOff, ...), which clears by itself
 * when a pod is available again.
 */
export function servingStatusOf(deployment: V1Deployment, rs: V1ReplicaSet | undefined, pods: V1Pod[]): ServerStatus {
  const want = deployment.spec?.replicas ?? 1;
  if (want === 0 || (rs?.status?.availableReplicas ?? 0) > 0) return { phase: 'Ready' };
  for (const pod of pods) {
    const trouble = podTrouble(pod);
    if (trouble) {
      return {
        phase: 'Starting',
        trouble: { reason: trouble.reason, message: `Pod ${pod.metadata?.name}: ${trouble.message}` },
      };
    }
  }
  return {
    phase: 'Starting',
    trouble: { reason: 'Unavailable', message: `no pod of the revision is available (${pods.length} present)` },
  };
}

/** The Deployment's ReplicaSet for `revision` (the newest one whose pod template carries it), if any. */
export function replicaSetFor(
  deployment: V1Deployment,
  replicaSets: V1ReplicaSet[],
  revision: string,
): V1ReplicaSet | undefined {
  const uid = deployment.metadata?.uid;
  const number = (rs: V1ReplicaSet) => Number(rs.metadata?.annotations?.['deployment.kubernetes.io/revision'] ?? 0);
  return replicaSets
    .filter((rs) => rs.metadata?.ownerReferences?.some((o) => o.uid === uid))
    .filter((rs) => rs.spec?.template?.metadata?.labels?.[LABEL_REVISION] === revision)
    .sort((a, b) => number(b) - number(a))[0];
}

/**
 * The rollout of `revision`: Failed when the progress deadline passed, a new pod crash-loops past `crashLoopRestarts` or cannot pull its
 * image; Ready only when the controller saw the latest spec and every wanted replica is updated and available and
 * belongs to the revision's ReplicaSet; Starting otherwise. `undefined` when the Deployment runs another revision.
 */
export function rolloutStatusOf(
  deployment: V1Deployment | undefined,
  replicaSets: V1ReplicaSet[],
  pods: V1Pod[],
  revision: string,
  crashLoopRestarts = 5,
): ServerStatus | undefined {
  if (!deployment || deployment.spec?.template?.metadata?.labels?.[LABEL_REVISION] !== revision) return undefined;
  const rs = replicaSetFor(deployment, replicaSets, revision);
  const hash = rs?.metadata?.labels?.['pod-template-hash'];
  const newPods = hash ? pods.filter((p) => p.metadata?.labels?.['pod-template-hash'] === hash) : [];
  // Rolled out once (the controller says so until the template changes): from now on what matters is whether any
  // pod serves, and a crash loop is reported, not final; Kubernetes keeps restarting the pods.
  const progressed = condition(deployment, 'Progressing');
  const observedSpec = (deployment.status?.observedGeneration ?? 0) >= (deployment.metadata?.generation ?? 0);
  if (observedSpec && progressed?.status === 'True' && progressed.reason === 'NewReplicaSetAvailable') {
    return servingStatusOf(deployment, rs, newPods);
  }
  // Pods the ReplicaSet cannot create (Pod Security admission, a quota, a missing ServiceAccount) never appear:
  // its ReplicaFailure condition says why, long before the progress deadline.
  const replicaFailure = rs ? condition(rs, 'ReplicaFailure') : undefined;
  if (replicaFailure?.status === 'True') {
    return {
      phase: 'Failed',
      message:
        `Pods cannot be created (${replicaFailure.reason ?? 'ReplicaFailure'}): ${replicaFailure.message ?? ''}`.trim(),
    };
  }
  for (const pod of newPods) {
    for (const s of pod.status?.containerStatuses ?? []) {
      const reason = s.state?.waiting?.reason;
      // A crash loop is expected for a while (a database still starting); other waiting reasons are fatal at once.
      if (reason === 'CrashLoopBackOff' && (s.restartCount ?? 0) < crashLoopRestarts) continue;
      if (reason && FATAL_WAITING.has(reason)) {
        const last = s.lastState?.terminated;
        const detail =
          s.state?.waiting?.message ??
          (last ? `last exit ${last.exitCode}${last.reason ? ` (${last.reason})` : ''}` : '');
        return { phase: 'Failed', message: `Pod ${pod.metadata?.name}: ${reason}${detail ? `: ${detail}` : ''}` };
      }
    }
  }
  const progressing = condition(deployment, 'Progressing');
  if (progressing?.status === 'False' && progressing.reason === 'ProgressDeadlineExceeded') {
    return {
      phase: 'Failed',
      message: `Rollout stalled (ProgressDeadlineExceeded): ${progressing.message ?? ''}`.trim(),
    };
  }
  const want = deployment.spec?.replicas ?? 1;
  const st = deployment.status ?? {};
  const observed = (st.observedGeneration ?? 0) >= (deployment.metadata?.generation ?? 0);
  const done =
    observed &&
    (st.updatedReplicas ?? 0) >= want &&
    (st.availableReplicas ?? 0) >= want &&
    (st.replicas ?? 0) === (st.updatedReplicas ?? 0) &&
    rs !== undefined &&
    (rs.status?.availableReplicas ?? 0) >= want;
  return done ? { phase: 'Ready' } : { phase: 'Starting' };
}

/** How long the Job controller may go on failing to create the build pod before the build fails. */
export const FAILED_CREATE_GRACE_MS = 60_000;
/** ...or how many refused attempts (the Job controller retries with a growing back-off: 10 s, 20 s, 40 s...). */
export const FAILED_CREATE_ATTEMPTS = 3;

/**
 * Why the Job controller cannot create the build pod, once it has kept failing (FailedCreate Events on the Job:
 * Pod Security admission, a quota, a missing ServiceAccount): the latest refusal's message. A single refusal may
 * be transient (the controller retries), so only FAILED_CREATE_ATTEMPTS of them or FAILED_CREATE_GRACE_MS count.
 */
export function buildCreateRefused(events: CoreV1Event[], now: number): string | undefined {
  const refused = events.filter((e) => e.reason === 'FailedCreate');
  if (!refused.length) return undefined;
  const time = (e: CoreV1Event, which: 'first' | 'last') => {
    const t = which === 'first' ? (e.firstTimestamp ?? e.eventTime) : (e.lastTimestamp ?? e.eventTime);
    return t ? new Date(t).getTime() : now;
  };
  const attempts = refused.reduce((n, e) => n + (e.count ?? 1), 0);
  const since = Math.min(...refused.map((e) => time(e, 'first')));
  if (attempts < FAILED_CREATE_ATTEMPTS && now - since < FAILED_CREATE_GRACE_MS) return undefined;
  const latest = refused.reduce((a, b) => (time(b, 'last') >= time(a, 'last') ? b : a));
  return `${latest.message ?? 'the Job controller cannot create the build pod'} (${attempts} attempt${attempts === 1 ? '' : 's'})`;
}

/**
 * Why a deployment's own Postgres cannot start, if it cannot: its pod unschedulable for UNSCHEDULABLE_GRACE_MS or
 * stuck on its image or configuration (buildPodStuck's rules), or, with no pod at all, the StatefulSet controller's
 * persisting FailedCreate refusals (a ResourceQuota, Pod Security, a LimitRange). The agent pods would only wait on
 * their database check until the progress deadline, saying nothing of why.
 */
export function databaseRefusal(pods: V1Pod[], statefulSetEvents: CoreV1Event[], now: number): string | undefined {
  for (const pod of pods) {
    const stuck = buildPodStuck(pod, now);
    if (stuck) return `Postgres pod ${pod.metadata?.name} cannot start: ${stuck}`;
  }
  if (pods.length) return undefined;
  const refused = buildCreateRefused(statefulSetEvents, now);
  return refused ? `Postgres pod cannot be created (FailedCreate): ${refused}` : undefined;
}

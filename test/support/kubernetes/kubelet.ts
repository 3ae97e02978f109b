// The cluster's part, played by the test over the API (the double has no controllers): the Job controller
// finishing a build, the Deployment controller making a ReplicaSet and pods available, or stalling.
import { createHash } from 'node:crypto';
import {
  AppsV1Api,
  BatchV1Api,
  CoreV1Api,
  type KubeConfig,
  type V1Deployment,
  type V1Pod,
  type V1ReplicaSet,
} from '@kubernetes/client-node';

export class FakeCluster {
  private readonly apps: AppsV1Api;
  private readonly batch: BatchV1Api;
  private readonly core: CoreV1Api;

  constructor(
    kc: KubeConfig,
    private readonly namespace: string,
  ) {
    this.apps = kc.makeApiClient(AppsV1Api);
    this.batch = kc.makeApiClient(BatchV1Api);
    this.core = kc.makeApiClient(CoreV1Api);
  }

  /** Ends a build Job: its pod terminates with `termination` (success) or with the failed container's message. */
  async finishJob(
    name: string,
    result:
      | { ok: true; commit: string; digest: string }
      | { ok: false; container: 'clone' | 'build' | 'push'; message: string },
  ): Promise<void> {
    const namespace = this.namespace;
    const job = await this.batch.readNamespacedJob({ name, namespace });
    const spec = job.spec!.template.spec!;
    const terminated = (exitCode: number, message?: string) => ({
      terminated: { exitCode, reason: exitCode ? 'Error' : 'Completed', ...(message ? { message } : {}) },
    });
    // Steps run in order (clone, build as init containers, then push): a failed one leaves the later ones waiting.
    const steps = ['clone', 'build', 'push'] as const;
    const failedAt = result.ok ? steps.length : steps.indexOf(result.container);
    const state = (i: number) =>
      i < failedAt
        ? terminated(
            0,
            steps[i] === 'push' && result.ok
              ? JSON.stringify({ commit: result.commit, digest: result.digest })
              : undefined,
          )
        : i === failedAt
          ? terminated(1, !result.ok ? result.message : undefined)
          : { waiting: { reason: 'PodInitializing' } };
    const pod: V1Pod = {
      apiVersion: 'v1',
      kind: 'Pod',
      metadata: {
        name: `${name}-abcde`,
        namespace,
        labels: {
          ...(job.spec!.template.metadata?.labels ?? {}),
          'job-name': name,
          'batch.kubernetes.io/job-name': name,
        },
      },
      spec,
    };
    const created = await this.core.createNamespacedPod({ namespace, body: pod });
    const cs = (i: number) => ({
      name: steps[i]!,
      ready: false,
      restartCount: 0,
      image: 'x',
      imageID: '',
      state: state(i),
    });
    await this.core.replaceNamespacedPodStatus({
      name: created.metadata!.name!,
      namespace,
      body: {
        ...created,
        status: {
          phase: result.ok ? 'Succeeded' : 'Failed',
          initContainerStatuses: [cs(0), cs(1)],
          containerStatuses: [cs(2)],
        },
      },
    });
    const now = new Date();
    const condition = result.ok
      ? { type: 'Complete', status: 'True', lastTransitionTime: now, lastProbeTime: now }
      : {
          type: 'Failed',
          status: 'True',
          reason: 'BackoffLimitExceeded',
          message: 'Job has reached the specified backoff limit',
          lastTransitionTime: now,
          lastProbeTime: now,
        };
    await this.batch.replaceNamespacedJobStatus({
      name,
      namespace,
      body: { ...job, status: { ...(result.ok ? { succeeded: 1 } : { failed: 1 }), conditions: [condition] } },
    });
  }

  /**
   * Plays the Job controller trying `attempts` times to create a build Job's pod. Each refusal (Pod Security
   * admission, quota...) is recorded as the real controller does: a FailedCreate Warning Event on the Job, one
   * object whose count grows. Returns how many attempts were refused.
   */
  async tryJobPod(name: string, attempts: number): Promise<number> {
    const namespace = this.namespace;
    const job = await this.batch.readNamespacedJob({ name, namespace });
    const eventName = `${name}.${createHash('sha256').update(job.metadata!.uid!).digest('hex').slice(0, 16)}`;
    let refused = 0;
    for (let i = 0; i < attempts; i++) {
      const podName = `${name}-${String(i).padStart(5, 'x')}`;
      const message = await this.core
        .createNamespacedPod({
          namespace,
          body: {
            metadata: {
              name: podName,
              namespace,
              labels: { ...job.spec!.template.metadata?.labels, 'job-name': name },
            },
            spec: job.spec!.template.spec!,
          },
        })
        .then(
          () => undefined,
          (err: { body?: string }) => `Error creating: ${JSON.parse(err.body ?? '{}').message ?? String(err)}`,
        );
      if (!message) continue;
      refused++;
      const now = new Date();
      const existing = await this.core.readNamespacedEvent({ name: eventName, namespace }).catch(() => undefined);
      if (existing)
        await this.core.replaceNamespacedEvent({
          name: eventName,
          namespace,
          body: { ...existing, message, count: (existing.count ?? 1) + 1, lastTimestamp: now },
        });
      else
        await this.core.createNamespacedEvent({
          namespace,
          body: {
            metadata: { name: eventName, namespace },
            involvedObject: { apiVersion: 'batch/v1', kind: 'Job', name, namespace, uid: job.metadata!.uid },
            reason: 'FailedCreate',
            type: 'Warning',
            message,
            count: 1,
            firstTimestamp: now,
            lastTimestamp: now,
            source: { component: 'job-controller' },
          },
        });
    }
    return refused;
  }

  /**
   * Plays the Deployment controller for the current pod template: its ReplicaSet (pod-template-hash), pods, and
   * the Deployment status. `mode` ready: all available; crash: the new pod crash-loops past the operator's restart
   * limit; stall: deadline exceeded; crash-until-postgres: an agent server that exits while its database does not
   * answer: it crash-loops (a few restarts) until the deployment's Postgres StatefulSet is ready, then runs.
   */
  async rollout(name: string, requested: 'ready' | 'crash' | 'stall' | 'crash-until-postgres'): Promise<void> {
    // Like Kubernetes' Deployment controller: a write refused because the Deployment changed meanwhile (409, the
    // operator wrote it) is done again on a fresh read.
    for (let attempt = 1; ; attempt++) {
      try {
        return await this.rolloutOnce(name, requested);
      } catch (err) {
        if (attempt >= 5 || (err as { code?: number }).code !== 409) throw err;
      }
    }
  }

  private async rolloutOnce(
    name: string,
    requested: 'ready' | 'crash' | 'stall' | 'crash-until-postgres',
  ): Promise<void> {
    const namespace = this.namespace;
    let mode: 'ready' | 'crash' | 'stall' | 'starting' = requested === 'crash-until-postgres' ? 'ready' : requested;
    if (requested === 'crash-until-postgres') {
      const db = await this.apps.readNamespacedStatefulSet({ name: `${name}-postgres`, namespace });
      if ((db.status?.readyReplicas ?? 0) < 1) mode = 'starting';
    }
    const d = await this.apps.readNamespacedDeployment({ name, namespace });
    const template = d.spec!.template;
    const hash = createHash('sha256').update(JSON.stringify(template)).digest('hex').slice(0, 10);
    const rsName = `${name}-${hash}`;
    const want = d.spec!.replicas ?? 1;
    const owned = (await this.apps.listNamespacedReplicaSet({ namespace })).items.filter((rs) =>
      rs.metadata?.ownerReferences?.some((o) => o.uid === d.metadata!.uid),
    );
    const revision = String(
      Math.max(0, ...owned.map((rs) => Number(rs.metadata?.annotations?.['deployment.kubernetes.io/revision'] ?? 0))) +
        1,
    );
    let rs = owned.find((r) => r.metadata!.name === rsName);
    const ready = mode === 'ready';
    if (!rs) {
      const labels = { ...(template.metadata?.labels ?? {}), 'pod-template-hash': hash };
      const body: V1ReplicaSet = {
        apiVersion: 'apps/v1',
        kind: 'ReplicaSet',
        metadata: {
          name: rsName,
          namespace,
          labels,
          annotations: { 'deployment.kubernetes.io/revision': revision },
          ownerReferences: [
            { apiVersion: 'apps/v1', kind: 'Deployment', name, uid: d.metadata!.uid!, controller: true },
          ],
        },
        spec: {
          replicas: want,
          selector: { matchLabels: { ...d.spec!.selector.matchLabels, 'pod-template-hash': hash } },
          template: { ...template, metadata: { ...template.metadata, labels } },
        },
      };
      rs = await this.apps.createNamespacedReplicaSet({ namespace, body });
    }
    await this.apps.replaceNamespacedReplicaSetStatus({
      name: rsName,
      namespace,
      body: { ...rs, status: { replicas: want, readyReplicas: ready ? want : 0, availableReplicas: ready ? want : 0 } },
    });
    // Old ReplicaSets keep serving until the new one is available.
    for (const old of owned.filter((r) => r.metadata!.name !== rsName)) {
      const keep = ready ? 0 : (old.status?.availableReplicas ?? 0);
      await this.apps.replaceNamespacedReplicaSetStatus({
        name: old.metadata!.name!,
        namespace,
        body: { ...old, status: { replicas: keep, availableReplicas: keep, readyReplicas: keep } },
      });
    }
    const podName = `${rsName}-x1`;
    let pod: V1Pod;
    try {
      pod = await this.core.readNamespacedPod({ name: podName, namespace });
    } catch {
      pod = await this.core.createNamespacedPod({
        namespace,
        body: {
          apiVersion: 'v1',
          kind: 'Pod',
          metadata: { name: podName, namespace, labels: rs.spec!.template!.metadata!.labels },
          spec: template.spec!,
        },
      });
    }
    const crashing = mode === 'crash' || mode === 'starting';
    const state = crashing
      ? { waiting: { reason: 'CrashLoopBackOff', message: 'back-off 20s restarting failed container' } }
      : { running: { startedAt: new Date() } };
    await this.core.replaceNamespacedPodStatus({
      name: podName,
      namespace,
      body: {
        ...pod,
        status: {
          phase: 'Running',
          containerStatuses: [
            {
              name: 'agent-server',
              ready,
              restartCount: mode === 'crash' ? 6 : mode === 'starting' ? 2 : 0,
              image: 'x',
              imageID: '',
              state,
              ...(crashing ? { lastState: { terminated: { exitCode: 1, reason: 'Error' } } } : {}),
            },
          ],
        },
      },
    });
    const prevAvailable = owned
      .filter((r) => r.metadata!.name !== rsName)
      .reduce((n, r) => n + (r.status?.availableReplicas ?? 0), 0);
    const now = new Date();
    const status: V1Deployment['status'] = {
      observedGeneration: d.metadata!.generation,
      replicas: ready ? want : want + prevAvailable,
      updatedReplicas: want,
      readyReplicas: ready ? want : prevAvailable,
      availableReplicas: ready ? want : prevAvailable,
      conditions: [
        mode === 'stall'
          ? {
              type: 'Progressing',
              status: 'False',
              reason: 'ProgressDeadlineExceeded',
              message: `ReplicaSet "${rsName}" has timed out progressing.`,
              lastUpdateTime: now,
              lastTransitionTime: now,
            }
          : {
              type: 'Progressing',
              status: 'True',
              reason: ready ? 'NewReplicaSetAvailable' : 'ReplicaSetUpdated',
              lastUpdateTime: now,
              lastTransitionTime: now,
            },
      ],
    };
    await this.apps.replaceNamespacedDeploymentStatus({ name, namespace, body: { ...d, status } });
  }

  /**
   * Plays the kubelet and the Deployment controller when every pod of a rolled-out Deployment stops serving: each
   * pod's container waits in CrashLoopBackOff (its last run ended `lastReason`, e.g. OOMKilled), no replica is
   * available, and the Deployment keeps Progressing NewReplicaSetAvailable (its rollout is not redone). A later
   * rollout(name, 'ready') brings the pods back.
   */
  async podsDown(name: string, lastReason: 'Error' | 'OOMKilled'): Promise<void> {
    const namespace = this.namespace;
    const d = await this.apps.readNamespacedDeployment({ name, namespace });
    const owned = (await this.apps.listNamespacedReplicaSet({ namespace })).items.filter((rs) =>
      rs.metadata?.ownerReferences?.some((o) => o.uid === d.metadata!.uid),
    );
    for (const rs of owned) {
      await this.apps.replaceNamespacedReplicaSetStatus({
        name: rs.metadata!.name!,
        namespace,
        body: { ...rs, status: { replicas: rs.status?.replicas ?? 0, availableReplicas: 0, readyReplicas: 0 } },
      });
      const hash = rs.metadata?.labels?.['pod-template-hash'];
      const pods = (await this.core.listNamespacedPod({ namespace })).items.filter(
        (p) => p.metadata?.labels?.['pod-template-hash'] === hash,
      );
      for (const pod of pods) {
        await this.core.replaceNamespacedPodStatus({
          name: pod.metadata!.name!,
          namespace,
          body: {
            ...pod,
            status: {
              phase: 'Running',
              containerStatuses: [
                {
                  name: 'agent-server',
                  ready: false,
                  restartCount: 3,
                  image: 'x',
                  imageID: '',
                  state: {
                    waiting: { reason: 'CrashLoopBackOff', message: 'back-off 40s restarting failed container' },
                  },
                  lastState: { terminated: { exitCode: lastReason === 'OOMKilled' ? 137 : 1, reason: lastReason } },
                },
              ],
            },
          },
        });
      }
    }
    const current = await this.apps.readNamespacedDeployment({ name, namespace });
    await this.apps.replaceNamespacedDeploymentStatus({
      name,
      namespace,
      body: {
        ...current,
        status: {
          ...current.status,
          readyReplicas: 0,
          availableReplicas: 0,
          unavailableReplicas: d.spec?.replicas ?? 1,
        },
      },
    });
  }

  /** Plays the StatefulSet controller and kubelet for a deployment's Postgres: its one replica is ready. */
  async postgresReady(name: string): Promise<void> {
    const namespace = this.namespace;
    const sts = await this.apps.readNamespacedStatefulSet({ name: `${name}-postgres`, namespace });
    await this.apps.replaceNamespacedStatefulSetStatus({
      name: `${name}-postgres`,
      namespace,
      body: {
        ...sts,
        status: {
          replicas: 1,
          readyReplicas: 1,
          availableReplicas: 1,
          currentReplicas: 1,
          updatedReplicas: 1,
          observedGeneration: sts.metadata!.generation,
        },
      },
    });
  }
}

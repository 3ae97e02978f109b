// The cluster's part, played by the test over the API (the double has no controllers): the Job controller
// finishing a build, the Deployment controller making a ReplicaSet and pods available, or stalling.
import { createHash } from 'node:crypto';
import { AppsV1Api, BatchV1Api, CoreV1Api, type KubeConfig, type V1Deployment, type V1Pod, type V1ReplicaSet } from '@kubernetes/client-node';

export class FakeCluster {
  private readonly apps: AppsV1Api;
  private readonly batch: BatchV1Api;
  private readonly core: CoreV1Api;

  constructor(kc: KubeConfig, private readonly namespace: string) {
    this.apps = kc.makeApiClient(AppsV1Api);
    this.batch = kc.makeApiClient(BatchV1Api);
    this.core = kc.makeApiClient(CoreV1Api);
  }

  /** Ends a build Job: its pod terminates with `termination` (success) or with the failed container's message. */
  async finishJob(name: string, result: { ok: true; commit: string; digest: string } | { ok: false; container: 'clone' | 'build'; message: string }): Promise<void> {
    const namespace = this.namespace;
    const job = await this.batch.readNamespacedJob({ name, namespace });
    const spec = job.spec!.template.spec!;
    const terminated = (exitCode: number, message?: string) => ({ terminated: { exitCode, reason: exitCode ? 'Error' : 'Completed', ...(message ? { message } : {}) } });
    const cloneFailed = !result.ok && result.container === 'clone';
    const pod: V1Pod = {
      apiVersion: 'v1',
      kind: 'Pod',
      metadata: { name: `${name}-abcde`, namespace, labels: { ...(job.spec!.template.metadata?.labels ?? {}), 'job-name': name, 'batch.kubernetes.io/job-name': name } },
      spec,
    };
    const created = await this.core.createNamespacedPod({ namespace, body: pod });
    const cs = (n: string, state: object) => ({ name: n, ready: false, restartCount: 0, image: 'x', imageID: '', state });
    await this.core.replaceNamespacedPodStatus({
      name: created.metadata!.name!,
      namespace,
      body: {
        ...created,
        status: {
          phase: result.ok ? 'Succeeded' : 'Failed',
          initContainerStatuses: [cs('clone', cloneFailed ? terminated(1, !result.ok ? result.message : undefined) : terminated(0))],
          containerStatuses: [
            cs('build',
              result.ok ? terminated(0, JSON.stringify({ commit: result.commit, digest: result.digest }))
              : cloneFailed ? { waiting: { reason: 'PodInitializing' } }
              : terminated(1, result.message)),
          ],
        },
      },
    });
    const now = new Date();
    const condition = result.ok
      ? { type: 'Complete', status: 'True', lastTransitionTime: now, lastProbeTime: now }
      : { type: 'Failed', status: 'True', reason: 'BackoffLimitExceeded', message: 'Job has reached the specified backoff limit', lastTransitionTime: now, lastProbeTime: now };
    await this.batch.replaceNamespacedJobStatus({
      name,
      namespace,
      body: { ...job, status: { ...(result.ok ? { succeeded: 1 } : { failed: 1 }), conditions: [condition] } },
    });
  }

  /**
   * Plays the Deployment controller for the current pod template: its ReplicaSet (pod-template-hash), pods, and
   * the Deployment status. `mode` ready: all available; crash: the new pod crash-loops; stall: deadline exceeded.
   */
  async rollout(name: string, mode: 'ready' | 'crash' | 'stall'): Promise<void> {
    const namespace = this.namespace;
    const d = await this.apps.readNamespacedDeployment({ name, namespace });
    const template = d.spec!.template;
    const hash = createHash('sha256').update(JSON.stringify(template)).digest('hex').slice(0, 10);
    const rsName = `${name}-${hash}`;
    const want = d.spec!.replicas ?? 1;
    const owned = (await this.apps.listNamespacedReplicaSet({ namespace })).items.filter((rs) => rs.metadata?.ownerReferences?.some((o) => o.uid === d.metadata!.uid));
    const revision = String(Math.max(0, ...owned.map((rs) => Number(rs.metadata?.annotations?.['deployment.kubernetes.io/revision'] ?? 0))) + 1);
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
          ownerReferences: [{ apiVersion: 'apps/v1', kind: 'Deployment', name, uid: d.metadata!.uid!, controller: true }],
        },
        spec: { replicas: want, selector: { matchLabels: { ...d.spec!.selector.matchLabels, 'pod-template-hash': hash } }, template: { ...template, metadata: { ...template.metadata, labels } } },
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
      await this.apps.replaceNamespacedReplicaSetStatus({ name: old.metadata!.name!, namespace, body: { ...old, status: { replicas: keep, availableReplicas: keep, readyReplicas: keep } } });
    }
    const podName = `${rsName}-x1`;
    let pod: V1Pod;
    try {
      pod = await this.core.readNamespacedPod({ name: podName, namespace });
    } catch {
      pod = await this.core.createNamespacedPod({
        namespace,
        body: { apiVersion: 'v1', kind: 'Pod', metadata: { name: podName, namespace, labels: rs.spec!.template!.metadata!.labels }, spec: template.spec! },
      });
    }
    const state = mode === 'crash' ? { waiting: { reason: 'CrashLoopBackOff', message: 'back-off 20s restarting failed container' } } : { running: { startedAt: new Date() } };
    await this.core.replaceNamespacedPodStatus({
      name: podName,
      namespace,
      body: {
        ...pod,
        status: {
          phase: 'Running',
          containerStatuses: [{ name: 'agent-server', ready, restartCount: mode === 'crash' ? 3 : 0, image: 'x', imageID: '', state, ...(mode === 'crash' ? { lastState: { terminated: { exitCode: 1, reason: 'Error' } } } : {}) }],
        },
      },
    });
    const prevAvailable = owned.filter((r) => r.metadata!.name !== rsName).reduce((n, r) => n + (r.status?.availableReplicas ?? 0), 0);
    const now = new Date();
    const status: V1Deployment['status'] = {
      observedGeneration: d.metadata!.generation,
      replicas: ready ? want : want + prevAvailable,
      updatedReplicas: want,
      readyReplicas: ready ? want : prevAvailable,
      availableReplicas: ready ? want : prevAvailable,
      conditions: [
        mode === 'stall'
          ? { type: 'Progressing', status: 'False', reason: 'ProgressDeadlineExceeded', message: `ReplicaSet "${rsName}" has timed out progressing.`, lastUpdateTime: now, lastTransitionTime: now }
          : { type: 'Progressing', status: 'True', reason: ready ? 'NewReplicaSetAvailable' : 'ReplicaSetUpdated', lastUpdateTime: now, lastTransitionTime: now },
      ],
    };
    await this.apps.replaceNamespacedDeploymentStatus({ name, namespace, body: { ...d, status } });
  }
}

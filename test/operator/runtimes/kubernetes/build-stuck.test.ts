// A build pod that cannot start fails the build with the reason, instead of the revision saying BUILDING until the
// Job's deadline (30 minutes): an image that cannot be pulled or a configuration the kubelet refuses at once, no
// node to run on after a grace period (a cluster autoscaler may be adding one).
import type { V1Deployment, V1Job, V1Pod, V1ReplicaSet } from '@kubernetes/client-node';
import { describe, expect, it } from 'vitest';
import {
  buildStatusOf,
  rolloutStatusOf,
  UNSCHEDULABLE_GRACE_MS,
} from '../../../../src/operator/runtimes/kubernetes/observe.ts';

const repo = 'registry.example.com/agents/ag-1';
const running = { status: { active: 1 } } as V1Job;
const now = Date.parse('2026-01-01T12:00:00Z');

function pending(status: Record<string, unknown>): V1Pod {
  return { metadata: { name: 'b-build-x' }, status: { phase: 'Pending', ...status } } as V1Pod;
}
const waiting = (name: string, reason: string, message?: string) => ({
  initContainerStatuses: [
    { name, ready: false, restartCount: 0, image: 'i', imageID: '', state: { waiting: { reason, message } } },
  ],
});
const unschedulable = (sinceMs: number) => ({
  conditions: [
    {
      type: 'PodScheduled',
      status: 'False',
      reason: 'Unschedulable',
      message: '0/3 nodes are available: 3 Insufficient memory.',
      lastTransitionTime: new Date(now - sinceMs).toISOString(),
    },
  ],
});

describe('a build pod that cannot start', () => {
  it('fails on an image that cannot be pulled, naming the container and the kubelet message', () => {
    const pod = pending(waiting('build', 'ImagePullBackOff', 'Back-off pulling image "moby/buildkit:nope"'));
    expect(buildStatusOf(running, pod, repo, now)).toEqual({
      phase: 'Failed',
      message: 'Build pod cannot start: build: ImagePullBackOff: Back-off pulling image "moby/buildkit:nope"',
    });
  });

  it('fails on a configuration the kubelet refuses', () => {
    const pod = pending(waiting('clone', 'CreateContainerConfigError', 'secret "x-build-git" not found'));
    expect(buildStatusOf(running, pod, repo, now).phase).toBe('Failed');
  });

  it('fails when unschedulable past the grace period, and not before', () => {
    expect(buildStatusOf(running, pending(unschedulable(10_000)), repo, now)).toEqual({ phase: 'Running' });
    const late = buildStatusOf(running, pending(unschedulable(UNSCHEDULABLE_GRACE_MS + 1000)), repo, now);
    expect(late.phase).toBe('Failed');
    expect((late as { message: string }).message).toContain('Insufficient memory');
  });

  it('keeps running while the pod is only being created or pulling', () => {
    expect(buildStatusOf(running, pending(waiting('clone', 'ContainerCreating')), repo, now).phase).toBe('Running');
    expect(buildStatusOf(running, pending(waiting('clone', 'ErrImagePull')), repo, now).phase).toBe('Running');
  });
});

describe('agent pods that cannot be created', () => {
  it("fail the rollout at once with the ReplicaSet's reason (e.g. Pod Security admission), not after the deadline", () => {
    const rev = 'ag-1-r2';
    const deployment = {
      metadata: { name: 'ag-1', uid: 'd-uid', generation: 2 },
      spec: { replicas: 1, selector: {}, template: { metadata: { labels: { 'agentplane.dev/revision': rev } } } },
      status: { observedGeneration: 2, replicas: 0, updatedReplicas: 0, availableReplicas: 0, conditions: [] },
    } as unknown as V1Deployment;
    const message = 'pods "ag-1-5d9c7-x" is forbidden: violates PodSecurity "restricted:latest": runAsNonRoot != true';
    const rs = {
      metadata: {
        name: 'ag-1-5d9c7',
        labels: { 'pod-template-hash': '5d9c7' },
        annotations: { 'deployment.kubernetes.io/revision': '2' },
        ownerReferences: [{ uid: 'd-uid', apiVersion: 'apps/v1', kind: 'Deployment', name: 'ag-1' }],
      },
      spec: { selector: {}, template: { metadata: { labels: { 'agentplane.dev/revision': rev } } } },
      status: {
        replicas: 0,
        conditions: [{ type: 'ReplicaFailure', status: 'True', reason: 'FailedCreate', message }],
      },
    } as unknown as V1ReplicaSet;
    expect(rolloutStatusOf(deployment, [rs], [], rev)).toEqual({
      phase: 'Failed',
      message: `Pods cannot be created (FailedCreate): ${message}`,
    });
  });
});

import { describe, expect, it } from 'vitest';
import type { V1Deployment, V1Job, V1Pod, V1ReplicaSet } from '@kubernetes/client-node';
import {
  buildStatusOf,
  databaseRefusal,
  podFailure,
  rolloutStatusOf,
} from '../../../../src/operator/runtimes/kubernetes/observe.ts';
import { nextRevisionStatus } from '../../../../src/operator/controllers/agentrevision/decide.ts';
import { buildPodOf } from '../../../../src/operator/runtimes/kubernetes/builds.ts';

const repo = 'registry.example.com/agents/ag-1';
const digest = `sha256:${'c'.repeat(64)}`;
const buildPod = (terminated: Record<string, unknown>, init?: Record<string, unknown>): V1Pod =>
  ({
    metadata: { name: 'p' },
    status: {
      ...(init
        ? {
            initContainerStatuses: [
              { name: 'clone', ready: false, restartCount: 0, image: 'g', imageID: '', state: { terminated: init } },
            ],
          }
        : {}),
      containerStatuses: [
        { name: 'push', ready: false, restartCount: 0, image: 'b', imageID: '', state: { terminated } },
      ],
    },
  }) as unknown as V1Pod;
const job = (
  conditions: { type: string; status: string; reason?: string; message?: string }[],
  extra: Record<string, unknown> = {},
): V1Job => ({ status: { conditions, ...extra } }) as V1Job;

describe('build status from the Job', () => {
  const ok = buildPod({ exitCode: 0, message: JSON.stringify({ commit: 'abcdef1', digest }) });
  it.each([
    ['no conditions yet', job([], { active: 1 }), undefined, { phase: 'Running' }],
    [
      'complete with digest',
      job([{ type: 'Complete', status: 'True' }]),
      ok,
      { phase: 'Succeeded', commitSha: 'abcdef1', image: `${repo}@${digest}` },
    ],
    [
      'complete but no termination message',
      job([{ type: 'Complete', status: 'True' }]),
      buildPod({ exitCode: 0 }),
      { phase: 'Failed', message: expect.stringContaining('no image digest') },
    ],
    [
      'clone failed',
      job([
        {
          type: 'Failed',
          status: 'True',
          reason: 'BackoffLimitExceeded',
          message: 'Job has reached the specified backoff limit',
        },
      ]),
      buildPod({ exitCode: 0 }, { exitCode: 1, message: 'repo_ref "nope" is not a branch, tag or commit' }),
      {
        phase: 'Failed',
        message: 'Build failed (BackoffLimitExceeded): clone: exit 1: repo_ref "nope" is not a branch, tag or commit',
      },
    ],
    [
      'deadline exceeded, pod gone',
      job([
        {
          type: 'Failed',
          status: 'True',
          reason: 'DeadlineExceeded',
          message: 'Job was active longer than specified deadline',
        },
      ]),
      undefined,
      { phase: 'Failed', message: 'Build failed (DeadlineExceeded): Job was active longer than specified deadline' },
    ],
  ])('%s', (_name, j, pod, expected) => {
    expect(buildStatusOf(j, pod, repo)).toEqual(expected);
  });

  it('feeds the revision controller: Running -> BUILDING, Failed -> BUILD_FAILED, Succeeded -> AWAITING_DEPLOY', () => {
    const facts = { status: 'BUILDING' as const, supported: { ok: true as const }, isTarget: true, routed: false };
    expect(nextRevisionStatus({ ...facts, build: buildStatusOf(job([]), undefined, repo) }).status).toBe('BUILDING');
    const failed = buildStatusOf(
      job([{ type: 'Failed', status: 'True', reason: 'BackoffLimitExceeded' }]),
      buildPod({ exitCode: 2, reason: 'Error' }),
      repo,
    );
    expect(nextRevisionStatus({ ...facts, build: failed })).toEqual({
      status: 'BUILD_FAILED',
      message: 'Build failed (BackoffLimitExceeded): push: exit 2: Error',
    });
    expect(
      nextRevisionStatus({ ...facts, build: buildStatusOf(job([{ type: 'Complete', status: 'True' }]), ok, repo) })
        .status,
    ).toBe('AWAITING_DEPLOY');
  });

  it('names a waiting init container that cannot start', () => {
    const pod = {
      status: {
        initContainerStatuses: [
          {
            name: 'clone',
            ready: false,
            restartCount: 0,
            image: '',
            imageID: '',
            state: { waiting: { reason: 'ImagePullBackOff', message: 'no such image' } },
          },
        ],
      },
    } as V1Pod;
    expect(podFailure(pod)).toBe('clone: ImagePullBackOff: no such image');
  });
});

const REV = 'ag-1-r2';
type RolloutCase = {
  gen?: number;
  observedGen?: number;
  replicas?: number;
  updated?: number;
  available?: number;
  total?: number;
  rsAvailable?: number;
  rsRevision?: string;
  templateRevision?: string;
  progressing?: { status: string; reason: string; message?: string };
  waiting?: { reason: string; message?: string };
  restarts?: number;
  /** The container's last run ended OOMKilled. */
  oom?: boolean;
};

function cluster(c: RolloutCase): [V1Deployment, V1ReplicaSet[], V1Pod[]] {
  const want = c.replicas ?? 2;
  const deployment = {
    metadata: { name: 'ag-1', uid: 'd-uid', generation: c.gen ?? 3 },
    spec: {
      replicas: want,
      selector: {},
      template: { metadata: { labels: { 'agentplane.dev/revision': c.templateRevision ?? REV } } },
    },
    status: {
      observedGeneration: c.observedGen ?? c.gen ?? 3,
      replicas: c.total ?? c.updated ?? want,
      updatedReplicas: c.updated ?? want,
      availableReplicas: c.available ?? want,
      conditions: c.progressing ? [{ type: 'Progressing', ...c.progressing }] : [],
    },
  } as V1Deployment;
  const rs = (name: string, revision: string, n: string, hash: string, available: number): V1ReplicaSet =>
    ({
      metadata: {
        name,
        labels: { 'pod-template-hash': hash },
        annotations: { 'deployment.kubernetes.io/revision': n },
        ownerReferences: [{ uid: 'd-uid', apiVersion: 'apps/v1', kind: 'Deployment', name: 'ag-1' }],
      },
      spec: { selector: {}, template: { metadata: { labels: { 'agentplane.dev/revision': revision } } } },
      status: { replicas: available, availableReplicas: available },
    }) as V1ReplicaSet;
  const sets = [rs('old', 'ag-1-r1', '1', 'h1', 0), rs('new', c.rsRevision ?? REV, '2', 'h2', c.rsAvailable ?? want)];
  const pods = [
    {
      metadata: { name: 'ag-1-h2-x', labels: { 'pod-template-hash': 'h2' } },
      status: {
        containerStatuses: [
          {
            name: 'agent-server',
            ready: !c.waiting,
            restartCount: c.waiting ? (c.restarts ?? 5) : 0,
            image: '',
            imageID: '',
            state: c.waiting ? { waiting: c.waiting } : { running: {} },
            ...(c.waiting
              ? { lastState: { terminated: { exitCode: c.oom ? 137 : 1, reason: c.oom ? 'OOMKilled' : 'Error' } } }
              : {}),
          },
        ],
      },
    } as V1Pod,
  ];
  return [deployment, sets, pods];
}

describe('rollout status from the Deployment, its ReplicaSets and pods', () => {
  it.each<[string, RolloutCase, unknown]>([
    ['all new replicas available', {}, { phase: 'Ready' }],
    ['controller has not seen the new spec', { gen: 4, observedGen: 3 }, { phase: 'Starting' }],
    ['only some replicas updated', { updated: 1 }, { phase: 'Starting' }],
    ['updated but not yet available', { available: 1 }, { phase: 'Starting' }],
    ['old pods still around', { total: 3 }, { phase: 'Starting' }],
    ['new ReplicaSet not available', { rsAvailable: 0 }, { phase: 'Starting' }],
    ['the ReplicaSet is of another revision', { rsRevision: 'ag-1-r9' }, { phase: 'Starting' }],
    [
      'progress deadline exceeded',
      {
        available: 0,
        progressing: {
          status: 'False',
          reason: 'ProgressDeadlineExceeded',
          message: 'ReplicaSet "new" has timed out progressing.',
        },
      },
      {
        phase: 'Failed',
        message: 'Rollout stalled (ProgressDeadlineExceeded): ReplicaSet "new" has timed out progressing.',
      },
    ],
    [
      'progressing normally',
      { available: 0, progressing: { status: 'True', reason: 'ReplicaSetUpdated' } },
      { phase: 'Starting' },
    ],
    [
      'crash-looping new pod',
      { available: 0, waiting: { reason: 'CrashLoopBackOff', message: 'back-off 40s restarting failed container' } },
      { phase: 'Failed', message: 'Pod ag-1-h2-x: CrashLoopBackOff: back-off 40s restarting failed container' },
    ],
    [
      'crash loop below the restart limit (a database still starting)',
      {
        available: 0,
        restarts: 4,
        waiting: { reason: 'CrashLoopBackOff', message: 'back-off 40s restarting failed container' },
      },
      { phase: 'Starting' },
    ],
    [
      'image cannot be pulled at once, whatever the restarts',
      { available: 0, restarts: 0, waiting: { reason: 'ImagePullBackOff' } },
      { phase: 'Failed', message: 'Pod ag-1-h2-x: ImagePullBackOff: last exit 1 (Error)' },
    ],
    [
      'image cannot be pulled',
      { available: 0, waiting: { reason: 'ImagePullBackOff' } },
      { phase: 'Failed', message: 'Pod ag-1-h2-x: ImagePullBackOff: last exit 1 (Error)' },
    ],
    ['first pull error is not final', { available: 0, waiting: { reason: 'ErrImagePull' } }, { phase: 'Starting' }],
    ['scaled to zero', { replicas: 0, rsAvailable: 0 }, { phase: 'Ready' }],
  ])('%s', (_name, c, expected) => {
    const [d, sets, pods] = cluster(c);
    expect(rolloutStatusOf(d, sets, pods, REV)).toEqual(expected);
  });

  // After the rollout completed (Progressing: NewReplicaSetAvailable), the revision serves while any pod does; when
  // none does, it says why (Kubernetes keeps restarting the pods, so nothing is final), and it heals by itself.
  const rolledOut = { status: 'True', reason: 'NewReplicaSetAvailable' };
  it.each<[string, RolloutCase, unknown]>([
    ['all pods available', { progressing: rolledOut }, { phase: 'Ready' }],
    ['one of two pods still available', { progressing: rolledOut, available: 1, rsAvailable: 1 }, { phase: 'Ready' }],
    ['scaled to zero', { progressing: rolledOut, replicas: 0, rsAvailable: 0 }, { phase: 'Ready' }],
    [
      'every pod crash-looping (however often)',
      {
        progressing: rolledOut,
        available: 0,
        rsAvailable: 0,
        restarts: 12,
        waiting: { reason: 'CrashLoopBackOff', message: 'back-off 5m0s restarting failed container' },
      },
      {
        phase: 'Starting',
        trouble: {
          reason: 'CrashLoopBackOff',
          message: 'Pod ag-1-h2-x: container agent-server: back-off 5m0s restarting failed container',
        },
      },
    ],
    [
      'out of memory',
      { progressing: rolledOut, available: 0, rsAvailable: 0, oom: true, waiting: { reason: 'CrashLoopBackOff' } },
      {
        phase: 'Starting',
        trouble: {
          reason: 'OOMKilled',
          message: 'Pod ag-1-h2-x: container agent-server ran out of memory (restarts: 5)',
        },
      },
    ],
    [
      'image gone from the registry',
      { progressing: rolledOut, available: 0, rsAvailable: 0, waiting: { reason: 'ImagePullBackOff' } },
      {
        phase: 'Starting',
        trouble: { reason: 'ImagePullBackOff', message: 'Pod ag-1-h2-x: container agent-server: last exit 1 (Error)' },
      },
    ],
    [
      'running but not ready',
      { progressing: rolledOut, available: 0, rsAvailable: 0 },
      {
        phase: 'Starting',
        trouble: { reason: 'Unavailable', message: 'no pod of the revision is available (1 present)' },
      },
    ],
    [
      'a newer spec not yet seen by the controller is a rollout again',
      { progressing: rolledOut, gen: 4, observedGen: 3 },
      { phase: 'Starting' },
    ],
  ])('a rolled-out revision: %s', (_name, c, expected) => {
    const [d, sets, pods] = cluster(c);
    expect(rolloutStatusOf(d, sets, pods, REV)).toEqual(expected);
  });

  it('says nothing about a revision the Deployment does not run', () => {
    const [d, sets, pods] = cluster({ templateRevision: 'ag-1-r1' });
    expect(rolloutStatusOf(d, sets, pods, REV)).toBeUndefined();
    expect(rolloutStatusOf(undefined, [], [], REV)).toBeUndefined();
  });

  it('feeds the revision controller: Starting -> DEPLOYING, Ready+routed -> DEPLOYED, Failed -> DEPLOY_FAILED', () => {
    const facts = { status: 'DEPLOYING' as const, supported: { ok: true as const }, isTarget: true, routed: true };
    const run = (c: RolloutCase) => {
      const [d, sets, pods] = cluster(c);
      return nextRevisionStatus({ ...facts, server: rolloutStatusOf(d, sets, pods, REV) }).status;
    };
    expect(run({ updated: 1 })).toBe('DEPLOYING');
    expect(run({})).toBe('DEPLOYED');
    expect(run({ available: 0, waiting: { reason: 'CrashLoopBackOff' } })).toBe('DEPLOY_FAILED');
    expect(run({ available: 0, progressing: { status: 'False', reason: 'ProgressDeadlineExceeded' } })).toBe(
      'DEPLOY_FAILED',
    );
  });
});

describe('buildPodOf', () => {
  const job = { metadata: { name: 'ag-x-r1-build', namespace: 'agentplane-t-a' } };
  const pod = (namespace: string, labels: Record<string, string>) => ({ metadata: { name: 'p', namespace, labels } });
  it("takes the Job's pod by its job-name label in the Job's namespace only", () => {
    // With a namespace per tenant every tenant namespace's pods are watched: another namespace's pod carrying the
    // same label (a tenant's own Job named like ours) is not this build.
    const elsewhere = pod('agentplane-t-b', { 'job-name': 'ag-x-r1-build' });
    const ours = pod('agentplane-t-a', { 'batch.kubernetes.io/job-name': 'ag-x-r1-build' });
    expect(buildPodOf([elsewhere], job)).toBeUndefined();
    expect(buildPodOf([elsewhere, ours], job)).toBe(ours);
    expect(buildPodOf([pod('agentplane-t-a', { 'job-name': 'ag-x-r2-build' })], job)).toBeUndefined();
  });
});

describe("a deployment's own Postgres the cluster refuses", () => {
  const now = Date.parse('2026-01-01T12:00:00Z');
  const pending = (since: number, message = '0/3 nodes are available: 3 Insufficient memory.'): V1Pod =>
    ({
      metadata: { name: 'ag-1-postgres-0' },
      status: {
        phase: 'Pending',
        conditions: [
          {
            type: 'PodScheduled',
            status: 'False',
            reason: 'Unschedulable',
            message,
            lastTransitionTime: new Date(now - since).toISOString(),
          },
        ],
      },
    }) as unknown as V1Pod;
  const refusal = (count: number, firstAgoMs: number) => ({
    reason: 'FailedCreate',
    count,
    message:
      'create Claim data-ag-1-postgres-0 for Pod ag-1-postgres-0 in StatefulSet ag-1-postgres failed error: persistentvolumeclaims "data-ag-1-postgres-0" is forbidden: exceeded quota: storage, requested: requests.storage=1Gi, used: requests.storage=0, limited: requests.storage=1Mi',
    firstTimestamp: new Date(now - firstAgoMs),
    lastTimestamp: new Date(now),
    involvedObject: { kind: 'StatefulSet', name: 'ag-1-postgres' },
    metadata: {},
  });

  it.each([
    ['a pod unschedulable for a moment (an autoscaler may add a node)', [pending(30_000)], [], undefined],
    [
      'a pod unschedulable past the grace',
      [pending(180_000)],
      [],
      /^Postgres pod ag-1-postgres-0 cannot start: Unschedulable for 180 s: 0\/3 nodes are available: 3 Insufficient memory\.$/,
    ],
    ['no pod yet, one refusal just now', [], [refusal(1, 1_000)], undefined],
    [
      'no pod, refusals that persist (a quota)',
      [],
      [refusal(3, 20_000)],
      /^Postgres pod cannot be created \(FailedCreate\): create Claim .*exceeded quota.* \(3 attempts\)$/,
    ],
    [
      'a pod that runs, old refusals',
      [{ metadata: { name: 'p' }, status: { phase: 'Running' } } as V1Pod],
      [refusal(5, 90_000)],
      undefined,
    ],
  ])('%s', (_title, pods, events, expected) => {
    const got = databaseRefusal(pods, events as never, now);
    if (expected) expect(got).toMatch(expected);
    else expect(got).toBeUndefined();
  });
});

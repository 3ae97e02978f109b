import { describe, expect, it } from 'vitest';
import type { RevisionPhase } from '../../../src/resources/index.ts';
import { revisionConditions } from '../../../src/operator/controllers/agentrevision/conditions.ts';
import type { ServerStatus } from '../../../src/operator/runtimes/types.ts';
import {
  nextRevisionStatus,
  NOT_SERVING,
  revisionNeeds,
  type RevisionFacts,
} from '../../../src/operator/controllers/agentrevision/decide.ts';
import {
  chooseRoute,
  deploymentConditions,
  ignoredSpecChanges,
  pickTarget,
  revisionsToSkip,
  servingCondition,
  shouldRoute,
  type RevisionView,
} from '../../../src/operator/controllers/agentdeployment/decide.ts';

const ok = { ok: true } as const;
const base: RevisionFacts = { status: 'QUEUED', supported: ok, isTarget: true, routed: false };

describe('nextRevisionStatus', () => {
  const table: [string, Partial<RevisionFacts>, string, string?][] = [
    [
      'unsupported source fails at creation',
      { supported: { ok: false, message: 'needs a container runtime' } },
      'CREATE_FAILED',
      'needs a container runtime',
    ],
    [
      'nothing to build yet (no upload) is skipped, not failed',
      { supported: { ok: false, message: 'no source tarball yet', nothingYet: true } },
      'SKIPPED',
      'no source tarball yet',
    ],
    ['queued, build running', { build: { phase: 'Running' } }, 'BUILDING'],
    ['awaiting build, build running', { status: 'AWAITING_BUILD', build: { phase: 'Running' } }, 'BUILDING'],
    [
      'building, build failed',
      { status: 'BUILDING', build: { phase: 'Failed', message: 'npm ci exited with code 1' } },
      'BUILD_FAILED',
      'npm ci exited with code 1',
    ],
    [
      'building, build done',
      { status: 'BUILDING', build: { phase: 'Succeeded', commitSha: 'abc' } },
      'AWAITING_DEPLOY',
    ],
    ['built, not the target: waits', { status: 'AWAITING_DEPLOY', isTarget: false }, 'AWAITING_DEPLOY'],
    ['built target, server starting', { status: 'AWAITING_DEPLOY', server: { phase: 'Starting' } }, 'DEPLOYING'],
    [
      'deploying, server failed',
      { status: 'DEPLOYING', server: { phase: 'Failed', message: 'exited with code 1' } },
      'DEPLOY_FAILED',
      'exited with code 1',
    ],
    ['deploying, ready but traffic not moved yet', { status: 'DEPLOYING', server: { phase: 'Ready' } }, 'DEPLOYING'],
    ['deploying, ready and routed', { status: 'DEPLOYING', server: { phase: 'Ready' }, routed: true }, 'DEPLOYED'],
    [
      'deployed stays deployed when its server restarts',
      { status: 'DEPLOYED', server: { phase: 'Starting' } },
      'DEPLOYED',
    ],
    ['skipped is terminal', { status: 'SKIPPED', build: { phase: 'Succeeded', commitSha: 'x' } }, 'SKIPPED'],
    ['build failed is terminal', { status: 'BUILD_FAILED', supported: { ok: false, message: 'x' } }, 'BUILD_FAILED'],
    [
      'deploy failed is terminal',
      { status: 'DEPLOY_FAILED', server: { phase: 'Ready' }, routed: true },
      'DEPLOY_FAILED',
    ],
  ];
  it.each(table)('%s', (_name, facts, status, message) => {
    const out = nextRevisionStatus({ ...base, ...facts }, 'previous message');
    expect(out.status).toBe(status);
    if (message) expect(out.message).toBe(message);
  });

  it.each([
    ['routed: serving', { routed: true }, 'Serving traffic.'],
    ['another revision took the traffic', { isTarget: false }, NOT_SERVING],
    ['the target, its server restarting: keeps what it said', { server: { phase: 'Starting' } }, 'previous message'],
    ['served last, nothing routed yet after a restart', { isTarget: false, keepServing: true }, 'previous message'],
    ['not the target but still routed (its successor builds)', { isTarget: false, routed: true }, 'Serving traffic.'],
  ] as [string, Partial<RevisionFacts>, string][])('a DEPLOYED revision, %s', (_name, facts, message) => {
    const out = nextRevisionStatus({ ...base, status: 'DEPLOYED', ...facts }, 'previous message');
    expect(out).toEqual({ status: 'DEPLOYED', message });
  });

  it('records the resolved commit when the build succeeds', () => {
    expect(
      nextRevisionStatus({ ...base, status: 'BUILDING', build: { phase: 'Succeeded', commitSha: 'abc123' } }).commitSha,
    ).toBe('abc123');
  });
});

describe('revisionNeeds', () => {
  const table: [RevisionPhase, boolean, boolean, { build: boolean; serve: boolean; stop: boolean }][] = [
    ['QUEUED', true, false, { build: true, serve: false, stop: false }],
    ['AWAITING_DEPLOY', true, false, { build: false, serve: true, stop: false }],
    ['AWAITING_DEPLOY', false, false, { build: false, serve: false, stop: true }],
    ['DEPLOYED', true, true, { build: false, serve: true, stop: false }],
    ['DEPLOYED', false, true, { build: false, serve: false, stop: false }],
    ['DEPLOYED', false, false, { build: false, serve: false, stop: true }],
    ['SKIPPED', false, false, { build: false, serve: false, stop: true }],
  ];
  it.each(table)('%s target=%s routed=%s', (status, target, routed, expected) => {
    expect(revisionNeeds(status, target, routed)).toEqual(expected);
  });

  it('brings the last serving revision back after a restart even while a newer one builds', () => {
    expect(revisionNeeds('DEPLOYED', false, false, true)).toEqual({ build: false, serve: true, stop: false });
    expect(revisionNeeds('DEPLOY_FAILED', false, false, true)).toEqual({ build: false, serve: false, stop: true });
  });
});

const r = (number: number, status: RevisionPhase): RevisionView => ({ name: `d-r${number}`, number, status });

describe('pickTarget and revisionsToSkip', () => {
  const table: [string, RevisionView[], string | undefined, string | undefined, string[]][] = [
    ['first revision', [r(1, 'QUEUED')], undefined, 'd-r1', []],
    [
      'newest in progress supersedes older in progress',
      [r(1, 'DEPLOYED'), r(2, 'BUILDING'), r(3, 'QUEUED')],
      undefined,
      'd-r3',
      ['d-r2'],
    ],
    ['newest failed: the live one stays', [r(1, 'DEPLOYED'), r(2, 'BUILD_FAILED')], undefined, 'd-r1', []],
    [
      'newest skipped and failed, older deployed',
      [r(1, 'DEPLOYED'), r(2, 'DEPLOYED'), r(3, 'DEPLOY_FAILED')],
      undefined,
      'd-r2',
      [],
    ],
    ['redeploy of an earlier revision', [r(1, 'DEPLOYED'), r(2, 'DEPLOYED')], 'd-r1', 'd-r1', []],
    ['redeploy wins over an in-progress one', [r(1, 'DEPLOYED'), r(2, 'BUILDING')], 'd-r1', 'd-r1', ['d-r2']],
    ['redeploy of a failed revision is ignored', [r(1, 'DEPLOYED'), r(2, 'BUILD_FAILED')], 'd-r2', 'd-r1', []],
    ['nothing can serve', [r(1, 'BUILD_FAILED')], undefined, undefined, []],
    [
      'order comes from the number, not the list',
      [r(3, 'QUEUED'), r(1, 'DEPLOYED'), r(2, 'QUEUED')],
      undefined,
      'd-r3',
      ['d-r2'],
    ],
  ];
  it.each(table)('%s', (_name, revisions, requested, target, skipped) => {
    expect(pickTarget(revisions, requested)).toBe(target);
    expect(revisionsToSkip(revisions, target)).toEqual(skipped);
  });

  it('judges only the revisions the deployment copy already counts', () => {
    // A copy of the deployment from before r3 was made still asks for a redeploy of r1; r3 (newer than the copy's
    // revisionCounter) replaces that request, so it must not be skipped on the old copy's word. r2 is known to it.
    const revisions = [r(1, 'DEPLOYED'), r(2, 'BUILDING'), r(3, 'QUEUED')];
    const target = pickTarget(revisions, 'd-r1');
    expect(target).toBe('d-r1');
    expect(revisionsToSkip(revisions, target, 2)).toEqual(['d-r2']);
    expect(revisionsToSkip(revisions, target, 3)).toEqual(['d-r2', 'd-r3']);
  });
});

describe('shouldRoute', () => {
  it.each([
    ['d-r2', { phase: 'Ready' } as const, 'd-r1', true],
    ['d-r2', { phase: 'Starting' } as const, 'd-r1', false],
    ['d-r2', { phase: 'Failed', message: 'x' } as const, 'd-r1', false],
    ['d-r1', { phase: 'Ready' } as const, 'd-r1', false],
    [undefined, undefined, 'd-r1', false],
    ['d-r1', { phase: 'Ready' } as const, undefined, true],
  ])('target %s server %o routed %s → %s', (target, server, routed, expected) => {
    expect(shouldRoute(target, server, routed)).toBe(expected);
  });
});

describe('chooseRoute', () => {
  const ready = { phase: 'Ready' } as const;
  const starting = { phase: 'Starting' } as const;
  it.each([
    [
      'target ready replaces the routed one',
      { target: 'r2', targetServer: ready, active: 'r1', activeServer: ready, routed: 'r1' },
      'r2',
    ],
    [
      'target starting: keep what is routed',
      { target: 'r2', targetServer: starting, active: 'r1', activeServer: ready, routed: 'r1' },
      undefined,
    ],
    [
      'after restart, nothing routed, target still building: the previous one serves',
      { target: 'r2', targetServer: undefined, active: 'r1', activeServer: ready, routed: undefined },
      'r1',
    ],
    [
      'after restart, previous one still starting',
      { target: 'r2', targetServer: undefined, active: 'r1', activeServer: starting, routed: undefined },
      undefined,
    ],
    ['converged', { target: 'r1', targetServer: ready, active: 'r1', activeServer: ready, routed: 'r1' }, undefined],
  ] as const)('%s', (_name, facts, expected) => {
    expect(chooseRoute(facts)).toBe(expected);
  });
});

describe('servingCondition', () => {
  it('is true while serving, and says so when the latest revision failed', () => {
    expect(servingCondition('d-r1', r(1, 'DEPLOYED'), r(1, 'DEPLOYED'), '')).toMatchObject({
      status: 'True',
      reason: 'Serving',
    });
    expect(servingCondition('d-r1', r(1, 'DEPLOYED'), r(2, 'BUILD_FAILED'), 'npm ci failed')).toMatchObject({
      status: 'True',
      reason: 'LatestRevisionFailed',
      message: expect.stringContaining('npm ci failed'),
    });
  });
  it('is true and says Sleeping while the routed revision sleeps under the idle policy', () => {
    const asleep: ServerStatus = { phase: 'Ready', sleeping: { since: '2026-12-02T00:00:00.000Z' } };
    expect(servingCondition('d-r1', r(1, 'DEPLOYED'), r(1, 'DEPLOYED'), '', asleep)).toMatchObject({
      status: 'True',
      reason: 'Sleeping',
      message: expect.stringMatching(/^Revision d-r1: Idle: .*first request starts it/),
    });
    // Another revision being the target: the routed one's sleep is not what this condition is about.
    expect(servingCondition('d-r1', r(2, 'DEPLOYED'), r(2, 'DEPLOYED'), '', asleep)).toMatchObject({
      reason: 'Serving',
    });
  });
  it('is false while progressing or when nothing can serve', () => {
    expect(servingCondition(undefined, r(1, 'BUILDING'), r(1, 'BUILDING'), '')).toMatchObject({
      status: 'False',
      reason: 'Progressing',
    });
    expect(servingCondition(undefined, undefined, r(1, 'BUILD_FAILED'), 'boom')).toMatchObject({
      status: 'False',
      reason: 'BUILD_FAILED',
    });
    expect(servingCondition(undefined, r(1, 'BUILDING'), r(1, 'BUILDING'), '').message).toBe(
      'Waiting for revision d-r1 to serve.',
    );
  });
  it.each([
    [
      'crash-looping',
      { phase: 'Starting', trouble: { reason: 'CrashLoopBackOff', message: 'agent server exited with code 1' } },
      'CrashLoopBackOff',
      /d-r1 is not serving: agent server exited with code 1/,
    ],
    [
      'waiting for its database',
      { phase: 'Starting', trouble: { reason: 'DatabaseUnavailable', message: 'ECONNREFUSED' } },
      'DatabaseUnavailable',
      /ECONNREFUSED/,
    ],
    ['starting again', { phase: 'Starting' }, 'NotServing', /is starting/],
    ['failed', { phase: 'Failed', message: 'gone' }, 'NotServing', /gone/],
    ['not asked', undefined, 'NotServing', /is starting/],
  ] as const)(
    'is false, with the reason, for a DEPLOYED target that is not serving (%s)',
    (_n, server, reason, message) => {
      const ready = servingCondition(undefined, r(1, 'DEPLOYED'), r(1, 'DEPLOYED'), '', server);
      // The same when a newer revision failed: the one that should serve says why it does not.
      expect(servingCondition(undefined, r(1, 'DEPLOYED'), r(2, 'DEPLOY_FAILED'), 'boom', server)).toEqual(ready);
      expect(ready).toMatchObject({ status: 'False', reason });
      expect(ready.message).toMatch(message);
    },
  );
});

describe('revisionConditions: Ready of a DEPLOYED revision', () => {
  const ready = (server?: ServerStatus) =>
    revisionConditions('DEPLOYED', 'Serving traffic.', 1, server).find((c) => c.type === 'Ready');
  it.each([
    ['not asked (not the one that should serve)', undefined, 'True', 'Deployed'],
    ['serving', { phase: 'Ready' }, 'True', 'Deployed'],
    [
      'restarting',
      { phase: 'Starting', trouble: { reason: 'Restarting', message: 'killed (SIGKILL)' } },
      'False',
      'Restarting',
    ],
    ['starting', { phase: 'Starting' }, 'False', 'Starting'],
    ['failed', { phase: 'Failed', message: 'no build' }, 'False', 'NotServing'],
    ['asleep (idle policy): it still takes traffic', { phase: 'Ready', sleeping: { since: 'x' } }, 'True', 'Sleeping'],
  ] as const)('%s', (_n, server, status, reason) => {
    expect(ready(server as ServerStatus | undefined)).toMatchObject({ status, reason });
  });
  it('Sleeping: True with what wakes it while asleep, False while awake, absent when the server was not asked', () => {
    const sleeping = (server?: ServerStatus) =>
      revisionConditions('DEPLOYED', '', 1, server).find((c) => c.type === 'Sleeping');
    expect(sleeping({ phase: 'Ready', sleeping: { since: 's', wakeAt: '2026-12-02T00:00:20.000Z' } })).toMatchObject({
      status: 'True',
      reason: 'Idle',
      message: expect.stringMatching(/first request starts it.*wakes it at 2026-12-02T00:00:20.000Z/),
    });
    expect(sleeping({ phase: 'Ready' })).toMatchObject({ status: 'False', reason: 'Awake' });
    expect(sleeping(undefined)).toBeUndefined();
  });
  it('keeps Deployed=True while not serving: the phase stays DEPLOYED', () => {
    const conds = revisionConditions('DEPLOYED', '', 1, { phase: 'Starting' });
    expect(conds.find((c) => c.type === 'Deployed')).toMatchObject({ status: 'True' });
  });
});

describe('deploymentConditions (Knative: Ready only when the revision the spec asks for serves)', () => {
  // kubectl wait --for=condition=Ready right after an apply must wait for the new version, and not return True
  // because the old one serves (test/kube/ showed it on a real server); a failed new version must say so.
  const servingOld = { status: 'True', reason: 'Serving', message: 'Serving revision d-r1.' } as const;
  const none = { status: 'False', reason: 'Progressing', message: '' } as const;
  type Row = [string, Parameters<typeof deploymentConditions>[0], [string, string], [string, string], [string, string]];
  const table: Row[] = [
    [
      'the requested revision serves',
      { routed: 'd-r2', requested: 'd-r2', requestedView: r(2, 'DEPLOYED'), requestedMessage: '', serving: servingOld },
      ['True', 'Serving'],
      ['False', 'Serving'],
      ['False', 'AsExpected'],
    ],
    [
      'the old revision serves, the requested one not created yet',
      { routed: 'd-r1', requested: 'd-r2', requestedView: undefined, requestedMessage: '', serving: servingOld },
      ['Unknown', 'Progressing'],
      ['True', 'AwaitingRevision'],
      ['False', 'AsExpected'],
    ],
    [
      'the old revision serves, the requested one builds',
      { routed: 'd-r1', requested: 'd-r2', requestedView: r(2, 'BUILDING'), requestedMessage: '', serving: servingOld },
      ['Unknown', 'Progressing'],
      ['True', 'BUILDING'],
      ['False', 'AsExpected'],
    ],
    [
      'the requested one deployed, traffic not moved yet',
      { routed: 'd-r1', requested: 'd-r2', requestedView: r(2, 'DEPLOYED'), requestedMessage: '', serving: servingOld },
      ['Unknown', 'Progressing'],
      ['True', 'DEPLOYED'],
      ['False', 'AsExpected'],
    ],
    [
      'the requested build failed while the old one serves',
      {
        routed: 'd-r1',
        requested: 'd-r2',
        requestedView: r(2, 'BUILD_FAILED'),
        requestedMessage: 'npm ci exited with code 1',
        serving: servingOld,
      },
      ['False', 'BUILD_FAILED'],
      ['False', 'BUILD_FAILED'],
      ['True', 'BUILD_FAILED'],
    ],
    [
      'a first revision builds, nothing serves',
      { routed: undefined, requested: 'd-r1', requestedView: r(1, 'BUILDING'), requestedMessage: '', serving: none },
      ['Unknown', 'Progressing'],
      ['True', 'BUILDING'],
      ['False', 'AsExpected'],
    ],
    [
      'the requested revision is deployed but crash-loops, nothing serves',
      {
        routed: undefined,
        requested: 'd-r1',
        requestedView: r(1, 'DEPLOYED'),
        requestedMessage: '',
        serving: { status: 'False', reason: 'CrashLoopBackOff', message: 'exited with code 1' },
      },
      ['False', 'CrashLoopBackOff'],
      ['False', 'CrashLoopBackOff'],
      ['True', 'CrashLoopBackOff'],
    ],
    [
      'the spec changed without a new revision',
      {
        routed: 'd-r1',
        requested: 'd-r1',
        requestedView: r(1, 'DEPLOYED'),
        requestedMessage: '',
        serving: servingOld,
        ignored: 'imageUri changed',
      },
      ['False', 'SpecChangeIgnored'],
      ['False', 'SpecChangeIgnored'],
      ['True', 'SpecChangeIgnored'],
    ],
  ];
  it.each(table)('%s', (_title, facts, ready, progressing, degraded) => {
    const c = deploymentConditions(facts);
    expect([c.Ready.status, c.Ready.reason]).toEqual(ready);
    expect([c.Progressing.status, c.Progressing.reason]).toEqual(progressing);
    expect([c.Degraded.status, c.Degraded.reason]).toEqual(degraded);
  });
  it('says what failed and what still serves', () => {
    const c = deploymentConditions(table[4]![1]);
    expect(c.Ready.message).toBe('d-r2: npm ci exited with code 1 Serving d-r1 meanwhile.');
  });
});

describe('ignoredSpecChanges', () => {
  const spec = {
    deploymentId: 'id',
    tenantId: 't',
    displayName: 'x',
    source: 'external_docker' as const,
    sourceConfig: { resourceSpec: { minScale: 1 }, customUrl: null },
    sourceRevisionConfig: { imageUri: 'img:1' },
    revisionCounter: 3,
    targetRevisionName: 'd-r3',
  };
  const rev = {
    deploymentName: 'd',
    deploymentId: 'id',
    tenantId: 't',
    revisionNumber: 3,
    source: 'external_docker' as const,
    sourceConfig: { resourceSpec: { minScale: 1 } },
    sourceRevisionConfig: { imageUri: 'img:1', repoRef: null },
    secretsName: null,
    secretReferences: [],
  };
  it.each([
    ['nothing changed (null, missing and [] are the same)', spec, []],
    ['imageUri changed (Argo CD, Flux)', { ...spec, sourceRevisionConfig: { imageUri: 'img:2' } }, ['imageUri']],
    ['resources changed', { ...spec, sourceConfig: { resourceSpec: { minScale: 2 } } }, ['resourceSpec']],
    [
      'a setting no revision carries (display name, custom URL)',
      { ...spec, displayName: 'y', sourceConfig: { ...spec.sourceConfig, customUrl: 'https://a.b' } },
      [],
    ],
  ] as const)('%s', (_t, dep, expected) => {
    expect(ignoredSpecChanges(dep as never, rev)).toEqual(expected);
  });
  it('judges only the newest revision, once it exists', () => {
    const changed = { ...spec, sourceRevisionConfig: { imageUri: 'img:2' } };
    expect(ignoredSpecChanges(changed, undefined)).toEqual([]);
    expect(ignoredSpecChanges(changed, { ...rev, revisionNumber: 2 })).toEqual([]);
  });
});

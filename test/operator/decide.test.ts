import { describe, expect, it } from 'vitest';
import type { RevisionPhase } from '../../src/resources/index.ts';
import { revisionConditions } from '../../src/operator/controllers/agentrevision/conditions.ts';
import type { ServerStatus } from '../../src/operator/runtimes/types.ts';
import {
  nextRevisionStatus,
  NOT_SERVING,
  revisionNeeds,
  type RevisionFacts,
} from '../../src/operator/controllers/agentrevision/decide.ts';
import {
  chooseRoute,
  pickTarget,
  readyCondition,
  readyObservedGeneration,
  revisionsToSkip,
  shouldRoute,
  type RevisionView,
} from '../../src/operator/controllers/agentdeployment/decide.ts';

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

describe('readyCondition', () => {
  it('is true while serving, and says so when the latest revision failed', () => {
    expect(readyCondition('d-r1', r(1, 'DEPLOYED'), r(1, 'DEPLOYED'), '')).toMatchObject({
      status: 'True',
      reason: 'Serving',
    });
    expect(readyCondition('d-r1', r(1, 'DEPLOYED'), r(2, 'BUILD_FAILED'), 'npm ci failed')).toMatchObject({
      status: 'True',
      reason: 'LatestRevisionFailed',
      message: expect.stringContaining('npm ci failed'),
    });
  });
  it('is true and says Sleeping while the routed revision sleeps under the idle policy', () => {
    const asleep: ServerStatus = { phase: 'Ready', sleeping: { since: '2026-12-02T00:00:00.000Z' } };
    expect(readyCondition('d-r1', r(1, 'DEPLOYED'), r(1, 'DEPLOYED'), '', asleep)).toMatchObject({
      status: 'True',
      reason: 'Sleeping',
      message: expect.stringMatching(/^Revision d-r1: Idle: .*first request starts it/),
    });
    // Another revision being the target: the routed one's sleep is not what this condition is about.
    expect(readyCondition('d-r1', r(2, 'DEPLOYED'), r(2, 'DEPLOYED'), '', asleep)).toMatchObject({ reason: 'Serving' });
  });
  it('is false while progressing or when nothing can serve', () => {
    expect(readyCondition(undefined, r(1, 'BUILDING'), r(1, 'BUILDING'), '')).toMatchObject({
      status: 'False',
      reason: 'Progressing',
    });
    expect(readyCondition(undefined, undefined, r(1, 'BUILD_FAILED'), 'boom')).toMatchObject({
      status: 'False',
      reason: 'BUILD_FAILED',
    });
    expect(readyCondition(undefined, r(1, 'BUILDING'), r(1, 'BUILDING'), '').message).toBe(
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
      const ready = readyCondition(undefined, r(1, 'DEPLOYED'), r(1, 'DEPLOYED'), '', server);
      // The same when a newer revision failed: the one that should serve says why it does not.
      expect(readyCondition(undefined, r(1, 'DEPLOYED'), r(2, 'DEPLOY_FAILED'), 'boom', server)).toEqual(ready);
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

describe('readyObservedGeneration', () => {
  // kubectl wait --for=condition=Ready right after an apply: a condition of the new generation that is True because
  // the old revision serves would end the wait before the new version runs (test/kube/ showed it on a real server).
  const table: [string, number, number | undefined, string | undefined, string, RevisionView | undefined, number][] = [
    ['the requested revision serves: this generation', 2, 1, 'd-r2', 'd-r2', r(2, 'DEPLOYED'), 2],
    ['the old revision serves, the requested one not created yet', 2, 1, 'd-r1', 'd-r2', undefined, 1],
    ['the old revision serves, the requested one builds', 2, 1, 'd-r1', 'd-r2', r(2, 'BUILDING'), 1],
    ['the old revision serves, the requested one deployed, not routed yet', 3, 1, 'd-r1', 'd-r2', r(2, 'DEPLOYED'), 1],
    ['no earlier Ready condition: the generation before', 4, undefined, 'd-r1', 'd-r2', r(2, 'DEPLOYING'), 3],
    ['the requested revision failed: this generation (Ready says why)', 2, 1, 'd-r1', 'd-r2', r(2, 'BUILD_FAILED'), 2],
    ['nothing serves: this generation (Ready is False anyway)', 2, 1, undefined, 'd-r2', r(2, 'BUILDING'), 2],
  ];
  it.each(table)('%s', (_title, generation, previous, routed, requested, view, expected) => {
    expect(readyObservedGeneration(generation, previous, routed, requested, view)).toBe(expected);
  });
});

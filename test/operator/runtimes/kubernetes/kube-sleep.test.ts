// The cluster's sleep state machine (runtimes/kubernetes/sleep.ts) as tables: which state a deployment moves to on
// each reconcile, what its Deployment records, and the Service and EndpointSlice that send a sleeping deployment's
// traffic to the activator.
import { describe, expect, it } from 'vitest';
import {
  makeActivatorSlice,
  makeSleepingService,
  nextSleep,
  readyEndpoints,
  replicasIn,
  sleepAnnotations,
  sleepStateOf,
  type SleepFacts,
  type SleepState,
} from '../../../../src/operator/runtimes/kubernetes/sleep.ts';
import { makeService } from '../../../../src/operator/runtimes/kubernetes/routing.ts';

const SINCE = '2026-01-01T00:00:00.000Z';
const NOW = Date.parse('2026-01-01T01:00:00.000Z');
const asleep: SleepState = { kind: 'asleep', since: SINCE };
const waking: SleepState = { kind: 'waking', since: SINCE, wakingSince: new Date(NOW).toISOString() };

describe('nextSleep', () => {
  const base: SleepFacts = { now: NOW, state: asleep, eligible: true, readyReplicas: 0 };
  it.each<[string, Partial<SleepFacts>, SleepState]>([
    ['asleep, nothing asked: stays asleep', {}, asleep],
    ['asleep, a request asks to end this sleep: wakes', { wakeRequested: SINCE }, waking],
    [
      'asleep, a request of an earlier sleep: stays asleep (no clocks compared)',
      { wakeRequested: '2025-12-31T00:00:00.000Z' },
      asleep,
    ],
    ['asleep, due work has come: wakes', { state: { ...asleep, wakeAt: SINCE } }, waking],
    [
      'asleep, due work later: stays asleep',
      { state: { ...asleep, wakeAt: '2026-01-02T00:00:00.000Z' } },
      { ...asleep, wakeAt: '2026-01-02T00:00:00.000Z' },
    ],
    ['asleep, the policy no longer covers it (or a new revision): wakes', { eligible: false }, waking],
    ['waking, no pod ready yet: still waking (traffic stays with the activator)', { state: waking }, waking],
    ['waking, a pod ready: awake', { state: waking, readyReplicas: 1 }, { kind: 'awake' }],
    ['awake: only the idle sweep puts it to sleep', { state: { kind: 'awake' } }, { kind: 'awake' }],
  ])('%s', (_name, facts, expected) => {
    expect(nextSleep({ ...base, ...facts })).toEqual(expected);
  });
});

describe('the state on the Deployment', () => {
  it.each<[string, SleepState, number]>([
    ['awake', { kind: 'awake' }, 2],
    ['asleep with due work', { kind: 'asleep', since: SINCE, wakeAt: '2026-01-02T00:00:00.000Z' }, 0],
    ['asleep', asleep, 0],
    ['waking', waking, 2],
  ])('%s: recorded and read back the same; replicas as asked', (_name, state, replicas) => {
    expect(sleepStateOf(sleepAnnotations(state))).toEqual(state);
    expect(replicasIn(state, 2)).toBe(replicas);
  });
  it('a waking min_scale 0 deployment asks for one replica', () => {
    expect(replicasIn(waking, 0)).toBe(1);
  });
});

describe('the sleeping Service and the activator EndpointSlice', () => {
  const target = { namespace: 'agents', name: 'ag-x', deploymentId: 'x', tenantId: 'team-a' };
  it('the Service keeps its name and port, drops its selector and says which sleep and host it serves', () => {
    const awake = makeService(target);
    const sleeping = makeSleepingService(awake, SINCE, 'x.agents.example.com');
    expect(sleeping.metadata?.name).toBe('ag-x');
    expect(sleeping.spec?.selector).toBeUndefined();
    expect(sleeping.spec?.ports).toEqual(awake.spec?.ports);
    expect(sleeping.metadata?.annotations).toEqual({
      'agentplane.dev/sleeping-since': SINCE,
      'agentplane.dev/host': 'x.agents.example.com',
    });
  });
  it("the slice names the Service, is not the EndpointSlice controller's and lists the activator pods", () => {
    const slice = makeActivatorSlice(target, 'ag-x', {
      addresses: ['10.1.0.9', '10.1.0.8'],
      port: 8080,
      addressType: 'IPv4',
    });
    expect(slice.metadata?.labels).toMatchObject({
      'kubernetes.io/service-name': 'ag-x',
      'endpointslice.kubernetes.io/managed-by': 'agentplane-operator',
    });
    expect(slice.endpoints?.map((e) => e.addresses[0])).toEqual(['10.1.0.8', '10.1.0.9']);
    expect(slice.ports).toEqual([{ name: 'http', port: 8080, protocol: 'TCP' }]);
    // What readyEndpoints makes of it (the activator reads the agent's slices the same way).
    expect(readyEndpoints([slice])).toEqual({ addresses: ['10.1.0.8', '10.1.0.9'], port: 8080, addressType: 'IPv4' });
  });
  it('readyEndpoints skips endpoints not ready or terminating, and slices without any', () => {
    const slices = [
      { addressType: 'IPv4', endpoints: [], ports: [{ name: 'http', port: 8000 }] },
      {
        addressType: 'IPv4',
        endpoints: [
          { addresses: ['10.0.0.1'], conditions: { ready: false } },
          { addresses: ['10.0.0.2'], conditions: { ready: true, terminating: true } },
          { addresses: ['10.0.0.3'], conditions: { ready: true } },
        ],
        ports: [{ name: 'http', port: 8000 }],
      },
    ];
    expect(readyEndpoints(slices)).toEqual({ addresses: ['10.0.0.3'], port: 8000, addressType: 'IPv4' });
    expect(readyEndpoints([slices[0]!])).toBeUndefined();
  });
});

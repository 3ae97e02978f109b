// The idle policy's decisions, as tables: which deployments may sleep by default, when an idle server may go to
// sleep, and when a stopped one must wake for the work its store holds.
import { describe, expect, it } from 'vitest';
import { idleVerdict, wakeAt, type IdleFacts } from '../../../src/operator/runtimes/idle-policy.ts';
import { DEV_IDLE_TIMEOUT_MINUTES, idleTimeoutMinutesOf } from '../../../src/resources/index.ts';

describe('idleTimeoutMinutesOf', () => {
  it.each([
    ['dev, nothing said: sleeps by default', { deploymentType: 'dev' }, DEV_IDLE_TIMEOUT_MINUTES],
    ['no type (dev is the default type)', {}, DEV_IDLE_TIMEOUT_MINUTES],
    ['prod, nothing said: never', { deploymentType: 'prod' }, 0],
    ['prod, asked for', { deploymentType: 'prod', resourceSpec: { idleTimeoutMinutes: 30 } }, 30],
    ['dev, turned off', { deploymentType: 'dev', resourceSpec: { idleTimeoutMinutes: 0 } }, 0],
    ['dev keeping a replica up (min_scale 1): never', { deploymentType: 'dev', resourceSpec: { minScale: 1 } }, 0],
    ['dev, min_scale 0: by type', { deploymentType: 'dev', resourceSpec: { minScale: 0 } }, DEV_IDLE_TIMEOUT_MINUTES],
  ] as const)('%s', (_name, config, minutes) => {
    expect(idleTimeoutMinutesOf(config)).toBe(minutes);
  });
});

describe('idleVerdict', () => {
  const base: IdleFacts = {
    now: 100_000,
    timeoutMs: 10_000,
    lastActiveMs: 50_000,
    open: 0,
    work: { activeRuns: 0, nextDueMs: null },
  };
  it.each([
    ['idle for longer than the window, nothing waiting', {}, { sleep: true }],
    ['policy off', { timeoutMs: 0 }, { sleep: false, why: 'never' }],
    ['a stream or WebSocket open, however old', { open: 1, lastActiveMs: 0 }, { sleep: false, why: 'traffic' }],
    ['a request within the window', { lastActiveMs: 95_000 }, { sleep: false, why: 'recent' }],
    ['exactly one window ago', { lastActiveMs: 90_000 }, { sleep: true }],
    ['the store could not be read', { work: undefined }, { sleep: false, why: 'unknown' }],
    ['a run executing or queued', { work: { activeRuns: 1, nextDueMs: null } }, { sleep: false, why: 'runs' }],
    ['a cron due within the window', { work: { activeRuns: 0, nextDueMs: 105_000 } }, { sleep: false, why: 'due' }],
    ['a cron overdue', { work: { activeRuns: 0, nextDueMs: 1_000 } }, { sleep: false, why: 'due' }],
    ['a cron due after the window', { work: { activeRuns: 0, nextDueMs: 110_000 } }, { sleep: true }],
  ] as const)('%s', (_name, facts, verdict) => {
    expect(idleVerdict({ ...base, ...facts })).toEqual(verdict);
  });
});

describe('wakeAt (read once the server has stopped)', () => {
  it.each([
    ['nothing waiting: only a request wakes it', { activeRuns: 0, nextDueMs: null }, undefined],
    ['a run came in during the stop: at once', { activeRuns: 2, nextDueMs: 500_000 }, 1_000],
    ['the store could not be read: at once', undefined, 1_000],
    ['a cron tick or a scheduled run: then', { activeRuns: 0, nextDueMs: 60_000 }, 60_000],
    ['already due: at once', { activeRuns: 0, nextDueMs: 10 }, 1_000],
  ] as const)('%s', (_name, work, at) => {
    expect(wakeAt(1_000, work)).toBe(at);
  });
});

// The local runtime's restart backoff (pure): doubling delays with a cap, a fresh count after a healthy stretch,
// crash loops named as such, and an unreachable database never called a crash loop.
import { describe, expect, it } from 'vitest';
import {
  afterFailure,
  backoffDelay,
  DEFAULT_RESTART_POLICY,
  type RestartPolicy,
} from '../../../../src/operator/runtimes/local/restart-policy.ts';
import { isTransientStart } from '../../../../src/operator/runtimes/local/start-failures.ts';
import { RestartSupervisor } from '../../../../src/operator/runtimes/local/supervisor.ts';

const policy: RestartPolicy = {
  initialMs: 1_000,
  maxMs: 30_000,
  resetAfterMs: 60_000,
  crashLoopAfter: 3,
  transientMaxMs: 5_000,
};

describe('backoffDelay', () => {
  it.each([
    [1, 1_000],
    [2, 2_000],
    [3, 4_000],
    [4, 8_000],
    [5, 16_000],
    [6, 30_000], // 32 s capped
    [7, 30_000],
    [1_000, 30_000], // a huge count stays finite and capped
    [0, 1_000], // nonsense counts get the first delay
    [-3, 1_000],
    [Number.NaN, 1_000],
  ])('failure %d waits %d ms', (failures, delay) => {
    expect(backoffDelay(failures, policy)).toBe(delay);
  });

  it('has a default that starts at a second and stays within a minute', () => {
    expect(backoffDelay(1)).toBe(DEFAULT_RESTART_POLICY.initialMs);
    expect(backoffDelay(50)).toBe(DEFAULT_RESTART_POLICY.maxMs);
    expect(DEFAULT_RESTART_POLICY.maxMs).toBeLessThanOrEqual(60_000);
  });
});

describe('afterFailure', () => {
  it.each([
    // [case, previous failures, healthy ms before it ended, transient, failures, delay, reason]
    ['first crash of a server that served briefly', 0, 5_000, false, 1, 1_000, 'Restarting'],
    ['second crash in a row', 1, 0, false, 2, 2_000, 'Restarting'],
    ['third crash in a row is a crash loop', 2, 0, false, 3, 4_000, 'CrashLoopBackOff'],
    ['a long crash loop keeps the capped delay', 9, 0, false, 10, 30_000, 'CrashLoopBackOff'],
    ['healthy for the reset period: counted afresh', 9, 60_000, false, 1, 1_000, 'Restarting'],
    ['healthy just short of it: still counting', 9, 59_999, false, 10, 30_000, 'CrashLoopBackOff'],
    ['database unreachable: backoff, never a crash loop, capped lower', 5, 0, true, 6, 5_000, 'DatabaseUnavailable'],
    ['database unreachable, below that cap', 1, 0, true, 2, 2_000, 'DatabaseUnavailable'],
    ['database unreachable at the first try', 0, 0, true, 1, 1_000, 'DatabaseUnavailable'],
    ['a negative count is treated as none', -2, 0, false, 1, 1_000, 'Restarting'],
  ] as const)('%s', (_name, previous, healthyMs, transient, failures, delayMs, reason) => {
    expect(afterFailure(previous, healthyMs, transient, policy)).toEqual({ failures, delayMs, reason });
  });

  it('without a lower cap, waits for the database like for a crash', () => {
    const { transientMaxMs: _cap, ...plain } = policy;
    expect(afterFailure(5, 0, true, plain).delayMs).toBe(30_000);
  });
});

describe('isTransientStart', () => {
  const coded = (message: string, code: string) => Object.assign(new Error(message), { code });
  it.each([
    [
      'PostgreSQL refusing (a start that cannot make its database)',
      coded('connect ECONNREFUSED 127.0.0.1:5432', 'ECONNREFUSED'),
      true,
    ],
    ['PostgreSQL shutting down', coded('terminating connection due to administrator command', '57P01'), true],
    ['PostgreSQL starting up', coded('the database system is starting up', '57P03'), true],
    ['the port taken between pick and listen', coded('listen EADDRINUSE', 'EADDRINUSE'), true],
    // What a server printed is the tenant's to choose: never a reason to retry it forever.
    [
      'a server that says it gave up waiting for its database',
      '{"level":"error","msg":"connect ECONNREFUSED 127.0.0.1:5432"}',
      false,
    ],
    ['a server that says its port was taken', 'Error: listen EADDRINUSE: address already in use 127.0.0.1:4000', false],
    [
      'a server that says its predecessor has not yet ended',
      'Error: data folder /d/runtime/deployments/x/data is in use by agentplane agent-server (pid 1 in its sandbox, started 2026-12-01T10:00:00.000Z): stop that process or pass another --data-dir',
      false,
    ],
    ['a missing graph module', 'Error: Cannot find module ./src/missing.ts', false],
    ['a bad secret', new Error('secret FOO holds a NUL byte'), false],
    ['a wrong password', coded('password authentication failed for user "x"', '28P01'), false],
    ['nothing said', '', false],
  ] as const)('%s', (_name, failure, transient) => {
    expect(isTransientStart(failure)).toBe(transient);
  });
});

describe('RestartSupervisor', () => {
  it('is no longer waiting when its timer asks for the restart, even if the clock has not reached the moment', async () => {
    // A clock that lags the timer (Date.now() can read a millisecond short of `at` when a timer fires).
    const t0 = 1_000_000;
    let ready: () => void;
    const fired = new Promise<void>((r) => (ready = r));
    const seen: boolean[] = [];
    const sup: RestartSupervisor<string> = new RestartSupervisor<string>(
      (key) => {
        seen.push(sup.waiting(key));
        ready();
      },
      { ...policy, initialMs: 20 },
      () => t0,
    );
    const info = sup.failed('rev', 'rev', 'killed (SIGKILL)', false);
    expect(info.at).toBe(t0 + 20);
    expect(sup.waiting('rev')).toBe(true);
    await fired;
    expect(seen).toEqual([false]);
    expect(sup.pending('rev')).toMatchObject({ failures: 1, message: 'killed (SIGKILL)' });
  });
});

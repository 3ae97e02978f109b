import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createLogger } from '../../../src/lib/logger.ts';
import { LeaderElector } from '../../../src/operator/leader/lease.ts';
import { validateK8s } from '../../support/kubernetes/k8s-schema.ts';
import { startCluster, until, type TestCluster } from '../../support/kubernetes/cluster.ts';

const logger = createLogger({ level: 'silent', name: 'test' });
// Short enough to keep the suite quick, long enough that a loaded test machine's event-loop stalls (a second or
// more) do not cost a healthy leader its Lease and turn one hand-over into two.
const TIMING = { leaseDurationMs: 4_000, renewDeadlineMs: 2_500, retryPeriodMs: 200 };
let cluster: TestCluster;

beforeAll(async () => {
  cluster = await startCluster();
});
afterAll(async () => {
  await cluster?.close();
});

/** Two candidates on one Lease, recording any moment both believe they lead. */
function candidates(lease: string) {
  const leaders = new Set<string>();
  let overlaps = 0;
  let transitions = 0;
  const make = (identity: string) => {
    const e = new LeaderElector({
      kubeConfig: cluster.kubeConfig,
      namespace: 'agents',
      name: lease,
      identity,
      ...TIMING,
      logger,
    });
    e.run({
      onStartedLeading: () => {
        leaders.add(identity);
        transitions++;
        if (leaders.size > 1) overlaps++;
      },
      onStoppedLeading: () => {
        leaders.delete(identity);
      },
    });
    return e;
  };
  return {
    a: make('operator-a'),
    b: make('operator-b'),
    leaders,
    overlaps: () => overlaps,
    transitions: () => transitions,
  };
}

describe('Lease leader election', () => {
  it('elects exactly one of two replicas and hands over when the leader stops', async () => {
    const c = candidates('op-graceful');
    const first = await until('a leader', () => [...c.leaders][0]);
    // Let several renew rounds pass: the follower must keep losing.
    await new Promise((r) => setTimeout(r, 700));
    expect([...c.leaders]).toEqual([first]);
    expect(c.transitions()).toBe(1);
    const lease = cluster.api.peek('coordination.k8s.io', 'leases', 'agents', 'op-graceful')!;
    validateK8s(lease);
    expect(lease.spec.holderIdentity).toBe(first);
    expect(lease.spec.renewTime).toMatch(/^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{6}Z$/);

    const [leader, follower] = first === 'operator-a' ? [c.a, c.b] : [c.b, c.a];
    await leader.stop();
    await until('the follower to lead', () => follower.isLeader);
    expect(leader.isLeader).toBe(false);
    expect(c.overlaps()).toBe(0);
    expect(cluster.api.peek('coordination.k8s.io', 'leases', 'agents', 'op-graceful')!.spec.leaseTransitions).toBe(1);
    await follower.stop();
  });

  it('takes over from a crashed leader only after the lease expires, never both at once', async () => {
    const c = candidates('op-crash');
    const first = await until('a leader', () => [...c.leaders][0]);
    const [leader, follower] = first === 'operator-a' ? [c.a, c.b] : [c.b, c.a];
    const holderBefore = cluster.api.peek('coordination.k8s.io', 'leases', 'agents', 'op-crash')!.spec.holderIdentity;
    await leader.stop({ release: false }); // no release: the follower must wait out the lease
    expect(cluster.api.peek('coordination.k8s.io', 'leases', 'agents', 'op-crash')!.spec.holderIdentity).toBe(
      holderBefore,
    );
    expect(follower.isLeader).toBe(false);
    await until('the follower to lead', () => follower.isLeader);
    expect(c.overlaps()).toBe(0);
    expect(cluster.api.peek('coordination.k8s.io', 'leases', 'agents', 'op-crash')!.spec.holderIdentity).not.toBe(
      holderBefore,
    );
    await follower.stop();
  });

  it('keeps renewing while a slow onStartedLeading runs, so no other replica takes over meanwhile', async () => {
    const events: string[] = [];
    let finishStart: () => void = () => {};
    const started = new Promise<void>((r) => (finishStart = r));
    const make = (identity: string, onStart: () => Promise<void> | void) => {
      const e = new LeaderElector({
        kubeConfig: cluster.kubeConfig,
        namespace: 'agents',
        name: 'op-slow',
        identity,
        ...TIMING,
        logger,
      });
      e.run({
        onStartedLeading: () => (events.push(`${identity} started`), onStart()),
        onStoppedLeading: () => void events.push(`${identity} stopped`),
      });
      return e;
    };
    const a = make('slow-a', () => started);
    await until('slow-a to lead', () => a.isLeader);
    const b = make('slow-b', () => {});
    const renewTime = () =>
      cluster.api.peek('coordination.k8s.io', 'leases', 'agents', 'op-slow')!.spec.renewTime as string;
    const first = renewTime();
    // Longer than the lease: without renewals during the start, slow-b would take the Lease.
    await new Promise((r) => setTimeout(r, TIMING.leaseDurationMs + 1_000));
    expect(renewTime()).not.toBe(first);
    expect(a.isLeader).toBe(true);
    expect(b.isLeader).toBe(false);
    expect(events).toEqual(['slow-a started']);
    finishStart();
    await a.stop();
    await until('slow-b to lead', () => b.isLeader);
    expect(events).toEqual(['slow-a started', 'slow-a stopped', 'slow-b started']);
    await b.stop();
  });

  it('a leader whose renewal hangs steps down before another replica can acquire the Lease', async () => {
    const events: string[] = [];
    const make = (identity: string) => {
      const e = new LeaderElector({
        kubeConfig: cluster.kubeConfig,
        namespace: 'agents',
        name: 'op-hang',
        identity,
        ...TIMING,
        logger,
      });
      e.run({
        onStartedLeading: () => void events.push(`${identity} started`),
        onStoppedLeading: () => void events.push(`${identity} stopped`),
      });
      return e;
    };
    const a = make('hang-a');
    await until('hang-a to lead', () => a.isLeader);
    const b = make('hang-b');
    // Every Lease write from hang-a now goes unanswered (a hung API server connection for that replica only).
    const release = cluster.api.hang(
      (r) =>
        r.method === 'PUT' &&
        r.path.endsWith('/leases/op-hang') &&
        (r.body as { spec?: { holderIdentity?: string } })?.spec?.holderIdentity === 'hang-a',
    );
    try {
      await until('hang-b to lead', () => b.isLeader);
      expect(events).toEqual(['hang-a started', 'hang-a stopped', 'hang-b started']);
      expect(a.isLeader).toBe(false);
      expect(cluster.api.peek('coordination.k8s.io', 'leases', 'agents', 'op-hang')!.spec.holderIdentity).toBe(
        'hang-b',
      );
    } finally {
      release();
      await a.stop();
      await b.stop();
    }
  });

  it('aborts a Lease request that gets no answer and tries again', async () => {
    const release = cluster.api.hang((r) => r.path.endsWith('/leases/op-abort'));
    const e = new LeaderElector({
      kubeConfig: cluster.kubeConfig,
      namespace: 'agents',
      name: 'op-abort',
      identity: 'abort-a',
      ...TIMING,
      requestTimeoutMs: 150,
      logger,
    });
    e.run({ onStartedLeading: () => {}, onStoppedLeading: () => {} });
    await until('a held request', () => cluster.api.requests.some((r) => r.endsWith('/leases/op-abort')));
    release();
    // The first request is never answered: only an aborted one lets the elector go on.
    await until('abort-a to lead', () => e.isLeader);
    await e.stop();
  });

  it('refuses timings where a leader could outlive its Lease', () => {
    const base = { kubeConfig: cluster.kubeConfig, namespace: 'agents', name: 'x', identity: 'x', logger };
    expect(() => new LeaderElector({ ...base, leaseDurationMs: 1_000, renewDeadlineMs: 1_000 })).toThrow(
      /renewDeadline must be shorter than leaseDuration/,
    );
    expect(
      () => new LeaderElector({ ...base, leaseDurationMs: 1_000, renewDeadlineMs: 600, requestTimeoutMs: 600 }),
    ).toThrow(/requestTimeout must be shorter/);
  });
});

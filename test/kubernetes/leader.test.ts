import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createLogger } from '../../src/lib/logger.ts';
import { LeaderElector } from '../../src/operator/leader/lease.ts';
import { validateK8s } from './helpers/k8s-schema.ts';
import { startCluster, until, type TestCluster } from './helpers/cluster.ts';

const logger = createLogger({ level: 'silent', name: 'test' });
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
      leaseDurationMs: 1_000,
      renewDeadlineMs: 600,
      retryPeriodMs: 100,
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
  return { a: make('operator-a'), b: make('operator-b'), leaders, overlaps: () => overlaps, transitions: () => transitions };
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
    expect(cluster.api.peek('coordination.k8s.io', 'leases', 'agents', 'op-crash')!.spec.holderIdentity).toBe(holderBefore);
    expect(follower.isLeader).toBe(false);
    await until('the follower to lead', () => follower.isLeader);
    expect(c.overlaps()).toBe(0);
    expect(cluster.api.peek('coordination.k8s.io', 'leases', 'agents', 'op-crash')!.spec.holderIdentity).not.toBe(holderBefore);
    await follower.stop();
  });
});

// The local runtime's build slots: never more than the slots, never more than a workspace's share, freed slots
// handed out in turn across workspaces rather than first come, first served.
import { describe, expect, it } from 'vitest';
import { defaultPerWorkspace, FairBuildQueue } from '../../../../src/operator/runtimes/local/build-queue.ts';

/** Queues builds in the given order; returns the order they started in as slots are freed one by one. */
async function startOrder(queue: FairBuildQueue, builds: string[]): Promise<string[]> {
  const started: string[] = [];
  const releases: (() => void)[] = [];
  for (const b of builds) {
    void queue.acquire(b.split(':')[0]!).then((release) => {
      started.push(b);
      releases.push(release);
    });
  }
  await new Promise((r) => setImmediate(r));
  for (let i = 0; i < builds.length; i++) {
    releases[i]!();
    await new Promise((r) => setImmediate(r));
  }
  return started;
}

describe('FairBuildQueue', () => {
  it.each([
    [1, 1],
    [2, 1],
    [3, 1],
    [4, 2],
    [8, 4],
  ])('with %i slots a workspace may use %i by default', (slots, share) => {
    expect(defaultPerWorkspace(slots)).toBe(share);
  });

  it('takes turns across workspaces: one that queued first and most does not go first every time', async () => {
    const order = await startOrder(new FairBuildQueue({ slots: 1 }), ['a:1', 'a:2', 'a:3', 'b:1', 'c:1', 'b:2']);
    expect(order).toEqual(['a:1', 'b:1', 'c:1', 'a:2', 'b:2', 'a:3']);
  });

  it('keeps a workspace to its share while another waits, and never runs more than the slots', async () => {
    const queue = new FairBuildQueue({ slots: 2 });
    const started: string[] = [];
    for (const b of ['a:1', 'a:2', 'a:3', 'b:1']) void queue.acquire(b.split(':')[0]!).then(() => started.push(b));
    await new Promise((r) => setImmediate(r));
    expect(started).toEqual(['a:1', 'b:1']);
    expect(queue.snapshot()).toEqual({ running: { a: 1, b: 1 }, waiting: { a: 2 } });

    const wide = new FairBuildQueue({ slots: 3, perWorkspace: 3 });
    const ran: string[] = [];
    for (const b of ['a:1', 'a:2', 'a:3', 'a:4']) void wide.acquire('a').then(() => ran.push(b));
    await new Promise((r) => setImmediate(r));
    expect(ran).toEqual(['a:1', 'a:2', 'a:3']);
  });

  it('frees a slot once however often its release is called', async () => {
    const queue = new FairBuildQueue({ slots: 1 });
    const release = await queue.acquire('a');
    let second = false;
    let third = false;
    void queue.acquire('b').then(() => (second = true));
    void queue.acquire('c').then(() => (third = true));
    release();
    release();
    await new Promise((r) => setImmediate(r));
    expect([second, third]).toEqual([true, false]);
  });
});

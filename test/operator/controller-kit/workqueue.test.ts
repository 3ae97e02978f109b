import { describe, expect, it } from 'vitest';
import { FakeClock } from '../../../src/operator/controller-kit/clock.ts';
import { WorkQueue } from '../../../src/operator/controller-kit/workqueue.ts';
import { Controller } from '../../../src/operator/controller-kit/controller.ts';
import { silentLogger } from '../../../src/lib/logger.ts';

function setup() {
  const clock = new FakeClock();
  const queue = new WorkQueue(clock, { baseMs: 100, maxMs: 1000 });
  return { clock, queue };
}

describe('WorkQueue', () => {
  it('coalesces a key that is already waiting and keeps FIFO order', async () => {
    const { queue } = setup();
    queue.add('ns/a');
    queue.add('ns/b');
    queue.add('ns/a');
    expect(queue.length).toBe(2);
    expect(await queue.get()).toBe('ns/a');
    expect(await queue.get()).toBe('ns/b');
    expect(queue.length).toBe(0);
  });

  it('never hands a key being processed to a second worker; re-adds run once after done()', async () => {
    const { queue } = setup();
    queue.add('ns/a');
    const first = await queue.get();
    expect(first).toBe('ns/a');
    queue.add('ns/a');
    queue.add('ns/a');
    expect(queue.length).toBe(0);
    let second: string | undefined = 'none yet';
    const pending = queue.get().then((k) => (second = k));
    await Promise.resolve();
    expect(second).toBe('none yet');
    queue.done('ns/a');
    await pending;
    expect(second).toBe('ns/a');
    queue.done('ns/a');
    expect(queue.length).toBe(0);
  });

  it('a key done without being re-added is not processed again', async () => {
    const { queue } = setup();
    queue.add('ns/a');
    await queue.get();
    queue.done('ns/a');
    expect(queue.length).toBe(0);
  });

  it('hands a newly added key straight to a waiting worker', async () => {
    const { queue } = setup();
    const got = queue.get();
    queue.add('ns/x');
    expect(await got).toBe('ns/x');
    queue.add('ns/x'); // while processing: waits for done()
    expect(queue.length).toBe(0);
    queue.done('ns/x');
    expect(queue.length).toBe(1);
  });

  it('retries with exponential backoff, capped, and forget() resets it', () => {
    const { clock, queue } = setup();
    expect([1, 2, 3, 4, 5].map((n) => queue.backoffFor(n))).toEqual([100, 200, 400, 800, 1000]);
    queue.addRateLimited('ns/a');
    clock.advance(99);
    expect(queue.length).toBe(0);
    clock.advance(1);
    expect(queue.length).toBe(1);
    queue.addRateLimited('ns/b');
    queue.addRateLimited('ns/b'); // second failure is 200 ms but the earlier 100 ms schedule wins
    expect(queue.numRequeues('ns/b')).toBe(2);
    clock.advance(100);
    expect(queue.length).toBe(2);
    queue.forget('ns/b');
    expect(queue.numRequeues('ns/b')).toBe(0);
  });

  it('addAfter keeps the earliest schedule and does not add twice', () => {
    const { clock, queue } = setup();
    queue.addAfter('ns/a', 500);
    queue.addAfter('ns/a', 50);
    queue.addAfter('ns/a', 300);
    expect(clock.pending).toBe(1);
    clock.advance(50);
    expect(queue.length).toBe(1);
    clock.advance(1000);
    expect(queue.length).toBe(1);
  });

  it('shutdown releases waiting workers, drops timers and ignores later adds', async () => {
    const { clock, queue } = setup();
    const waiting = queue.get();
    queue.addAfter('ns/a', 10);
    queue.shutdown();
    expect(await waiting).toBeUndefined();
    expect(clock.pending).toBe(0);
    queue.add('ns/b');
    expect(queue.length).toBe(0);
    expect(await queue.get()).toBeUndefined();
  });
});

describe('Controller', () => {
  it('requeues failures with backoff and successes with requeueAfter', async () => {
    const { clock, queue } = setup();
    const calls: string[] = [];
    let fail = true;
    const controller = new Controller({
      name: 'test',
      queue,
      logger: silentLogger(),
      reconcile: async (key) => {
        calls.push(key);
        if (fail) throw new Error('boom');
        return { requeueAfter: 5000 };
      },
    });
    queue.add('ns/a');
    await controller.processNext();
    expect(queue.numRequeues('ns/a')).toBe(1);
    expect(queue.length).toBe(0);
    clock.advance(100);
    fail = false;
    await controller.processNext();
    expect(queue.numRequeues('ns/a')).toBe(0);
    expect(queue.length).toBe(0);
    clock.advance(4999);
    expect(queue.length).toBe(0);
    clock.advance(1);
    expect(queue.length).toBe(1);
    expect(calls).toEqual(['ns/a', 'ns/a']);
  });

  it('with several workers, one key is never reconciled twice at once and a change during reconcile is seen after', async () => {
    const { queue } = setup();
    const active = new Set<string>();
    let overlaps = 0;
    const runs: string[] = [];
    const gates: (() => void)[] = [];
    const controller = new Controller({
      name: 'test',
      queue,
      workers: 3,
      logger: silentLogger(),
      reconcile: async (key) => {
        if (active.has(key)) overlaps++;
        active.add(key);
        runs.push(key);
        await new Promise<void>((r) => gates.push(r));
        active.delete(key);
      },
    });
    controller.start();
    queue.add('ns/a');
    queue.add('ns/b');
    await new Promise((r) => setImmediate(r));
    queue.add('ns/a'); // arrives while ns/a is being reconciled
    await new Promise((r) => setImmediate(r));
    expect(runs.sort()).toEqual(['ns/a', 'ns/b']);
    for (const g of gates.splice(0)) g();
    await new Promise((r) => setImmediate(r));
    expect(runs.filter((k) => k === 'ns/a')).toHaveLength(2);
    for (const g of gates.splice(0)) g();
    await new Promise((r) => setImmediate(r));
    expect(overlaps).toBe(0);
    const stopped = controller.stop();
    await stopped;
    expect(runs).toHaveLength(3);
  });
});

// A run claimed on a thread without checkpoints (as it is created, from the queue, or as another run ends) starts
// from none without reading (RunRecord.no_checkpoint, NO_CHECKPOINT_KEY): the claiming statement looks. Tried where
// skipping would lose state: a thread with checkpoints from an earlier run, a thread copied from another
// (checkpoints before any run of its own), a run queued behind another, and graphs on executor threads.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { PostgresSaver } from '@langchain/langgraph-checkpoint-postgres';
import { startHarness, type Harness } from '../../helpers/harness.ts';

const reads = { latest: 0 };
const proto = PostgresSaver.prototype as unknown as Record<string, (...a: unknown[]) => unknown>;
const getTuple = proto.getTuple!;
// The package's read, under our saver's override: what reaches the database (latest: no checkpoint id).
proto.getTuple = function (this: unknown, ...a: unknown[]) {
  const c = (a[0] as { configurable?: { checkpoint_id?: string; checkpoint_ns?: string } }).configurable;
  if (!c?.checkpoint_id && !c?.checkpoint_ns) reads.latest++;
  return getTuple.apply(this, a);
};

describe.each([0, 1])('first run on a thread without checkpoints (postgres, %i executor threads)', (threads) => {
  let h: Harness;
  beforeAll(async () => {
    h = await startHarness({ store: 'postgres', executorThreads: threads });
  });
  afterAll(async () => h?.close());

  const runWait = async (t: string) =>
    (await h.call('POST', `/threads/${t}/runs/wait`, { assistant_id: 'counter', input: {} })).body;
  const createJoin = async (t: string) => {
    const r = await h.call('POST', `/threads/${t}/runs`, { assistant_id: 'counter', input: {} });
    expect(r.status).toBe(200);
    return (await h.call('GET', `/threads/${t}/runs/${r.body.run_id}/join`)).body;
  };

  it('skips the read on a new thread, reads on a thread with checkpoints, and the state adds up', async () => {
    const t = (await h.call('POST', '/threads', {})).body.thread_id as string;
    const before = reads.latest;
    expect(await createJoin(t)).toEqual({ count: 11, steps: ['first', 'second'] });
    if (!threads) expect(reads.latest - before).toBe(0);
    // Second turn: the thread has checkpoints, the run must start from them.
    const mid = reads.latest;
    expect(await createJoin(t)).toEqual({ count: 22, steps: ['first', 'second', 'first', 'second'] });
    if (!threads) expect(reads.latest - mid).toBe(1);
  });

  it('a copied thread starts from the copied checkpoints', async () => {
    const t = (await h.call('POST', '/threads', {})).body.thread_id as string;
    await runWait(t);
    const copy = await h.call('POST', `/threads/${t}/copy`);
    expect(copy.status).toBe(200);
    expect(await createJoin(copy.body.thread_id)).toEqual({
      count: 22,
      steps: ['first', 'second', 'first', 'second'],
    });
  });

  it('a run queued behind another on its thread starts from the first one`s checkpoints', async () => {
    const t = (await h.call('POST', '/threads', {})).body.thread_id as string;
    const a = await h.call('POST', `/threads/${t}/runs`, { assistant_id: 'counter', input: {} });
    const b = await h.call('POST', `/threads/${t}/runs`, {
      assistant_id: 'counter',
      input: {},
      multitask_strategy: 'enqueue',
    });
    expect([a.status, b.status]).toEqual([200, 200]);
    await h.call('GET', `/threads/${t}/runs/${a.body.run_id}/join`);
    expect((await h.call('GET', `/threads/${t}/runs/${b.body.run_id}/join`)).body).toEqual({
      count: 22,
      steps: ['first', 'second', 'first', 'second'],
    });
  });
});

describe('runs claimed from the queue (postgres, one slot)', () => {
  let h: Harness;
  beforeAll(async () => {
    h = await startHarness({ store: 'postgres', concurrency: 1 });
  });
  afterAll(async () => h?.close());

  it('skip the read on new threads, read it on threads with checkpoints', async () => {
    const old = (await h.call('POST', '/threads', {})).body.thread_id as string;
    await h.call('POST', `/threads/${old}/runs/wait`, { assistant_id: 'counter', input: {} });
    const fresh = await Promise.all([0, 1, 2].map(async () => (await h.call('POST', '/threads', {})).body.thread_id));
    const before = reads.latest;
    // One slot: the first is claimed as it is created, the others wait and are claimed as runs finish.
    const created = [];
    for (const t of [...fresh, old]) {
      const body =
        t === old
          ? { assistant_id: 'counter', input: {} }
          : { assistant_id: 'slow', input: { delay_ms: 50, mark: 'q' } };
      const r = await h.call('POST', `/threads/${t}/runs`, body);
      expect(r.status).toBe(200);
      created.push({ t, run: r.body.run_id as string });
    }
    const out = [];
    for (const { t, run } of created) out.push((await h.call('GET', `/threads/${t}/runs/${run}/join`)).body);
    for (const o of out.slice(0, 3)) expect(o.marks).toEqual(['start:q', 'done:q']);
    // The old thread's run started from its checkpoint: the counter went on from its first run's values.
    expect(out[3]).toEqual({ count: 22, steps: ['first', 'second', 'first', 'second'] });
    expect(reads.latest - before).toBe(1);
  });
});

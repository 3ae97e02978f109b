// GET state on Postgres reads the thread, its latest checkpoint and that one's parent (whose tasks are the state's
// metadata.writes) in one statement (ThreadStore.getReadingAhead, FewerTripsPostgresSaver.keepAhead): the state is
// the same as separate reads give, a fork (the latest's parent is not the checkpoint before it) still reads the
// right parent, an empty thread reads nothing more, a missing thread is the platform's 404, and a run's own reads
// never take a tuple read ahead for a state request. Statements are counted where they leave for the database.
import pg from 'pg';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { PostgresSaver } from '@langchain/langgraph-checkpoint-postgres';
import { startHarness, type Harness } from './helpers/harness.ts';

describe('GET state reads ahead (postgres)', () => {
  let h: Harness;
  const calls = { list: 0, getTuple: 0 };
  /** Statements sent that read or write threads or checkpoints (others, e.g. sweeps of stream events, are left out). */
  const sent: string[] = [];
  const clientQuery = pg.Client.prototype.query;
  beforeAll(async () => {
    const client = pg.Client.prototype as unknown as { query: (...a: unknown[]) => unknown };
    client.query = function (this: unknown, ...a: unknown[]) {
      const q = a[0] as string | { text?: string; name?: string };
      const text = typeof q === 'string' ? q : (q?.text ?? '');
      if (/\bthreads\b|checkpoint/.test(text)) sent.push(typeof q === 'string' ? text : (q.name ?? text));
      return (clientQuery as (...x: unknown[]) => unknown).apply(this, a);
    };
    h = await startHarness({ store: 'postgres' });
    // The package's own reads, under our saver's overrides: what reaches the database.
    const proto = PostgresSaver.prototype as unknown as Record<string, (...a: unknown[]) => unknown>;
    const list = proto.list!;
    const getTuple = proto.getTuple!;
    proto.list = function (this: unknown, ...a: unknown[]) {
      calls.list++;
      return list.apply(this, a);
    };
    proto.getTuple = function (this: unknown, ...a: unknown[]) {
      calls.getTuple++;
      return getTuple.apply(this, a);
    };
  });
  afterAll(async () => {
    (pg.Client.prototype as unknown as { query: unknown }).query = clientQuery;
    await h?.close();
  });

  const counted = async <T>(f: () => Promise<T>) => {
    const before = { ...calls };
    const from = sent.length;
    const out = await f();
    return {
      out,
      list: calls.list - before.list,
      getTuple: calls.getTuple - before.getTuple,
      statements: sent.slice(from),
    };
  };

  it('one statement for the thread, the latest state and its parent, the same state as reading each', async () => {
    const t = (await h.call('POST', '/threads', {})).body.thread_id as string;
    expect((await h.call('POST', `/threads/${t}/runs/wait`, { assistant_id: 'counter', input: {} })).status).toBe(200);
    const latest = await counted(() => h.call('GET', `/threads/${t}/state`));
    expect(latest.out.status).toBe(200);
    expect(latest).toMatchObject({ list: 0, getTuple: 0 });
    expect(latest.statements).toEqual(['ap_thread_get_ahead_agentplane']);
    const state = latest.out.body;
    expect(state.values).toEqual({ count: 11, steps: ['first', 'second'] });
    expect(state.metadata.writes).toEqual({ second: { count: 10, steps: ['second'] } });
    // The same checkpoint by id: read without reading ahead (the thread, getTuple for it and for its parent).
    const byId = await counted(() => h.call('GET', `/threads/${t}/state/${state.checkpoint_id}`));
    expect(byId).toMatchObject({ list: 0, getTuple: 2 });
    expect(byId.statements).toHaveLength(3);
    expect(byId.out.body).toEqual(state);
    // The saver's own read ahead (no thread in the statement) gives the same state too.
    const saverAhead = await counted(async () => {
      const get = h.storage.threads.getReadingAhead;
      delete (h.storage.threads as { getReadingAhead?: unknown }).getReadingAhead;
      try {
        return await h.call('GET', `/threads/${t}/state`);
      } finally {
        (h.storage.threads as { getReadingAhead?: unknown }).getReadingAhead = get;
      }
    });
    expect(saverAhead).toMatchObject({ list: 1, getTuple: 0 });
    expect(saverAhead.statements).toHaveLength(2);
    expect(saverAhead.out.body).toEqual(state);
  });

  it('a missing thread: the platform 404, and nothing is kept for it', async () => {
    const missing = await counted(() => h.call('GET', '/threads/00000000-0000-4000-8000-000000000000/state'));
    expect(missing.out.status).toBe(404);
    expect(missing.out.body.detail ?? missing.out.body.message).toMatch(/Thread not found: 00000000-0000-4000/);
    expect(missing.statements).toEqual(['ap_thread_get_ahead_agentplane']);
    const ahead = (h.storage.checkpointer as unknown as { ahead: Map<string, unknown> }).ahead;
    expect(ahead.size).toBe(0);
  });

  it('a fork: the parent is read on its own, and the state is right', async () => {
    const t = (await h.call('POST', '/threads', {})).body.thread_id as string;
    await h.call('POST', `/threads/${t}/runs/wait`, { assistant_id: 'counter', input: {} });
    const history = (await h.call('POST', `/threads/${t}/history`, { limit: 10 })).body as Array<{
      checkpoint_id: string;
      values: { count?: number };
    }>;
    const afterFirst = history.find((s) => s.values.count === 1)!;
    // A new checkpoint whose parent is the one after `first`, not the newest.
    const forked = await h.call('POST', `/threads/${t}/state`, {
      values: { count: 100 },
      checkpoint_id: afterFirst.checkpoint_id,
    });
    expect(forked.status).toBe(200);
    const latest = await counted(() => h.call('GET', `/threads/${t}/state`));
    expect(latest).toMatchObject({ list: 0, getTuple: 1 });
    expect(latest.statements).toHaveLength(2);
    expect(latest.out.body.parent_checkpoint_id).toBe(afterFirst.checkpoint_id);
    expect(latest.out.body.checkpoint_id).toBe(forked.body.checkpoint.checkpoint_id);
    const byId = await h.call('GET', `/threads/${t}/state/${latest.out.body.checkpoint_id}`);
    expect(byId.body).toEqual(latest.out.body);
  });

  it('a thread without checkpoints: the empty state; a run reads its latest checkpoint itself', async () => {
    const t = (await h.call('POST', '/threads', {})).body.thread_id as string;
    const empty = await counted(() => h.call('GET', `/threads/${t}/state`));
    expect(empty).toMatchObject({ list: 0, getTuple: 0 });
    expect(empty.statements).toEqual(['ap_thread_get_ahead_agentplane']);
    expect(empty.out.body).toMatchObject({ values: {}, next: [], checkpoint: null });
    // Two turns: the second run starts from the first's last checkpoint (read by the run, not from a read-ahead).
    await h.call('POST', `/threads/${t}/runs/wait`, { assistant_id: 'counter', input: {} });
    await h.call('GET', `/threads/${t}/state`);
    const second = await h.call('POST', `/threads/${t}/runs/wait`, { assistant_id: 'counter', input: {} });
    expect(second.body).toEqual({ count: 22, steps: ['first', 'second', 'first', 'second'] });
    const ahead = (h.storage.checkpointer as unknown as { ahead: Map<string, unknown> }).ahead;
    expect(ahead.size).toBe(0);
  });
});

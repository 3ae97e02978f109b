// GET state on the embedded store reads the thread, its latest checkpoint and that one's parent (whose tasks are the
// state's metadata.writes) in one statement (ThreadStore.getReadingAhead, CheckpointSaver.keepAhead), as on
// Postgres: the state is the same as separate reads give, a fork (the latest's parent is not the checkpoint before
// it) still reads the right parent, an empty thread reads nothing more, a missing thread is the platform's 404, and
// a run's own reads never take a tuple read ahead for a state request. Statements are counted as SQLite runs them.
import Database from 'better-sqlite3';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { SqliteSaver } from '@langchain/langgraph-checkpoint-sqlite';
import { startHarness, type Harness } from './helpers/harness.ts';

describe('GET state reads ahead (embedded)', () => {
  let h: Harness;
  const calls = { getTuple: 0 };
  /** Statements run that read threads or checkpoints. */
  const ran: string[] = [];
  const statementProto = Object.getPrototypeOf(new Database(':memory:').prepare('SELECT 1')) as Record<
    string,
    (...a: unknown[]) => unknown
  >;
  const originals = { get: statementProto.get!, all: statementProto.all!, getTuple: SqliteSaver.prototype.getTuple };

  beforeAll(async () => {
    for (const method of ['get', 'all'] as const) {
      const original = originals[method];
      statementProto[method] = function (this: { source: string }, ...a: unknown[]) {
        if (/\bap_threads\b|\bcheckpoints\b/.test(this.source)) ran.push(this.source.replace(/\s+/g, ' ').trim());
        return original.apply(this, a);
      };
    }
    SqliteSaver.prototype.getTuple = function (this: SqliteSaver, ...a: Parameters<SqliteSaver['getTuple']>) {
      calls.getTuple++;
      return originals.getTuple.apply(this, a);
    };
    h = await startHarness({ store: 'embedded' });
  });
  afterAll(async () => {
    statementProto.get = originals.get;
    statementProto.all = originals.all;
    SqliteSaver.prototype.getTuple = originals.getTuple;
    await h?.close();
  });

  const counted = async <T>(f: () => Promise<T>) => {
    const before = calls.getTuple;
    const from = ran.length;
    const out = await f();
    return { out, getTuple: calls.getTuple - before, statements: ran.slice(from) };
  };
  const ahead = () => (h.storage.checkpointer as unknown as { ahead: { size: number } }).ahead.size;
  const isAheadRead = (sql: string) => sql.startsWith('SELECT t.*, ck.thread_id AS ck_thread_id');

  it('one statement for the thread, the latest state and its parent, the same state as reading each', async () => {
    const t = (await h.call('POST', '/threads', {})).body.thread_id as string;
    expect((await h.call('POST', `/threads/${t}/runs/wait`, { assistant_id: 'counter', input: {} })).status).toBe(200);
    const latest = await counted(() => h.call('GET', `/threads/${t}/state`));
    expect(latest.out.status).toBe(200);
    expect(latest.getTuple).toBe(0);
    expect(latest.statements).toHaveLength(1);
    expect(isAheadRead(latest.statements[0]!)).toBe(true);
    const state = latest.out.body;
    expect(state.values).toEqual({ count: 11, steps: ['first', 'second'] });
    expect(state.metadata.writes).toEqual({ second: { count: 10, steps: ['second'] } });
    // The same checkpoint by id: read without reading ahead (the thread, the checkpoint and its parent apart).
    const byId = await counted(() => h.call('GET', `/threads/${t}/state/${state.checkpoint_id}`));
    expect(byId.getTuple).toBe(2);
    expect(byId.statements).toHaveLength(3);
    expect(byId.out.body).toEqual(state);
    // A store without the combined read reads apart, and gives the same state.
    const apart = await counted(async () => {
      const get = h.storage.threads.getReadingAhead;
      delete (h.storage.threads as { getReadingAhead?: unknown }).getReadingAhead;
      try {
        return await h.call('GET', `/threads/${t}/state`);
      } finally {
        (h.storage.threads as { getReadingAhead?: unknown }).getReadingAhead = get;
      }
    });
    expect(apart.getTuple).toBe(2);
    expect(apart.out.body).toEqual(state);
    expect(ahead()).toBe(0);
  });

  it('a missing thread: the platform 404, and nothing is kept for it', async () => {
    const missing = await counted(() => h.call('GET', '/threads/00000000-0000-4000-8000-000000000000/state'));
    expect(missing.out.status).toBe(404);
    expect(missing.out.body.detail ?? missing.out.body.message).toMatch(/Thread not found: 00000000-0000-4000/);
    expect(missing.statements).toHaveLength(1);
    expect(ahead()).toBe(0);
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
    expect(latest.getTuple).toBe(1);
    expect(latest.statements).toHaveLength(2);
    expect(latest.out.body.parent_checkpoint_id).toBe(afterFirst.checkpoint_id);
    expect(latest.out.body.checkpoint_id).toBe(forked.body.checkpoint.checkpoint_id);
    const byId = await h.call('GET', `/threads/${t}/state/${latest.out.body.checkpoint_id}`);
    expect(byId.body).toEqual(latest.out.body);
  });

  it('a thread without checkpoints: the empty state; a run reads its latest checkpoint itself', async () => {
    const t = (await h.call('POST', '/threads', {})).body.thread_id as string;
    const empty = await counted(() => h.call('GET', `/threads/${t}/state`));
    expect(empty.getTuple).toBe(0);
    expect(empty.statements).toHaveLength(1);
    expect(empty.out.body).toMatchObject({ values: {}, next: [], checkpoint: null });
    // Two turns: the second run starts from the first's last checkpoint (read by the run, not from a read-ahead).
    await h.call('POST', `/threads/${t}/runs/wait`, { assistant_id: 'counter', input: {} });
    await h.call('GET', `/threads/${t}/state`);
    const second = await h.call('POST', `/threads/${t}/runs/wait`, { assistant_id: 'counter', input: {} });
    expect(second.body).toEqual({ count: 22, steps: ['first', 'second', 'first', 'second'] });
    expect(ahead()).toBe(0);
  });
});

// GET state reads the thread, its latest root checkpoint and that one's parent (whose tasks are the state's
// metadata.writes) in one statement on both stores (ThreadStore.getReadingAhead, the savers' keepAhead): the state
// is the same as separate reads give, a fork (the latest's parent is not the checkpoint before it) still reads the
// right parent, the thread's copy of its values is not read (the state is the checkpoints'), an empty thread reads
// nothing more, a missing thread is the platform's 404, nothing read ahead is left behind, and a run's own reads
// never take a tuple read ahead for a state request. Statements are counted where they leave for Postgres (node-pg's
// Client.query) and where SQLite runs them (better-sqlite3's Statement).
import pg from 'pg';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { PostgresSaver } from '@langchain/langgraph-checkpoint-postgres';
import { SqliteSaver } from '@langchain/langgraph-checkpoint-sqlite';
import { FewerTripsPostgresSaver } from '../../../src/agent-server/storage/postgres/checkpointer.ts';
import { startHarness, type Harness } from '../helpers/harness.ts';
import { sqliteStatementPrototype, wrapMethod, type Fn } from '../helpers/spy.ts';

/** Reads of checkpoints and of a thread by id (the run engine's own periodic statements are left out). */
const READS_STATE = /checkpoint|threads WHERE thread_id = (\$1|\?)$/;

/** Statements about threads and checkpoints, and the packages' own checkpoint reads, while the tests run. */
const seen = { statements: [] as string[], getTuple: 0, list: 0 };
const restore: Array<() => void> = [];

function wrap(target: Record<string, Fn>, method: string, before: (self: unknown, args: unknown[]) => void): void {
  restore.push(wrapMethod(target, method, before));
}

beforeAll(() => {
  wrap(pg.Client.prototype as unknown as Record<string, Fn>, 'query', (_self, [q]) => {
    const text = typeof q === 'string' ? q : ((q as { text?: string } | undefined)?.text ?? '');
    if (READS_STATE.test(text)) seen.statements.push(text);
  });
  const statement = sqliteStatementPrototype();
  for (const method of ['get', 'all'])
    wrap(statement, method, (self) => {
      const text = (self as { source: string }).source;
      if (READS_STATE.test(text)) seen.statements.push(text);
    });
  for (const saver of [PostgresSaver.prototype, SqliteSaver.prototype] as unknown as Record<string, Fn>[]) {
    wrap(saver, 'getTuple', () => void seen.getTuple++);
    wrap(saver, 'list', () => void seen.list++);
  }
});
afterAll(() => {
  for (const undo of restore.reverse()) undo();
});

describe.each(['embedded', 'postgres'] as const)('GET state reads ahead (%s)', (store) => {
  let h: Harness;
  beforeAll(async () => {
    h = await startHarness({ store });
  });
  afterAll(async () => h?.close());

  const counted = async <T>(f: () => Promise<T>) => {
    const before = { ...seen, from: seen.statements.length };
    const out = await f();
    return {
      out,
      getTuple: seen.getTuple - before.getTuple,
      list: seen.list - before.list,
      statements: seen.statements.length - before.from,
    };
  };
  const heldAhead = () => (h.storage.checkpointer as unknown as { ahead: { size: number } }).ahead.size;
  const newThread = async () => (await h.call('POST', '/threads', {})).body.thread_id as string;

  it('one statement for the thread, the latest state and its parent, the same state as reading each', async () => {
    const t = await newThread();
    expect((await h.call('POST', `/threads/${t}/runs/wait`, { assistant_id: 'counter', input: {} })).status).toBe(200);
    const latest = await counted(() => h.call('GET', `/threads/${t}/state`));
    expect(latest.out.status).toBe(200);
    expect(latest).toMatchObject({ getTuple: 0, list: 0, statements: 1 });
    // The state comes from the checkpoints: the thread's own copy of the values (rewritten by every run, possibly
    // megabytes) is not read with them, on either store.
    const statement = seen.statements.at(-1)!;
    expect(statement).toMatch(/t\.metadata/);
    expect(statement).not.toMatch(/\bt\.\*|\bt\."?values"?/);
    const state = latest.out.body;
    expect(state.values).toEqual({ count: 11, steps: ['first', 'second'] });
    expect(state.metadata.writes).toEqual({ second: { count: 10, steps: ['second'] } });
    // The same checkpoint by id: read without reading ahead (the thread, the checkpoint and its parent apart).
    const byId = await counted(() => h.call('GET', `/threads/${t}/state/${state.checkpoint_id}`));
    expect(byId).toMatchObject({ getTuple: 2, list: 0, statements: 3 });
    expect(byId.out.body).toEqual(state);
    expect(heldAhead()).toBe(0);
  });

  it('a missing thread: the platform 404, and nothing is kept for it', async () => {
    const missing = await counted(() => h.call('GET', '/threads/00000000-0000-4000-8000-000000000000/state'));
    expect(missing.out.status).toBe(404);
    expect(missing.out.body.detail ?? missing.out.body.message).toMatch(/Thread not found: 00000000-0000-4000/);
    expect(missing.statements).toBe(1);
    expect(heldAhead()).toBe(0);
  });

  it('a fork: the parent is read on its own, and the state is right', async () => {
    const t = await newThread();
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
    expect(latest).toMatchObject({ getTuple: 1, list: 0, statements: 2 });
    expect(latest.out.body.parent_checkpoint_id).toBe(afterFirst.checkpoint_id);
    expect(latest.out.body.checkpoint_id).toBe(forked.body.checkpoint.checkpoint_id);
    const byId = await h.call('GET', `/threads/${t}/state/${latest.out.body.checkpoint_id}`);
    expect(byId.body).toEqual(latest.out.body);
    expect(heldAhead()).toBe(0);
  });

  it('a thread without checkpoints: the empty state; a run reads its latest checkpoint itself', async () => {
    const t = await newThread();
    const empty = await counted(() => h.call('GET', `/threads/${t}/state`));
    expect(empty).toMatchObject({ getTuple: 0, list: 0, statements: 1 });
    expect(empty.out.body).toMatchObject({ values: {}, next: [], checkpoint: null });
    // Two turns: the second run starts from the first's last checkpoint (read by the run, not from a read-ahead).
    await h.call('POST', `/threads/${t}/runs/wait`, { assistant_id: 'counter', input: {} });
    await h.call('GET', `/threads/${t}/state`);
    const second = await h.call('POST', `/threads/${t}/runs/wait`, { assistant_id: 'counter', input: {} });
    expect(second.body).toEqual({ count: 22, steps: ['first', 'second', 'first', 'second'] });
    expect(heldAhead()).toBe(0);
  });
});

// A package version whose checkpoint read this saver does not know (no latestTwoSubquery): the Postgres store reads
// the thread, then the two checkpoints in one read of the saver's own, and GET state answers the same.
describe('GET state reads ahead with an unknown package statement (postgres)', () => {
  let h: Harness;
  beforeAll(async () => {
    const proto = FewerTripsPostgresSaver.prototype;
    const known = Object.getOwnPropertyDescriptor(proto, 'latestTwoSubquery')!;
    proto.latestTwoSubquery = () => undefined;
    try {
      h = await startHarness({ store: 'postgres' });
    } finally {
      Object.defineProperty(proto, 'latestTwoSubquery', known);
    }
  });
  afterAll(async () => h?.close());

  it('the thread, then its latest checkpoint and the parent in one read: the same state', async () => {
    const t = (await h.call('POST', '/threads', {})).body.thread_id as string;
    expect((await h.call('POST', `/threads/${t}/runs/wait`, { assistant_id: 'counter', input: {} })).status).toBe(200);
    const before = { ...seen, from: seen.statements.length };
    const latest = await h.call('GET', `/threads/${t}/state`);
    expect(seen.statements.length - before.from).toBe(2);
    expect(seen.getTuple - before.getTuple).toBe(0);
    expect(latest.body.values).toEqual({ count: 11, steps: ['first', 'second'] });
    expect(latest.body.metadata.writes).toEqual({ second: { count: 10, steps: ['second'] } });
    expect((await h.call('GET', `/threads/${t}/state/${latest.body.checkpoint_id}`)).body).toEqual(latest.body);
    const missing = await h.call('GET', '/threads/00000000-0000-4000-8000-000000000000/state');
    expect(missing.status).toBe(404);
    expect((h.storage.checkpointer as unknown as { ahead: { size: number } }).ahead.size).toBe(0);
  });
});

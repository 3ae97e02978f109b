// The Postgres store's own contract: two stores (processes) on one database share the queue, and the checkpointer
// that writes in one statement what the package writes in a transaction reads back as the package's.
import { randomUUID } from 'node:crypto';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import pg from 'pg';
import type { Checkpoint, CheckpointTuple } from '@langchain/langgraph-checkpoint';
import { PostgresSaver } from '@langchain/langgraph-checkpoint-postgres';
import { openPostgresStorage } from '../../../src/agent-server/storage/postgres/index.ts';
import { FewerTripsPostgresSaver } from '../../../src/agent-server/storage/postgres/checkpointer.ts';
import type { RunRecord } from '../../../src/agent-server/storage/types.ts';
import type { EngineStorage } from '../../../src/agent-server/storage/ports/run-queue.ts';
import { createTestDatabase } from '../helpers/pg.ts';
import { newRun } from '../helpers/storage-factories.ts';

// Two processes on one database: a run created by one is claimed by the other, also after that one's claims
// found nothing (its claim short-cut wakes up on the NOTIFY).
describe('postgres: claims across two stores', () => {
  let db: Awaited<ReturnType<typeof createTestDatabase>>;
  let a: EngineStorage;
  let b: EngineStorage;
  beforeAll(async () => {
    db = await createTestDatabase();
    a = await openPostgresStorage({ databaseUrl: db.url, poolSize: 4 });
    b = await openPostgresStorage({ databaseUrl: db.url, poolSize: 4 });
  });
  afterAll(async () => {
    await a?.close();
    await b?.close();
    await db?.drop();
  });

  it('a run created in one store is claimed by the other', async () => {
    expect(await a.queue.claim('wa', 60_000)).toBeNull();
    const t = await b.threads.create({ thread_id: randomUUID(), metadata: {} }, 'raise');
    const r = await b.queue.create(newRun(t.thread_id));
    await expect
      .poll(async () => (await a.queue.claim('wa', 60_000))?.run_id, { timeout: 5_000, interval: 20 })
      .toBe(r.run_id);
    const r2 = await b.queue.create(newRun(t.thread_id, { multitask_strategy: 'enqueue' }));
    expect(await a.queue.claim('wa', 60_000)).toBeNull();
    // Finished in store b (e.g. the sweeper there): store a hears run_done with a queued run and claims it.
    expect(await b.queue.finish(r.run_id, 'wa', { status: 'success' })).toBe(true);
    await expect
      .poll(async () => (await a.queue.claim('wa', 60_000))?.run_id, { timeout: 5_000, interval: 20 })
      .toBe(r2.run_id);
  });

  it('two processes racing with creates that claim, claims and finishes that claim run every run once, one per thread at a time', async () => {
    while ((await a.queue.claim('drain', 60_000)) || (await b.queue.claim('drain', 60_000))) {
      /* drained */
    }
    const threads = await Promise.all(
      Array.from({ length: 6 }, () => a.threads.create({ thread_id: randomUUID(), metadata: {} }, 'raise')),
    );
    const stores = [
      { store: a, worker: 'race-a' },
      { store: b, worker: 'race-b' },
    ];
    const created = new Set<string>();
    const started: string[] = [];
    const running = new Map<string, string>(); // thread -> run
    let overlap = '';
    const execute = async (worker: string, store: EngineStorage, run: RunRecord | null): Promise<void> => {
      while (run) {
        if (running.has(run.thread_id)) overlap ||= `${run.run_id} started while ${running.get(run.thread_id)} ran`;
        running.set(run.thread_id, run.run_id);
        started.push(run.run_id);
        await new Promise((r) => setTimeout(r, Math.random() * 5));
        running.delete(run.thread_id);
        const { finished, next } = await store.queue.finishAndClaim(run.run_id, worker, { status: 'success' }, 60_000);
        expect(finished).toBe(true);
        run = next;
      }
    };
    const work: Array<Promise<void>> = [];
    for (let i = 0; i < 60; i++) {
      const { store, worker } = stores[i % 2]!;
      const t = threads[i % threads.length]!;
      const r = await store.queue.create(newRun(t.thread_id, { multitask_strategy: 'enqueue' }), {
        workerId: worker,
        leaseMs: 60_000,
      });
      created.add(r.run_id);
      if (r.status === 'running') work.push(execute(worker, store, r));
      // Claimers of both processes look as well (what a wake-up makes them do).
      if (i % 3 === 0)
        for (const s of stores)
          work.push(s.store.queue.claim(s.worker, 60_000).then((x) => execute(s.worker, s.store, x)));
    }
    // Whatever is still queued gets claimed until none is left.
    for (;;) {
      await Promise.all(work.splice(0));
      const more = await Promise.all(stores.map((s) => s.store.queue.claim(s.worker, 60_000)));
      if (more.every((x) => x === null)) break;
      for (const [k, x] of more.entries()) work.push(execute(stores[k]!.worker, stores[k]!.store, x));
    }
    expect(overlap).toBe('');
    expect(started.length).toBe(created.size);
    expect(new Set(started)).toEqual(created);
    for (const t of threads) expect((await a.threads.get(t.thread_id))?.status).toBe('idle');
  });

  it('a run whose thread was locked when a claim looked is claimed after the lock goes, with no notification', async () => {
    const t = await b.threads.create({ thread_id: randomUUID(), metadata: {} }, 'raise');
    const r = await b.queue.create(newRun(t.thread_id));
    const events: string[] = [];
    const unsubscribe = a.subscribe((e) => events.push(e.type));
    // Another process holds the thread row (a write that sends no NOTIFY): the claim skips it.
    const locker = new pg.Client({ connectionString: db.url });
    await locker.connect();
    try {
      await locker.query('BEGIN');
      await locker.query('SELECT 1 FROM agentplane.threads WHERE thread_id = $1 FOR UPDATE', [t.thread_id]);
      expect(await a.queue.claim('wa', 60_000)).toBeNull();
      events.length = 0;
      // The store nudges its engine to look again instead of waiting for the next event.
      await expect.poll(() => events.includes('wake'), { timeout: 3_000, interval: 10 }).toBe(true);
      await locker.query('COMMIT');
    } finally {
      await locker.end();
      unsubscribe();
    }
    await expect
      .poll(async () => (await a.queue.claim('wa', 60_000))?.run_id, { timeout: 3_000, interval: 20 })
      .toBe(r.run_id);
  });
});

// The Postgres checkpointer writes in one statement what the package writes in a transaction: the same
// operations on both (separate schemas, one database) must read back the same, conflicts included.
describe('postgres checkpointer (one statement per put / putWrites)', () => {
  let db: Awaited<ReturnType<typeof createTestDatabase>>;
  let pool: pg.Pool;
  let ours: FewerTripsPostgresSaver;
  let theirs: PostgresSaver;

  beforeAll(async () => {
    db = await createTestDatabase();
    pool = new pg.Pool({ connectionString: db.url, max: 4 });
    ours = new FewerTripsPostgresSaver(pool, undefined, { schema: 'ours' });
    theirs = new PostgresSaver(pool, undefined, { schema: 'theirs' });
    await ours.setup();
    await theirs.setup();
  });
  afterAll(async () => {
    await pool?.end();
    await db?.drop();
  });

  const both = async <T>(fn: (s: PostgresSaver) => Promise<T>): Promise<[T, T]> => [await fn(ours), await fn(theirs)];
  const all = async (s: PostgresSaver, threadId: string) => {
    const out: CheckpointTuple[] = [];
    for await (const t of s.list({ configurable: { thread_id: threadId } })) out.push(t);
    return out;
  };
  const checkpoint = (id: string, values: Record<string, unknown>, versions: Record<string, number>): Checkpoint => ({
    v: 4,
    id,
    ts: '2026-01-01T00:00:00.000Z',
    channel_values: values,
    channel_versions: versions,
    versions_seen: { agent: { a: 1 } },
  });

  it('put, putWrites, getTuple and list read back exactly as with the package', async () => {
    const threadId = randomUUID();
    const cfg = { configurable: { thread_id: threadId, checkpoint_ns: '' } };
    const id1 = '1f000000-0000-6000-8000-000000000001';
    const id2 = '1f000000-0000-6000-8000-000000000002';
    const first = checkpoint(id1, { a: { n: 1 }, b: 'text' }, { a: 1, b: 1, gone: 1 });
    const [c1o, c1t] = await both((s) =>
      s.put(cfg, first, { source: 'input', step: -1, parents: {} }, { a: 1, b: 1, gone: 1 }),
    );
    expect(c1o).toEqual(c1t);
    const second = checkpoint(id2, { a: { n: 2 }, b: 'text' }, { a: 2, b: 1 });
    await both((s) => s.put(c1o, second, { source: 'loop', step: 0, parents: {} }, { a: 2 }));
    // Regular writes (DO NOTHING: a repeat keeps the first), special ones (upsert: a repeat takes the last).
    const at2 = { configurable: { thread_id: threadId, checkpoint_ns: '', checkpoint_id: id2 } };
    await both((s) =>
      s.putWrites(
        at2,
        [
          ['a', { n: 3 }],
          ['b', 'x'],
        ],
        'task-1',
      ),
    );
    await both((s) =>
      s.putWrites(
        at2,
        [
          ['a', { n: 99 }],
          ['b', 'y'],
        ],
        'task-1',
      ),
    );
    await both((s) => s.putWrites(at2, [['__error__', { message: 'one' }]], 'task-2'));
    await both((s) => s.putWrites(at2, [['__error__', { message: 'two' }]], 'task-2'));
    await both((s) =>
      s.putWrites(
        at2,
        [
          ['__interrupt__', 1],
          ['__interrupt__', 2],
        ],
        'task-3',
      ),
    );
    await both((s) =>
      s.putWrites(
        at2,
        [
          ['a', 1],
          ['__error__', 'mixed'],
        ],
        'task-4',
      ),
    );
    await both((s) => s.putWrites(at2, [], 'task-5'));
    // Upserting an existing checkpoint replaces checkpoint and metadata; blobs of a seen version stay.
    const again = checkpoint(id2, { a: { n: 'changed' }, b: 'text' }, { a: 2, b: 1 });
    await both((s) => s.put(c1o, again, { source: 'loop', step: 7, parents: {} }, { a: 2 }));

    const [latestO, latestT] = await both((s) => s.getTuple(cfg));
    expect(latestO).toEqual(latestT);
    expect(latestO?.checkpoint.channel_values).toEqual({ a: { n: 2 }, b: 'text' });
    expect(latestO?.metadata).toMatchObject({ step: 7 });
    expect(latestO?.pendingWrites).toEqual([
      ['task-1', 'a', { n: 3 }],
      ['task-1', 'b', 'x'],
      ['task-2', '__error__', { message: 'two' }],
      ['task-3', '__interrupt__', 2],
      ['task-4', '__error__', 'mixed'],
      ['task-4', 'a', 1],
    ]);
    const [oldO, oldT] = await both((s) => s.getTuple({ configurable: { ...cfg.configurable, checkpoint_id: id1 } }));
    expect(oldO).toEqual(oldT);
    expect(oldO?.checkpoint.channel_values).toEqual({ a: { n: 1 }, b: 'text' });
    expect(await all(ours, threadId)).toEqual(await all(theirs, threadId));
    expect((await all(ours, threadId)).map((t) => t.checkpoint.id)).toEqual([id2, id1]);
  });

  it('writes issued together go out as one statement and read back as the package wrote them one by one', async () => {
    const threadId = randomUUID();
    const cfg = { configurable: { thread_id: threadId, checkpoint_ns: '' } };
    const ids = ['1f000000-0000-6000-8000-000000000011', '1f000000-0000-6000-8000-000000000012'];
    const ops = (s: PostgresSaver) => [
      () =>
        s.put(
          cfg,
          checkpoint(ids[0]!, { a: 1, b: 'x' }, { a: 1, b: 1 }),
          { source: 'input', step: -1, parents: {}, note: 'a "quoted" {brace}, back\\slash, ünï, \n' } as never,
          { a: 1, b: 1 },
        ),
      () =>
        s.put(
          { configurable: { ...cfg.configurable, checkpoint_id: ids[0] } },
          checkpoint(ids[1]!, { a: 2, b: 'x' }, { a: 2, b: 1 }),
          { source: 'loop', step: 0, parents: {} },
          { a: 2 },
        ),
      () =>
        s.putWrites(
          { configurable: { ...cfg.configurable, checkpoint_id: ids[1] } },
          [
            ['a', 5],
            ['b', 'y'],
          ],
          't1',
        ),
      () => s.putWrites({ configurable: { ...cfg.configurable, checkpoint_id: ids[1] } }, [['__error__', 'e']], 't2'),
      // The same rows again in the same turn (must not be one statement: a row may be touched once per statement).
      () => s.putWrites({ configurable: { ...cfg.configurable, checkpoint_id: ids[1] } }, [['__error__', 'e']], 't2'),
      () =>
        s.putWrites(
          { configurable: { ...cfg.configurable, checkpoint_id: ids[1] } },
          [
            ['a', 5],
            ['b', 'y'],
          ],
          't1',
        ),
    ];
    await Promise.all(ops(ours).map((op) => op()));
    for (const op of ops(theirs)) await op();
    expect(await all(ours, threadId)).toEqual(await all(theirs, threadId));
    const latest = await ours.getTuple(cfg);
    expect(latest?.checkpoint.channel_values).toEqual({ a: 2, b: 'x' });
    expect(latest?.pendingWrites).toEqual([
      ['t1', 'a', 5],
      ['t1', 'b', 'y'],
      ['t2', '__error__', 'e'],
    ]);
    const first = await ours.getTuple({ configurable: { ...cfg.configurable, checkpoint_id: ids[0] } });
    expect(first?.metadata).toMatchObject({ note: 'a "quoted" {brace}, back\\slash, ünï, \n' });
  });

  it('a bad write sent together with good ones fails alone', async () => {
    const threadId = randomUUID();
    const id = '1f000000-0000-6000-8000-000000000021';
    const good = { configurable: { thread_id: threadId, checkpoint_ns: '', checkpoint_id: id } };
    // checkpoint_ns null: the package's write fails on the NOT NULL column too.
    const bad = { configurable: { thread_id: threadId, checkpoint_ns: null, checkpoint_id: id } };
    const results = await Promise.allSettled([
      ours.put(
        { configurable: { thread_id: threadId, checkpoint_ns: '' } },
        checkpoint(id, { a: 1 }, { a: 1 }),
        { source: 'input', step: -1, parents: {} },
        { a: 1 },
      ),
      ours.putWrites(good, [['a', 1]], 'ok-task'),
      ours.putWrites(bad as never, [['a', 2]], 'bad-task'),
    ]);
    expect(results.map((r) => r.status)).toEqual(['fulfilled', 'fulfilled', 'rejected']);
    await expect(theirs.putWrites(bad as never, [['a', 2]], 'bad-task')).rejects.toThrow();
    const tuple = await ours.getTuple({ configurable: { thread_id: threadId, checkpoint_ns: '' } });
    expect(tuple?.checkpoint.channel_values).toEqual({ a: 1 });
    expect(tuple?.pendingWrites).toEqual([['ok-task', 'a', 1]]);
  });

  it('a checkpoint with no new channel versions is one row, read back like the package', async () => {
    const threadId = randomUUID();
    const cfg = { configurable: { thread_id: threadId, checkpoint_ns: 'sub:1' } };
    const cp = checkpoint('1f000000-0000-6000-8000-000000000009', {}, {});
    await both((s) => s.put(cfg, cp, { source: 'input', step: -1, parents: {} }, {}));
    const [o, t] = await both((s) => s.getTuple(cfg));
    expect(o).toEqual(t);
    expect(o?.checkpoint.channel_values).toEqual({});
  });
});

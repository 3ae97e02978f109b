// One contract, both adapters: the routes and the run engine rely on exactly these behaviours.
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { randomUUID } from 'node:crypto';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import pg from 'pg';
import type { Checkpoint, CheckpointTuple } from '@langchain/langgraph-checkpoint';
import { PostgresSaver } from '@langchain/langgraph-checkpoint-postgres';
import { openEmbeddedStorage } from '../../../src/agent-server/storage/embedded/index.ts';
import { openPostgresStorage } from '../../../src/agent-server/storage/postgres/index.ts';
import { FewerTripsPostgresSaver } from '../../../src/agent-server/storage/postgres/checkpointer.ts';
import { itemsConfig } from '../../../src/agent-server/storage/items.ts';
import type { NewRun, RunRecord, Storage, StorageEvent } from '../../../src/agent-server/storage/types.ts';
import { ConflictError, NotFoundError } from '../../../src/lib/errors.ts';
import { createTestDatabase } from '../helpers/pg.ts';
import { sqliteStatementPrototype, wrapMethod, type Fn } from '../helpers/spy.ts';

type Factory = { name: string; open: () => Promise<Storage>; cleanup: () => Promise<void> };

function embeddedFactory(): Factory {
  const dir = mkdtempSync(join(tmpdir(), 'ap-as-contract-'));
  return {
    name: 'embedded',
    open: async () => openEmbeddedStorage({ dataDir: dir }),
    cleanup: async () => rmSync(dir, { recursive: true, force: true }),
  };
}

function postgresFactory(): Factory {
  let db: Awaited<ReturnType<typeof createTestDatabase>> | undefined;
  return {
    name: 'postgres',
    open: async () => {
      db ??= await createTestDatabase();
      return openPostgresStorage({ databaseUrl: db.url, poolSize: 8 });
    },
    cleanup: async () => db?.drop(),
  };
}

const ASSISTANT = '11111111-1111-5111-8111-111111111111';

function newRun(threadId: string, extra: Partial<NewRun> = {}): NewRun {
  return {
    run_id: randomUUID(),
    thread_id: threadId,
    assistant_id: ASSISTANT,
    metadata: {},
    kwargs: { input: { n: 1 } },
    multitask_strategy: 'reject',
    if_not_exists: 'reject',
    thread_metadata: { graph_id: 'g' },
    ...extra,
  };
}

describe.each([embeddedFactory, postgresFactory])('storage contract (%o)', (makeFactory) => {
  const factory = makeFactory();
  let store: Storage;

  beforeAll(async () => {
    store = await factory.open();
  });
  afterAll(async () => {
    await store?.close();
    await factory.cleanup();
  });

  async function thread(metadata: Record<string, unknown> = {}) {
    return store.threads.create({ thread_id: randomUUID(), metadata }, 'raise');
  }

  it(`${factory.name}: assistants create, conflict, patch, search, count, delete`, async () => {
    const a = await store.assistants.create(
      {
        assistant_id: ASSISTANT,
        graph_id: 'g',
        config: {},
        context: {},
        metadata: { team: 'x' },
        name: 'A',
        description: null,
      },
      'raise',
    );
    expect(a).toMatchObject({ assistant_id: ASSISTANT, graph_id: 'g', version: 1, metadata: { team: 'x' } });
    await expect(store.assistants.create({ ...a, name: 'B' }, 'raise')).rejects.toBeInstanceOf(ConflictError);
    expect((await store.assistants.create({ ...a, name: 'B' }, 'do_nothing')).name).toBe('A');
    const p = await store.assistants.patch(ASSISTANT, { metadata: { more: 1 }, name: 'A2' });
    expect(p).toMatchObject({ name: 'A2', version: 2, metadata: { team: 'x', more: 1 } });
    expect(await store.assistants.search({ metadata: { team: 'x' } })).toHaveLength(1);
    expect(await store.assistants.search({ metadata: { team: 'y' } })).toHaveLength(0);
    expect(await store.assistants.count({ graph_id: 'g' })).toBe(1);
    const other = randomUUID();
    await store.assistants.create({ ...a, assistant_id: other }, 'raise');
    await store.assistants.delete(other);
    await expect(store.assistants.delete(other)).rejects.toBeInstanceOf(NotFoundError);
    expect(await store.assistants.get(other)).toBeNull();
  });

  it(`${factory.name}: threads create, metadata merge, search, count, copy, delete`, async () => {
    const t = await thread({ owner: 'ann' });
    expect(t).toMatchObject({ status: 'idle', values: null, config: {}, metadata: { owner: 'ann' } });
    expect(t.updated_at).toBe(t.created_at);
    await expect(store.threads.create({ thread_id: t.thread_id, metadata: {} }, 'raise')).rejects.toBeInstanceOf(
      ConflictError,
    );
    const patched = await store.threads.patch(t.thread_id, { metadata: { tag: 1 } });
    expect(patched.metadata).toEqual({ owner: 'ann', tag: 1 });
    expect(await store.threads.metadata(t.thread_id)).toEqual({ owner: 'ann', tag: 1 });
    expect(await store.threads.metadata(randomUUID())).toBeNull();
    expect((await store.threads.search({ metadata: { owner: 'ann' } })).map((x) => x.thread_id)).toContain(t.thread_id);
    expect(await store.threads.count({ ids: [t.thread_id], status: 'idle' })).toBe(1);
    const copy = await store.threads.copy(t.thread_id, randomUUID());
    expect(copy.metadata).toEqual({ owner: 'ann', tag: 1, thread_id: copy.thread_id });
    await store.threads.delete(t.thread_id);
    expect(await store.threads.get(t.thread_id)).toBeNull();
    await expect(store.threads.delete(t.thread_id)).rejects.toBeInstanceOf(NotFoundError);
  });

  it(`${factory.name}: run create makes the thread busy; reject answers 409 and writes nothing`, async () => {
    const t = await thread();
    const r = await store.runs.create(newRun(t.thread_id));
    expect(r).toMatchObject({ status: 'pending', attempt: 0, multitask_strategy: 'reject' });
    expect((await store.threads.get(t.thread_id))?.status).toBe('busy');
    expect((await store.threads.get(t.thread_id))?.metadata).toMatchObject({ graph_id: 'g' });
    await expect(store.runs.create(newRun(t.thread_id))).rejects.toThrow(/already running a task/);
    expect(await store.runs.list(t.thread_id, { limit: 10, offset: 0 })).toHaveLength(1);
    await expect(store.runs.create(newRun(randomUUID()))).rejects.toBeInstanceOf(NotFoundError);
    const created = await store.runs.create(newRun(randomUUID(), { if_not_exists: 'create' }));
    expect((await store.threads.get(created.thread_id))?.status).toBe('busy');
  });

  // A long conversation keeps megabytes in the thread's values; a new run on it needs only its metadata. Every
  // statement either store sends while the run is created is looked at: none reads the thread's values.
  it(`${factory.name}: creating a run on a thread does not read the thread's values`, async () => {
    const t = await thread();
    while (await store.runs.claim('drain', 60_000)) {
      // runs other tests left queued
    }
    const first = await store.runs.create(newRun(t.thread_id));
    const claimed = await store.runs.claim('w1', 60_000);
    expect(claimed?.run_id).toBe(first.run_id);
    const values = {
      messages: Array.from({ length: 50 }, (_, i) => ({ type: 'human', content: 'x'.repeat(4000), id: `${i}` })),
    };
    await store.runs.finish(first.run_id, 'w1', { status: 'success', values });
    expect((await store.threads.get(t.thread_id))?.values).toEqual(values);
    const sent: string[] = [];
    const statement = sqliteStatementPrototype();
    const undo = [
      wrapMethod(statement, 'get', (self) => sent.push((self as { source: string }).source)),
      wrapMethod(statement, 'all', (self) => sent.push((self as { source: string }).source)),
      wrapMethod(pg.Client.prototype as unknown as Record<string, Fn>, 'query', (_self, [q]) =>
        sent.push(typeof q === 'string' ? q : ((q as { text?: string } | undefined)?.text ?? '')),
      ),
    ];
    try {
      await store.runs.create(newRun(t.thread_id, { multitask_strategy: 'enqueue' }));
    } finally {
      for (const u of undo) u();
    }
    // Statements that read the threads table (Postgres' create is one statement, a WITH that locks and updates it).
    const threadReads = sent.filter((q) => /\b(ap_)?threads\b/.test(q) && !/^\s*(INSERT|UPDATE|DELETE)\b/i.test(q));
    expect(threadReads.length).toBeGreaterThan(0);
    for (const q of threadReads) {
      expect(q).not.toMatch(/SELECT (\w+\.)?\* FROM (\w+\.)?(ap_)?threads\b/i);
      expect(q).not.toMatch(/"values"|\bvalues\s*(,|\s+FROM\b)/i);
    }
  });

  it(`${factory.name}: claims take the oldest run per thread, one running run per thread`, async () => {
    // Drain whatever earlier tests queued.
    while (await store.runs.claim('drain', 60_000)) {
      /* drained */
    }
    const t1 = await thread();
    const t2 = await thread();
    const a = await store.runs.create(newRun(t1.thread_id));
    const b = await store.runs.create(newRun(t1.thread_id, { multitask_strategy: 'enqueue' }));
    const c = await store.runs.create(newRun(t2.thread_id));
    const claimed = await Promise.all([1, 2, 3, 4].map(() => store.runs.claim('w1', 60_000)));
    const ids = claimed.filter((x) => x !== null).map((x) => x!.run_id);
    expect(ids.sort()).toEqual([a.run_id, c.run_id].sort());
    expect(claimed.find((x) => x?.run_id === a.run_id)).toMatchObject({
      status: 'running',
      attempt: 1,
      worker_id: 'w1',
    });
    expect(await store.runs.finish(a.run_id, 'someone-else', { status: 'success' })).toBe(false);
    expect(await store.runs.finish(a.run_id, 'w1', { status: 'success', values: { n: 1 } })).toBe(true);
    // b is still pending on t1.
    expect((await store.threads.get(t1.thread_id))?.status).toBe('busy');
    const next = await store.runs.claim('w1', 60_000);
    expect(next?.run_id).toBe(b.run_id);
    await store.runs.finish(b.run_id, 'w1', { status: 'success', values: { n: 2 } });
    const t1After = await store.threads.get(t1.thread_id);
    expect(t1After).toMatchObject({ status: 'idle', values: { n: 2 } });
    await store.runs.finish(c.run_id, 'w1', { status: 'error', error: { error: 'Boom', message: 'x' } });
    expect(await store.threads.get(t2.thread_id)).toMatchObject({ status: 'error' });
    expect(await store.runs.get(t2.thread_id, c.run_id)).toMatchObject({ status: 'error', error: { error: 'Boom' } });
    await store.runs.finish(c.run_id, 'w1', { status: 'success' });
    expect((await store.runs.get(t2.thread_id, c.run_id))?.status).toBe('error');
  });

  it(`${factory.name}: interrupted outcome leaves the thread interrupted`, async () => {
    while (await store.runs.claim('drain', 60_000)) {
      /* drained */
    }
    const t = await thread();
    const r = await store.runs.create(newRun(t.thread_id));
    expect((await store.runs.claim('w', 60_000))?.run_id).toBe(r.run_id);
    await store.runs.finish(r.run_id, 'w', { status: 'success', interrupted: true, values: { a: 1 } });
    expect(await store.threads.get(t.thread_id)).toMatchObject({ status: 'interrupted', values: { a: 1 } });
  });

  it(`${factory.name}: values given as JSON text (valuesJson) are the thread's values`, async () => {
    while (await store.runs.claim('drain', 60_000)) {
      /* drained */
    }
    const t = await thread();
    const r = await store.runs.create(newRun(t.thread_id));
    expect((await store.runs.claim('w', 60_000))?.run_id).toBe(r.run_id);
    const valuesJson = JSON.stringify({ messages: [{ type: 'human', content: 'hi' }], n: 3 });
    await store.runs.finish(r.run_id, 'w', { status: 'success', valuesJson });
    expect(await store.threads.get(t.thread_id)).toMatchObject({ status: 'idle', values: JSON.parse(valuesJson) });
  });

  it(`${factory.name}: multitask interrupt flags the running run and tells its worker; pending runs end at once`, async () => {
    while (await store.runs.claim('drain', 60_000)) {
      /* drained */
    }
    const events: StorageEvent[] = [];
    const off = store.subscribe((e) => events.push(e));
    const t = await thread();
    const running = await store.runs.create(newRun(t.thread_id));
    await store.runs.claim('w', 60_000);
    const queued = await store.runs.create(newRun(t.thread_id, { multitask_strategy: 'enqueue' }));
    const newer = await store.runs.create(newRun(t.thread_id, { multitask_strategy: 'interrupt' }));
    expect((await store.runs.get(t.thread_id, queued.run_id))?.status).toBe('interrupted');
    expect((await store.runs.cancelRequests([running.run_id])).get(running.run_id)).toBe('interrupt');
    await expect.poll(() => events.some((e) => e.type === 'cancel' && e.run_id === running.run_id)).toBe(true);
    // The newer run waits until the cancelled one is off the thread.
    expect(await store.runs.claim('w2', 60_000)).toBeNull();
    await store.runs.finish(running.run_id, 'w', { status: 'interrupted' });
    expect((await store.runs.claim('w2', 60_000))?.run_id).toBe(newer.run_id);
    off();
  });

  it(`${factory.name}: cancel of a pending run ends it; rollback deletes it`, async () => {
    while (await store.runs.claim('drain', 60_000)) {
      /* drained */
    }
    const t = await thread();
    const r = await store.runs.create(newRun(t.thread_id));
    expect((await store.runs.cancel(t.thread_id, r.run_id, 'interrupt')).status).toBe('interrupted');
    expect((await store.threads.get(t.thread_id))?.status).toBe('idle');
    const r2 = await store.runs.create(newRun(t.thread_id));
    await store.runs.cancel(t.thread_id, r2.run_id, 'rollback');
    expect(await store.runs.get(t.thread_id, r2.run_id)).toBeNull();
    await expect(store.runs.cancel(t.thread_id, randomUUID(), 'interrupt')).rejects.toBeInstanceOf(NotFoundError);
  });

  it(`${factory.name}: sweep requeues runs whose lease expired and gives up after the last attempt`, async () => {
    while (await store.runs.claim('drain', 60_000)) {
      /* drained */
    }
    const t = await thread();
    const r = await store.runs.create(newRun(t.thread_id));
    for (let attempt = 1; attempt <= 3; attempt++) {
      const c = await store.runs.claim('dead-worker', 1);
      expect(c).toMatchObject({ run_id: r.run_id, attempt });
      await new Promise((res) => setTimeout(res, 20));
      const swept = await store.runs.sweep(3);
      if (attempt < 3) expect(swept.requeued).toEqual([r.run_id]);
      else expect(swept.failed).toEqual([r.run_id]);
    }
    expect(await store.runs.get(t.thread_id, r.run_id)).toMatchObject({
      status: 'error',
      error: { error: 'WorkerLost' },
    });
    expect((await store.threads.get(t.thread_id))?.status).toBe('error');
  });

  it(`${factory.name}: concurrent creates with reject on an idle thread: exactly one run`, async () => {
    const t = await thread();
    const results = await Promise.allSettled(Array.from({ length: 6 }, () => store.runs.create(newRun(t.thread_id))));
    expect(results.filter((r) => r.status === 'fulfilled')).toHaveLength(1);
    for (const r of results) if (r.status === 'rejected') expect(r.reason).toBeInstanceOf(ConflictError);
    expect(await store.runs.list(t.thread_id, { limit: 10, offset: 0 })).toHaveLength(1);
    // A stateless-style create makes the thread; enqueue behind a busy thread is accepted.
    const fresh = randomUUID();
    await store.runs.create(newRun(fresh, { if_not_exists: 'create' }));
    await store.runs.create(newRun(fresh, { if_not_exists: 'create', multitask_strategy: 'enqueue' }));
    expect(await store.runs.list(fresh, { limit: 10, offset: 0 })).toHaveLength(2);
  });

  it(`${factory.name}: a delayed run is claimed once due, though claims in between found nothing`, async () => {
    while (await store.runs.claim('drain', 60_000)) {
      /* drained */
    }
    const t = await thread();
    const r = await store.runs.create(newRun(t.thread_id, { delay_ms: 300 }));
    expect(await store.runs.claim('w', 60_000)).toBeNull();
    expect(await store.runs.claim('w', 60_000)).toBeNull();
    await expect
      .poll(async () => (await store.runs.claim('w', 60_000))?.run_id, { timeout: 5_000, interval: 50 })
      .toBe(r.run_id);
    await store.runs.finish(r.run_id, 'w', { status: 'success' });
  });

  it(`${factory.name}: a run queued behind a finishing one is claimable right after finish`, async () => {
    while (await store.runs.claim('drain', 60_000)) {
      /* drained */
    }
    const t = await thread();
    const a = await store.runs.create(newRun(t.thread_id));
    expect((await store.runs.claim('w', 60_000))?.run_id).toBe(a.run_id);
    const b = await store.runs.create(newRun(t.thread_id, { multitask_strategy: 'enqueue' }));
    expect(await store.runs.claim('w', 60_000)).toBeNull();
    await store.runs.finish(a.run_id, 'w', { status: 'success' });
    expect((await store.runs.claim('w', 60_000))?.run_id).toBe(b.run_id);
    await store.runs.finish(b.run_id, 'w', { status: 'success' });
  });

  it(`${factory.name}: create with a claim takes the run only when a claim would take it next`, async () => {
    while (await store.runs.claim('drain', 60_000)) {
      /* drained */
    }
    const events: StorageEvent[] = [];
    const off = store.subscribe((e) => events.push(e));
    const claim = { workerId: 'w-create', leaseMs: 60_000 };
    try {
      // Nothing waits: claimed in the create, nobody woken, the lease is the worker's.
      const t1 = await thread();
      const a = await store.runs.create(newRun(t1.thread_id), claim);
      expect(a).toMatchObject({ status: 'running', attempt: 1, worker_id: 'w-create' });
      expect(await store.runs.get(t1.thread_id, a.run_id)).toMatchObject({ status: 'running', worker_id: 'w-create' });
      expect((await store.threads.get(t1.thread_id))?.status).toBe('busy');
      expect(await store.runs.heartbeat('w-create', [a.run_id], 60_000)).toEqual([a.run_id]);
      await new Promise((r) => setTimeout(r, 50));
      expect(events.filter((e) => e.type === 'wake')).toEqual([]);
      expect(await store.runs.claim('w-other', 60_000)).toBeNull();

      // Queued behind the running run on its thread: pending, and the claimers are woken.
      const b = await store.runs.create(newRun(t1.thread_id, { multitask_strategy: 'enqueue' }), claim);
      expect(b).toMatchObject({ status: 'pending', attempt: 0, worker_id: null });
      await expect.poll(() => events.some((e) => e.type === 'wake')).toBe(true);

      // A delayed run is not claimed early.
      const t2 = await thread();
      const d = await store.runs.create(newRun(t2.thread_id, { delay_ms: 60_000 }), claim);
      expect(d.status).toBe('pending');

      // Another run waits to be claimed (b, once a is done): claims go oldest first, so a new run does not jump it.
      expect(await store.runs.finish(a.run_id, 'w-create', { status: 'success' })).toBe(true);
      const t3 = await thread();
      const c = await store.runs.create(newRun(t3.thread_id), claim);
      expect(c.status).toBe('pending');
      expect((await store.runs.claim('w-other', 60_000))?.run_id).toBe(b.run_id);
      expect((await store.runs.claim('w-other', 60_000))?.run_id).toBe(c.run_id);

      // Without a claim, a create never claims.
      const t4 = await thread();
      expect((await store.runs.create(newRun(t4.thread_id))).status).toBe('pending');
      for (const id of [b.run_id, c.run_id]) await store.runs.finish(id, 'w-other', { status: 'success' });
      await store.runs.cancel(t2.thread_id, d.run_id, 'interrupt');
    } finally {
      off();
    }
  });

  it(`${factory.name}: finishAndClaim ends the run and claims what a claim would take next`, async (ctx) => {
    const finishAndClaim = store.runs.finishAndClaim?.bind(store.runs);
    if (!finishAndClaim) return ctx.skip();
    while (await store.runs.claim('drain', 60_000)) {
      /* drained */
    }
    const t1 = await thread();
    const t2 = await thread();
    const a = await store.runs.create(newRun(t1.thread_id));
    const queued = await store.runs.create(newRun(t1.thread_id, { multitask_strategy: 'enqueue' }));
    expect((await store.runs.claim('w', 60_000))?.run_id).toBe(a.run_id);
    const c = await store.runs.create(newRun(t2.thread_id));
    expect((await store.runs.claim('w', 60_000))?.run_id).toBe(c.run_id);
    const other = await store.runs.create(newRun((await thread()).thread_id));

    // a's end frees its thread: the run queued behind it is the oldest claimable, before `other`.
    const first = await finishAndClaim(a.run_id, 'w', { status: 'success', values: { n: 1 } }, 60_000);
    expect(first.finished).toBe(true);
    expect(first.next).toMatchObject({ run_id: queued.run_id, status: 'running', worker_id: 'w', attempt: 1 });
    expect(await store.runs.get(t1.thread_id, a.run_id)).toMatchObject({ status: 'success' });
    expect(await store.threads.get(t1.thread_id)).toMatchObject({ status: 'busy', values: { n: 1 } });

    // Not this worker's run: nothing is ended, the slot still takes the next run.
    const stolen = await finishAndClaim(c.run_id, 'someone-else', { status: 'success' }, 60_000);
    expect(stolen).toMatchObject({ finished: false, next: { run_id: other.run_id, worker_id: 'someone-else' } });
    expect((await store.runs.get(t2.thread_id, c.run_id))?.status).toBe('running');

    // Nothing left to claim.
    const last = await finishAndClaim(c.run_id, 'w', { status: 'success' }, 60_000);
    expect(last).toEqual({ finished: true, next: null });
    for (const [id, w] of [
      [queued.run_id, 'w'],
      [other.run_id, 'someone-else'],
    ] as const)
      await store.runs.finish(id, w, { status: 'success' });
  });

  it(`${factory.name}: heartbeat keeps the lease; release gives the run back without using an attempt`, async () => {
    while (await store.runs.claim('drain', 60_000)) {
      /* drained */
    }
    const t = await thread();
    const r = await store.runs.create(newRun(t.thread_id));
    await store.runs.claim('w', 60_000);
    expect(await store.runs.heartbeat('w', [r.run_id], 60_000)).toEqual([r.run_id]);
    expect(await store.runs.heartbeat('other', [r.run_id], 60_000)).toEqual([]);
    await store.runs.release('w', [r.run_id]);
    expect(await store.runs.get(t.thread_id, r.run_id)).toMatchObject({ status: 'pending', attempt: 0 });
    await expect(store.runs.delete(t.thread_id, randomUUID())).rejects.toBeInstanceOf(NotFoundError);
    await store.runs.claim('w', 60_000);
    await expect(store.runs.delete(t.thread_id, r.run_id)).rejects.toBeInstanceOf(ConflictError);
  });
});

// Two processes on one database: a run created by one is claimed by the other, also after that one's claims
// found nothing (its claim short-cut wakes up on the NOTIFY).
describe('postgres: claims across two stores', () => {
  let db: Awaited<ReturnType<typeof createTestDatabase>>;
  let a: Storage;
  let b: Storage;
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
    expect(await a.runs.claim('wa', 60_000)).toBeNull();
    const t = await b.threads.create({ thread_id: randomUUID(), metadata: {} }, 'raise');
    const r = await b.runs.create(newRun(t.thread_id));
    await expect
      .poll(async () => (await a.runs.claim('wa', 60_000))?.run_id, { timeout: 5_000, interval: 20 })
      .toBe(r.run_id);
    const r2 = await b.runs.create(newRun(t.thread_id, { multitask_strategy: 'enqueue' }));
    expect(await a.runs.claim('wa', 60_000)).toBeNull();
    // Finished in store b (e.g. the sweeper there): store a hears run_done with a queued run and claims it.
    expect(await b.runs.finish(r.run_id, 'wa', { status: 'success' })).toBe(true);
    await expect
      .poll(async () => (await a.runs.claim('wa', 60_000))?.run_id, { timeout: 5_000, interval: 20 })
      .toBe(r2.run_id);
  });

  it('two processes racing with creates that claim, claims and finishes that claim run every run once, one per thread at a time', async () => {
    while ((await a.runs.claim('drain', 60_000)) || (await b.runs.claim('drain', 60_000))) {
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
    const execute = async (worker: string, store: Storage, run: RunRecord | null): Promise<void> => {
      while (run) {
        if (running.has(run.thread_id)) overlap ||= `${run.run_id} started while ${running.get(run.thread_id)} ran`;
        running.set(run.thread_id, run.run_id);
        started.push(run.run_id);
        await new Promise((r) => setTimeout(r, Math.random() * 5));
        running.delete(run.thread_id);
        const { finished, next } = await store.runs.finishAndClaim!(run.run_id, worker, { status: 'success' }, 60_000);
        expect(finished).toBe(true);
        run = next;
      }
    };
    const work: Array<Promise<void>> = [];
    for (let i = 0; i < 60; i++) {
      const { store, worker } = stores[i % 2]!;
      const t = threads[i % threads.length]!;
      const r = await store.runs.create(newRun(t.thread_id, { multitask_strategy: 'enqueue' }), {
        workerId: worker,
        leaseMs: 60_000,
      });
      created.add(r.run_id);
      if (r.status === 'running') work.push(execute(worker, store, r));
      // Claimers of both processes look as well (what a wake-up makes them do).
      if (i % 3 === 0)
        for (const s of stores)
          work.push(s.store.runs.claim(s.worker, 60_000).then((x) => execute(s.worker, s.store, x)));
    }
    // Whatever is still queued gets claimed until none is left.
    for (;;) {
      await Promise.all(work.splice(0));
      const more = await Promise.all(stores.map((s) => s.store.runs.claim(s.worker, 60_000)));
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
    const r = await b.runs.create(newRun(t.thread_id));
    const events: string[] = [];
    const unsubscribe = a.subscribe((e) => events.push(e.type));
    // Another process holds the thread row (a write that sends no NOTIFY): the claim skips it.
    const locker = new pg.Client({ connectionString: db.url });
    await locker.connect();
    try {
      await locker.query('BEGIN');
      await locker.query('SELECT 1 FROM agentplane.threads WHERE thread_id = $1 FOR UPDATE', [t.thread_id]);
      expect(await a.runs.claim('wa', 60_000)).toBeNull();
      events.length = 0;
      // The store nudges its engine to look again instead of waiting for the next event.
      await expect.poll(() => events.includes('wake'), { timeout: 3_000, interval: 10 }).toBe(true);
      await locker.query('COMMIT');
    } finally {
      await locker.end();
      unsubscribe();
    }
    await expect
      .poll(async () => (await a.runs.claim('wa', 60_000))?.run_id, { timeout: 3_000, interval: 20 })
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

describe.each(['embedded', 'postgres'] as const)('memory store items (%s)', (kind) => {
  let storage: Storage;
  let cleanup: () => Promise<void>;
  const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));
  const embedder = {
    embedDocuments: async (texts: string[]) => texts.map((t) => [t.includes('cat') ? 1 : 0, 1]),
    embedQuery: async (t: string) => [t.includes('cat') ? 1 : 0, 1],
  };
  const items = itemsConfig({
    ttl: { default_ttl: 0.04 },
    index: { embed: './unused.ts:e', dims: 2, fields: ['text'] },
  });

  beforeAll(async () => {
    if (kind === 'embedded') {
      const dir = mkdtempSync(join(tmpdir(), 'ap-as-items-'));
      storage = openEmbeddedStorage({ dataDir: dir, items, embedder });
      cleanup = async () => rmSync(dir, { recursive: true, force: true });
    } else {
      const db = await createTestDatabase();
      storage = await openPostgresStorage({ databaseUrl: db.url, poolSize: 4, items, embedder });
      cleanup = () => db.drop();
    }
  });
  afterAll(async () => {
    await storage?.close();
    await cleanup?.();
  });

  it('keeps created_at across puts and moves updated_at', async () => {
    await storage.items.put(['c', 'x'], 'k', { v: 1 }, { ttl: 60 });
    const a = await storage.items.get(['c', 'x'], 'k');
    await sleep(15);
    await storage.items.put(['c', 'x'], 'k', { v: 2 }, { ttl: 60 });
    const b = await storage.items.get(['c', 'x'], 'k');
    expect(b).toMatchObject({ namespace: ['c', 'x'], key: 'k', value: { v: 2 }, created_at: a!.created_at });
    expect(Date.parse(b!.updated_at)).toBeGreaterThan(Date.parse(a!.updated_at));
    await storage.items.delete(['c', 'x'], 'k');
    expect(await storage.items.get(['c', 'x'], 'k')).toBeNull();
  });

  it("applies the default TTL; a read restarts the item's own TTL; sweep deletes what expired", async () => {
    await storage.items.put(['ttl'], 'default', { v: 1 });
    await storage.items.put(['ttl'], 'refreshed', { v: 2 }, { ttl: 0.04 });
    await storage.items.put(['ttl'], 'kept', { v: 3 }, { ttl: 60 });
    await sleep(1_500);
    expect(await storage.items.get(['ttl'], 'refreshed')).not.toBeNull();
    await sleep(1_500);
    // 3 s after the put (TTL 2.4 s): only the refreshed one (and the long one) are still there.
    expect(await storage.items.get(['ttl'], 'default')).toBeNull();
    expect(await storage.items.get(['ttl'], 'refreshed', { refresh_ttl: false })).not.toBeNull();
    await sleep(1_500);
    expect(await storage.items.get(['ttl'], 'refreshed')).toBeNull();
    expect(await storage.items.sweep()).toBe(2);
    expect((await storage.items.search({ namespace_prefix: ['ttl'], limit: 10, offset: 0 })).map((i) => i.key)).toEqual(
      ['kept'],
    );
  }, 20_000);

  it("is the BaseStore graphs get, with LangGraph's namespace checks", async () => {
    await storage.items.store.put(['g'], 'a', { text: 'a cat' });
    await storage.items.store.put(['g'], 'b', { text: 'a dog' });
    expect((await storage.items.get(['g'], 'a'))?.value).toEqual({ text: 'a cat' });
    expect((await storage.items.store.get(['g'], 'b'))?.value).toEqual({ text: 'a dog' });
    expect((await storage.items.store.search(['g'], { filter: { text: 'a dog' } })).map((i) => i.key)).toEqual(['b']);
    expect(await storage.items.store.listNamespaces({ prefix: ['g'] })).toEqual([['g']]);
    await expect(storage.items.store.put(['a.b'], 'k', {})).rejects.toThrow(/periods/);
    await expect(storage.items.store.put(['langgraph'], 'k', {})).rejects.toThrow(/langgraph/);
    await storage.items.store.delete(['g'], 'a');
    expect(await storage.items.get(['g'], 'a')).toBeNull();
  });

  it('searches by meaning when it can (Postgres: only with pgvector)', async () => {
    await storage.items.put(['s'], 'dog', { text: 'dog' }, { ttl: 60 });
    await storage.items.put(['s'], 'cat', { text: 'cat' }, { ttl: 60 });
    const found = await storage.items.search({ namespace_prefix: ['s'], query: 'cat?', limit: 10, offset: 0 });
    if (storage.items.semantic) {
      expect(found[0]).toMatchObject({ key: 'cat' });
      expect(found[0]!.score).toBeGreaterThan(found[1]!.score!);
    } else {
      expect(kind).toBe('postgres');
      expect(found.map((i) => i.score ?? null)).toEqual([null, null]);
    }
  });
});

describe.each([embeddedFactory, postgresFactory])('assistant versions (%o)', (makeFactory) => {
  const factory = makeFactory();
  let store: Storage;
  beforeAll(async () => {
    store = await factory.open();
  });
  afterAll(async () => {
    await store?.close();
    await factory.cleanup();
  });

  const base = { graph_id: 'g', config: {}, context: {}, metadata: { team: 'a' }, name: 'v1', description: null };

  it('create is version 1, each patch adds one; listVersions is newest first and filters by metadata', async () => {
    const id = randomUUID();
    await store.assistants.create({ assistant_id: id, ...base }, 'raise');
    expect((await store.assistants.patch(id, { name: 'v2', metadata: { stage: 'beta' } })).version).toBe(2);
    expect((await store.assistants.patch(id, { name: 'v3', config: { recursion_limit: 5 } })).version).toBe(3);
    const versions = await store.assistants.listVersions(id, { limit: 10, offset: 0 });
    expect(versions.map((v) => [v.version, v.name])).toEqual([
      [3, 'v3'],
      [2, 'v2'],
      [1, 'v1'],
    ]);
    expect(versions[0]).toMatchObject({
      assistant_id: id,
      graph_id: 'g',
      config: { recursion_limit: 5 },
      metadata: { team: 'a', stage: 'beta' },
    });
    expect(Date.parse(versions[2]!.created_at)).toBeGreaterThan(0);
    expect(
      (await store.assistants.listVersions(id, { metadata: { stage: 'beta' }, limit: 10, offset: 0 })).map(
        (v) => v.version,
      ),
    ).toEqual([3, 2]);
    expect((await store.assistants.listVersions(id, { limit: 1, offset: 1 })).map((v) => v.version)).toEqual([2]);
  });

  it('setLatest brings an earlier version back; the next patch is newest + 1', async () => {
    const id = randomUUID();
    await store.assistants.create({ assistant_id: id, ...base }, 'raise');
    await store.assistants.patch(id, { name: 'v2', config: { x: 1 } });
    const back = await store.assistants.setLatest(id, 1);
    expect(back).toMatchObject({ version: 1, name: 'v1', config: {} });
    expect(await store.assistants.get(id)).toMatchObject({ version: 1, name: 'v1' });
    expect((await store.assistants.patch(id, { name: 'v3' })).version).toBe(3);
    await expect(store.assistants.setLatest(id, 9)).rejects.toBeInstanceOf(NotFoundError);
    await expect(store.assistants.setLatest(randomUUID(), 1)).rejects.toBeInstanceOf(NotFoundError);
    await expect(store.assistants.listVersions(randomUUID(), { limit: 10, offset: 0 })).rejects.toBeInstanceOf(
      NotFoundError,
    );
  });

  it('system assistants have a version; deleting an assistant deletes its versions', async () => {
    const id = randomUUID();
    await store.assistants.upsertSystem({ assistant_id: id, ...base, metadata: { created_by: 'system' } });
    await store.assistants.upsertSystem({ assistant_id: id, ...base, metadata: { created_by: 'system', again: true } });
    expect(
      (await store.assistants.listVersions(id, { limit: 10, offset: 0 })).map((v) => [v.version, v.metadata]),
    ).toEqual([[1, { created_by: 'system', again: true }]]);
    await store.assistants.delete(id);
    await store.assistants.create({ assistant_id: id, ...base }, 'raise');
    expect((await store.assistants.listVersions(id, { limit: 10, offset: 0 })).map((v) => v.version)).toEqual([1]);
  });
});

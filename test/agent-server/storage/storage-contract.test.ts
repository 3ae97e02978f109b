// One contract, both adapters: the routes and the run engine rely on exactly these behaviours. The Postgres-only
// parts (two stores on one database, the checkpointer) are in storage-postgres.test.ts; the memory store's items
// and the assistant versions in storage-items-versions.test.ts.
import { randomUUID } from 'node:crypto';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import pg from 'pg';
import type { StorageEvent } from '../../../src/agent-server/storage/types.ts';
import type { EngineStorage } from '../../../src/agent-server/storage/ports/run-queue.ts';
import { ConflictError, NotFoundError } from '../../../src/lib/errors.ts';
import { sqliteStatementPrototype, wrapMethod, type Fn } from '../helpers/spy.ts';
import { ASSISTANT, embeddedFactory, newRun, postgresFactory } from '../helpers/storage-factories.ts';

describe.each([embeddedFactory, postgresFactory])('storage contract (%o)', (makeFactory) => {
  const factory = makeFactory();
  let store: EngineStorage;

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
    const r = await store.queue.create(newRun(t.thread_id));
    expect(r).toMatchObject({ status: 'pending', attempt: 0, multitask_strategy: 'reject' });
    expect((await store.threads.get(t.thread_id))?.status).toBe('busy');
    expect((await store.threads.get(t.thread_id))?.metadata).toMatchObject({ graph_id: 'g' });
    await expect(store.queue.create(newRun(t.thread_id))).rejects.toThrow(/already running a task/);
    expect(await store.runs.list(t.thread_id, { limit: 10, offset: 0 })).toHaveLength(1);
    await expect(store.queue.create(newRun(randomUUID()))).rejects.toBeInstanceOf(NotFoundError);
    const created = await store.queue.create(newRun(randomUUID(), { if_not_exists: 'create' }));
    expect((await store.threads.get(created.thread_id))?.status).toBe('busy');
  });

  // A long conversation keeps megabytes in the thread's values; a new run on it needs only its metadata. Every
  // statement either store sends while the run is created is looked at: none reads the thread's values.
  it(`${factory.name}: creating a run on a thread does not read the thread's values`, async () => {
    const t = await thread();
    while (await store.queue.claim('drain', 60_000)) {
      // runs other tests left queued
    }
    const first = await store.queue.create(newRun(t.thread_id));
    const claimed = await store.queue.claim('w1', 60_000);
    expect(claimed?.run_id).toBe(first.run_id);
    const values = {
      messages: Array.from({ length: 50 }, (_, i) => ({ type: 'human', content: 'x'.repeat(4000), id: `${i}` })),
    };
    await store.queue.finish(first.run_id, 'w1', { status: 'success', values });
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
      await store.queue.create(newRun(t.thread_id, { multitask_strategy: 'enqueue' }));
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
    while (await store.queue.claim('drain', 60_000)) {
      /* drained */
    }
    const t1 = await thread();
    const t2 = await thread();
    const a = await store.queue.create(newRun(t1.thread_id));
    const b = await store.queue.create(newRun(t1.thread_id, { multitask_strategy: 'enqueue' }));
    const c = await store.queue.create(newRun(t2.thread_id));
    const claimed = await Promise.all([1, 2, 3, 4].map(() => store.queue.claim('w1', 60_000)));
    const ids = claimed.filter((x) => x !== null).map((x) => x!.run_id);
    expect(ids.sort()).toEqual([a.run_id, c.run_id].sort());
    expect(claimed.find((x) => x?.run_id === a.run_id)).toMatchObject({
      status: 'running',
      attempt: 1,
      worker_id: 'w1',
    });
    expect(await store.queue.finish(a.run_id, 'someone-else', { status: 'success' })).toBe(false);
    expect(await store.queue.finish(a.run_id, 'w1', { status: 'success', values: { n: 1 } })).toBe(true);
    // b is still pending on t1.
    expect((await store.threads.get(t1.thread_id))?.status).toBe('busy');
    const next = await store.queue.claim('w1', 60_000);
    expect(next?.run_id).toBe(b.run_id);
    await store.queue.finish(b.run_id, 'w1', { status: 'success', values: { n: 2 } });
    const t1After = await store.threads.get(t1.thread_id);
    expect(t1After).toMatchObject({ status: 'idle', values: { n: 2 } });
    await store.queue.finish(c.run_id, 'w1', { status: 'error', error: { error: 'Boom', message: 'x' } });
    expect(await store.threads.get(t2.thread_id)).toMatchObject({ status: 'error' });
    expect(await store.runs.get(t2.thread_id, c.run_id)).toMatchObject({ status: 'error', error: { error: 'Boom' } });
    await store.queue.finish(c.run_id, 'w1', { status: 'success' });
    expect((await store.runs.get(t2.thread_id, c.run_id))?.status).toBe('error');
  });

  it(`${factory.name}: interrupted outcome leaves the thread interrupted`, async () => {
    while (await store.queue.claim('drain', 60_000)) {
      /* drained */
    }
    const t = await thread();
    const r = await store.queue.create(newRun(t.thread_id));
    expect((await store.queue.claim('w', 60_000))?.run_id).toBe(r.run_id);
    await store.queue.finish(r.run_id, 'w', { status: 'success', interrupted: true, values: { a: 1 } });
    expect(await store.threads.get(t.thread_id)).toMatchObject({ status: 'interrupted', values: { a: 1 } });
  });

  it(`${factory.name}: values given as JSON text (valuesJson) are the thread's values`, async () => {
    while (await store.queue.claim('drain', 60_000)) {
      /* drained */
    }
    const t = await thread();
    const r = await store.queue.create(newRun(t.thread_id));
    expect((await store.queue.claim('w', 60_000))?.run_id).toBe(r.run_id);
    const valuesJson = JSON.stringify({ messages: [{ type: 'human', content: 'hi' }], n: 3 });
    await store.queue.finish(r.run_id, 'w', { status: 'success', valuesJson });
    expect(await store.threads.get(t.thread_id)).toMatchObject({ status: 'idle', values: JSON.parse(valuesJson) });
  });

  it(`${factory.name}: multitask interrupt flags the running run and tells its worker; pending runs end at once`, async () => {
    while (await store.queue.claim('drain', 60_000)) {
      /* drained */
    }
    const events: StorageEvent[] = [];
    const off = store.subscribe((e) => events.push(e));
    const t = await thread();
    const running = await store.queue.create(newRun(t.thread_id));
    await store.queue.claim('w', 60_000);
    const queued = await store.queue.create(newRun(t.thread_id, { multitask_strategy: 'enqueue' }));
    const newer = await store.queue.create(newRun(t.thread_id, { multitask_strategy: 'interrupt' }));
    expect((await store.runs.get(t.thread_id, queued.run_id))?.status).toBe('interrupted');
    expect((await store.queue.cancelRequests([running.run_id])).get(running.run_id)).toBe('interrupt');
    await expect.poll(() => events.some((e) => e.type === 'cancel' && e.run_id === running.run_id)).toBe(true);
    // The newer run waits until the cancelled one is off the thread.
    expect(await store.queue.claim('w2', 60_000)).toBeNull();
    await store.queue.finish(running.run_id, 'w', { status: 'interrupted' });
    expect((await store.queue.claim('w2', 60_000))?.run_id).toBe(newer.run_id);
    off();
  });

  it(`${factory.name}: cancel of a pending run ends it; rollback deletes it`, async () => {
    while (await store.queue.claim('drain', 60_000)) {
      /* drained */
    }
    const t = await thread();
    const r = await store.queue.create(newRun(t.thread_id));
    expect((await store.runs.cancel(t.thread_id, r.run_id, 'interrupt')).status).toBe('interrupted');
    expect((await store.threads.get(t.thread_id))?.status).toBe('idle');
    const r2 = await store.queue.create(newRun(t.thread_id));
    await store.runs.cancel(t.thread_id, r2.run_id, 'rollback');
    expect(await store.runs.get(t.thread_id, r2.run_id)).toBeNull();
    await expect(store.runs.cancel(t.thread_id, randomUUID(), 'interrupt')).rejects.toBeInstanceOf(NotFoundError);
  });

  it(`${factory.name}: sweep requeues runs whose lease expired and gives up after the last attempt`, async () => {
    while (await store.queue.claim('drain', 60_000)) {
      /* drained */
    }
    const t = await thread();
    const r = await store.queue.create(newRun(t.thread_id));
    for (let attempt = 1; attempt <= 3; attempt++) {
      const c = await store.queue.claim('dead-worker', 1);
      expect(c).toMatchObject({ run_id: r.run_id, attempt });
      await new Promise((res) => setTimeout(res, 20));
      const swept = await store.queue.sweep(3);
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
    const results = await Promise.allSettled(Array.from({ length: 6 }, () => store.queue.create(newRun(t.thread_id))));
    expect(results.filter((r) => r.status === 'fulfilled')).toHaveLength(1);
    for (const r of results) if (r.status === 'rejected') expect(r.reason).toBeInstanceOf(ConflictError);
    expect(await store.runs.list(t.thread_id, { limit: 10, offset: 0 })).toHaveLength(1);
    // A stateless-style create makes the thread; enqueue behind a busy thread is accepted.
    const fresh = randomUUID();
    await store.queue.create(newRun(fresh, { if_not_exists: 'create' }));
    await store.queue.create(newRun(fresh, { if_not_exists: 'create', multitask_strategy: 'enqueue' }));
    expect(await store.runs.list(fresh, { limit: 10, offset: 0 })).toHaveLength(2);
  });

  it(`${factory.name}: a delayed run is claimed once due, though claims in between found nothing`, async () => {
    while (await store.queue.claim('drain', 60_000)) {
      /* drained */
    }
    const t = await thread();
    const r = await store.queue.create(newRun(t.thread_id, { delay_ms: 300 }));
    expect(await store.queue.claim('w', 60_000)).toBeNull();
    expect(await store.queue.claim('w', 60_000)).toBeNull();
    await expect
      .poll(async () => (await store.queue.claim('w', 60_000))?.run_id, { timeout: 5_000, interval: 50 })
      .toBe(r.run_id);
    await store.queue.finish(r.run_id, 'w', { status: 'success' });
  });

  it(`${factory.name}: a run queued behind a finishing one is claimable right after finish`, async () => {
    while (await store.queue.claim('drain', 60_000)) {
      /* drained */
    }
    const t = await thread();
    const a = await store.queue.create(newRun(t.thread_id));
    expect((await store.queue.claim('w', 60_000))?.run_id).toBe(a.run_id);
    const b = await store.queue.create(newRun(t.thread_id, { multitask_strategy: 'enqueue' }));
    expect(await store.queue.claim('w', 60_000)).toBeNull();
    await store.queue.finish(a.run_id, 'w', { status: 'success' });
    expect((await store.queue.claim('w', 60_000))?.run_id).toBe(b.run_id);
    await store.queue.finish(b.run_id, 'w', { status: 'success' });
  });

  it(`${factory.name}: create with a claim takes the run only when a claim would take it next`, async () => {
    while (await store.queue.claim('drain', 60_000)) {
      /* drained */
    }
    const events: StorageEvent[] = [];
    const off = store.subscribe((e) => events.push(e));
    const claim = { workerId: 'w-create', leaseMs: 60_000 };
    try {
      // Nothing waits: claimed in the create, nobody woken, the lease is the worker's.
      const t1 = await thread();
      const a = await store.queue.create(newRun(t1.thread_id), claim);
      expect(a).toMatchObject({ status: 'running', attempt: 1, worker_id: 'w-create' });
      expect(await store.runs.get(t1.thread_id, a.run_id)).toMatchObject({ status: 'running', worker_id: 'w-create' });
      expect((await store.threads.get(t1.thread_id))?.status).toBe('busy');
      expect(await store.queue.heartbeat('w-create', [a.run_id], 60_000)).toEqual([a.run_id]);
      await new Promise((r) => setTimeout(r, 50));
      expect(events.filter((e) => e.type === 'wake')).toEqual([]);
      expect(await store.queue.claim('w-other', 60_000)).toBeNull();

      // Queued behind the running run on its thread: pending, and the claimers are woken.
      const b = await store.queue.create(newRun(t1.thread_id, { multitask_strategy: 'enqueue' }), claim);
      expect(b).toMatchObject({ status: 'pending', attempt: 0, worker_id: null });
      await expect.poll(() => events.some((e) => e.type === 'wake')).toBe(true);

      // A delayed run is not claimed early.
      const t2 = await thread();
      const d = await store.queue.create(newRun(t2.thread_id, { delay_ms: 60_000 }), claim);
      expect(d.status).toBe('pending');

      // Another run waits to be claimed (b, once a is done): claims go oldest first, so a new run does not jump it.
      expect(await store.queue.finish(a.run_id, 'w-create', { status: 'success' })).toBe(true);
      const t3 = await thread();
      const c = await store.queue.create(newRun(t3.thread_id), claim);
      expect(c.status).toBe('pending');
      expect((await store.queue.claim('w-other', 60_000))?.run_id).toBe(b.run_id);
      expect((await store.queue.claim('w-other', 60_000))?.run_id).toBe(c.run_id);

      // Without a claim, a create never claims.
      const t4 = await thread();
      expect((await store.queue.create(newRun(t4.thread_id))).status).toBe('pending');
      for (const id of [b.run_id, c.run_id]) await store.queue.finish(id, 'w-other', { status: 'success' });
      await store.runs.cancel(t2.thread_id, d.run_id, 'interrupt');
    } finally {
      off();
    }
  });

  it(`${factory.name}: finishAndClaim ends the run and claims what a claim would take next`, async () => {
    const finishAndClaim = store.queue.finishAndClaim.bind(store.queue);
    while (await store.queue.claim('drain', 60_000)) {
      /* drained */
    }
    const t1 = await thread();
    const t2 = await thread();
    const a = await store.queue.create(newRun(t1.thread_id));
    const queued = await store.queue.create(newRun(t1.thread_id, { multitask_strategy: 'enqueue' }));
    expect((await store.queue.claim('w', 60_000))?.run_id).toBe(a.run_id);
    const c = await store.queue.create(newRun(t2.thread_id));
    expect((await store.queue.claim('w', 60_000))?.run_id).toBe(c.run_id);
    const other = await store.queue.create(newRun((await thread()).thread_id));

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
      await store.queue.finish(id, w, { status: 'success' });
  });

  it(`${factory.name}: heartbeat keeps the lease; release gives the run back without using an attempt`, async () => {
    while (await store.queue.claim('drain', 60_000)) {
      /* drained */
    }
    const t = await thread();
    const r = await store.queue.create(newRun(t.thread_id));
    await store.queue.claim('w', 60_000);
    expect(await store.queue.heartbeat('w', [r.run_id], 60_000)).toEqual([r.run_id]);
    expect(await store.queue.heartbeat('other', [r.run_id], 60_000)).toEqual([]);
    await store.queue.release('w', [r.run_id]);
    expect(await store.runs.get(t.thread_id, r.run_id)).toMatchObject({ status: 'pending', attempt: 0 });
    await expect(store.runs.delete(t.thread_id, randomUUID())).rejects.toBeInstanceOf(NotFoundError);
    await store.queue.claim('w', 60_000);
    await expect(store.runs.delete(t.thread_id, r.run_id)).rejects.toBeInstanceOf(ConflictError);
  });
});

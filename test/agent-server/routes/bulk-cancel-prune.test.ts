// The platform's bulk endpoints against a real server process on both stores: POST /runs/cancel (by thread and run
// ids, or by status; 204), POST /threads/prune (delete, or keep_latest: only the latest checkpoint of each
// namespace stays and the thread carries on from it; {pruned_count}), and the Location header of POST /runs/wait.
// Under custom auth (the owner-only fixture) a caller cancels and prunes only what is theirs.
import { randomUUID } from 'node:crypto';
import { Client, type Checkpoint, type ThreadState } from '@langchain/langgraph-sdk';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startServerOnStore } from '../helpers/store-server.ts';

const CONFIG = new URL('../fixtures/bulk-ops/langgraph.json', import.meta.url).pathname;
const AUTH_CONFIG = new URL('../fixtures/bulk-ops-auth/langgraph.json', import.meta.url).pathname;
const LONG = 60_000;

const sdk = (url: string, token?: string) =>
  new Client({
    apiUrl: url,
    apiKey: null,
    defaultHeaders: token ? { Authorization: `Bearer ${token}` } : {},
    callerOptions: { maxRetries: 0 },
  });

function post(url: string, path: string, body: unknown, token?: string) {
  return fetch(`${url}${path}`, {
    method: 'POST',
    headers: { 'content-type': 'application/json', ...(token ? { Authorization: `Bearer ${token}` } : {}) },
    body: JSON.stringify(body),
  });
}

const detailOf = async (res: Response) => ((await res.json()) as { detail: string }).detail;

async function until<T>(what: string, fn: () => Promise<T>, ok: (v: T) => boolean, ms = 20_000): Promise<T> {
  const end = Date.now() + ms;
  for (;;) {
    const v = await fn();
    if (ok(v)) return v;
    if (Date.now() > end) throw new Error(`timed out waiting for ${what}: ${JSON.stringify(v)}`);
    await new Promise((r) => setTimeout(r, 50));
  }
}

/** A run of the slow graph that is running (it waits a minute unless cancelled). */
async function runningRun(client: Client, threadId: string, mark = 'long') {
  const run = await client.runs.create(threadId, 'slow', { input: { delay_ms: LONG, mark } });
  await until(
    `run ${run.run_id} running`,
    () => client.runs.get(threadId, run.run_id),
    (r) => r.status === 'running',
  );
  return run;
}

/** A run queued behind the thread's running one. */
const pendingRun = (client: Client, threadId: string, mark = 'queued') =>
  client.runs.create(threadId, 'slow', { input: { delay_ms: 0, mark }, multitaskStrategy: 'enqueue' });

const statusOf = async (client: Client, threadId: string, runId: string) =>
  (await client.runs.get(threadId, runId)).status;

describe.each(['embedded', 'postgres'] as const)('bulk run cancel, thread prune, wait Location (%s)', (store) => {
  let url: string;
  let client: Client;
  let close: () => Promise<void>;

  beforeAll(async () => {
    const s = await startServerOnStore(store, ['--config', CONFIG]);
    url = s.server.url;
    close = s.close;
    client = sdk(url);
  });
  afterAll(async () => close?.());

  it('POST /runs/cancel {thread_id, run_ids}: 204, running and pending runs interrupted, a finished one left as it is', async () => {
    const t = await client.threads.create();
    const done = await client.runs.create(t.thread_id, 'slow', { input: { delay_ms: 0, mark: 'done' } });
    await client.runs.join(t.thread_id, done.run_id);
    const running = await runningRun(client, t.thread_id);
    const queued = await pendingRun(client, t.thread_id);

    // All or nothing: a run that is not one of the thread's is a 404 and nothing is cancelled.
    const missing = await post(url, '/runs/cancel', {
      thread_id: t.thread_id,
      run_ids: [running.run_id, randomUUID()],
    });
    expect(missing.status).toBe(404);
    expect(await statusOf(client, t.thread_id, running.run_id)).toBe('running');
    expect(await statusOf(client, t.thread_id, queued.run_id)).toBe('pending');
    const otherThread = await post(url, '/runs/cancel', { thread_id: randomUUID(), run_ids: [running.run_id] });
    expect(otherThread.status).toBe(404);
    expect(await detailOf(otherThread)).toMatch(/Thread not found/);

    const res = await post(url, '/runs/cancel', {
      thread_id: t.thread_id,
      run_ids: [done.run_id, running.run_id, queued.run_id],
    });
    expect(res.status).toBe(204);
    expect(await res.text()).toBe('');
    expect(await statusOf(client, t.thread_id, queued.run_id)).toBe('interrupted');
    await client.runs.join(t.thread_id, running.run_id);
    expect(await statusOf(client, t.thread_id, running.run_id)).toBe('interrupted');
    expect(await statusOf(client, t.thread_id, done.run_id)).toBe('success');
    await until(
      'thread idle',
      () => client.threads.get(t.thread_id),
      (x) => x.status === 'idle',
    );
  });

  it('POST /runs/cancel?action=rollback deletes a pending run; malformed bodies and actions are 422', async () => {
    const t = await client.threads.create();
    const running = await runningRun(client, t.thread_id);
    const queued = await pendingRun(client, t.thread_id);
    const res = await post(url, '/runs/cancel?action=rollback', { thread_id: t.thread_id, run_ids: [queued.run_id] });
    expect(res.status).toBe(204);
    await expect(client.runs.get(t.thread_id, queued.run_id)).rejects.toThrow(/404/);
    expect(await statusOf(client, t.thread_id, running.run_id)).toBe('running');

    for (const body of [
      {},
      { thread_id: t.thread_id },
      { run_ids: [running.run_id] },
      { status: 'all', thread_id: t.thread_id, run_ids: [running.run_id] },
      { status: 'done' },
      { thread_id: 'not-a-uuid', run_ids: [running.run_id] },
    ]) {
      const bad = await post(url, '/runs/cancel', body);
      expect(bad.status, JSON.stringify(body)).toBe(422);
    }
    const badAction = await post(url, '/runs/cancel?action=explode', { status: 'all' });
    expect(badAction.status).toBe(422);
    expect(await statusOf(client, t.thread_id, running.run_id)).toBe('running');

    await client.runs.cancel(t.thread_id, running.run_id, true);
  });

  it('POST /runs/cancel {status}: pending, then running runs of every thread', async () => {
    const a = await client.threads.create();
    const b = await client.threads.create();
    const ra = await runningRun(client, a.thread_id, 'a');
    const qa = await pendingRun(client, a.thread_id, 'a2');
    const rb = await runningRun(client, b.thread_id, 'b');

    expect((await post(url, '/runs/cancel', { status: 'pending' })).status).toBe(204);
    expect(await statusOf(client, a.thread_id, qa.run_id)).toBe('interrupted');
    expect(await statusOf(client, a.thread_id, ra.run_id)).toBe('running');
    expect(await statusOf(client, b.thread_id, rb.run_id)).toBe('running');

    expect((await post(url, '/runs/cancel', { status: 'running' })).status).toBe(204);
    await client.runs.join(a.thread_id, ra.run_id);
    await client.runs.join(b.thread_id, rb.run_id);
    expect(await statusOf(client, a.thread_id, ra.run_id)).toBe('interrupted');
    expect(await statusOf(client, b.thread_id, rb.run_id)).toBe('interrupted');

    const rc = await runningRun(client, a.thread_id, 'c');
    const qc = await pendingRun(client, a.thread_id, 'c2');
    expect((await post(url, '/runs/cancel', { status: 'all' })).status).toBe(204);
    await client.runs.join(a.thread_id, rc.run_id);
    expect(await statusOf(client, a.thread_id, rc.run_id)).toBe('interrupted');
    expect(await statusOf(client, a.thread_id, qc.run_id)).toBe('interrupted');
  });

  it('POST /runs/wait sends Location (the join on its thread) like the thread wait; streams send theirs', async () => {
    const res = await post(url, '/runs/wait', { assistant_id: 'counter', input: {}, on_completion: 'keep' });
    expect(res.status).toBe(200);
    expect(await res.json()).toEqual({ count: 11, steps: ['first', 'second'] });
    const contentLocation = res.headers.get('content-location');
    expect(contentLocation).toMatch(/^\/threads\/[0-9a-f-]{36}\/runs\/[0-9a-f-]{36}$/);
    expect(res.headers.get('location')).toBe(`${contentLocation}/join`);
    // The Location answers: joining there gives the run's result again.
    const again = await fetch(`${url}${res.headers.get('location')}`);
    expect(await again.json()).toEqual({ count: 11, steps: ['first', 'second'] });

    const t = await client.threads.create();
    const onThread = await post(url, `/threads/${t.thread_id}/runs/wait`, { assistant_id: 'counter', input: {} });
    expect(onThread.headers.get('location')).toBe(`${onThread.headers.get('content-location')}/join`);
    for (const path of ['/runs/stream', `/threads/${t.thread_id}/runs/stream`]) {
      const s = await post(url, path, { assistant_id: 'counter', input: {} });
      await s.text();
      expect(s.headers.get('content-location')).toMatch(/^\/threads\/[0-9a-f-]{36}\/runs\/[0-9a-f-]{36}$/);
      expect(s.headers.get('location')).toBe(`${s.headers.get('content-location')}/stream`);
    }
  });

  it('POST /threads/prune deletes the threads by default (runs and checkpoints too), busy ones included', async () => {
    const a = await client.threads.create();
    const b = await client.threads.create();
    await client.runs.wait(a.thread_id, 'counter', { input: {} });
    await client.runs.wait(b.thread_id, 'counter', { input: {} });
    const busy = await client.threads.create();
    const running = await runningRun(client, busy.thread_id);
    const keep = await client.threads.create();

    const res = await post(url, '/threads/prune', {
      thread_ids: [a.thread_id, b.thread_id, busy.thread_id, a.thread_id, randomUUID()],
    });
    expect(res.status).toBe(200);
    expect(await res.json()).toEqual({ pruned_count: 3 });
    for (const id of [a.thread_id, b.thread_id, busy.thread_id]) {
      await expect(client.threads.get(id)).rejects.toThrow(/404/);
      await expect(client.runs.list(id)).rejects.toThrow(/404/);
      await expect(client.threads.getState(id)).rejects.toThrow(/404/);
    }
    await expect(client.runs.get(busy.thread_id, running.run_id)).rejects.toThrow(/404/);
    expect((await client.threads.get(keep.thread_id)).thread_id).toBe(keep.thread_id);
    // The thread id is free again; nothing of the old thread comes back with it.
    await client.threads.create({ threadId: a.thread_id });
    expect(await client.threads.getHistory(a.thread_id)).toEqual([]);

    expect(await (await post(url, '/threads/prune', { thread_ids: [] })).json()).toEqual({ pruned_count: 0 });
    expect((await post(url, '/threads/prune', { thread_ids: [a.thread_id], strategy: 'all' })).status).toBe(422);
    expect((await post(url, '/threads/prune', {})).status).toBe(422);
  });

  it('keep_latest keeps only the latest checkpoint: same state, history of one, and the next run continues from it', async () => {
    const t = await client.threads.create();
    await client.runs.wait(t.thread_id, 'counter', { input: {} });
    await client.runs.wait(t.thread_id, 'counter', { input: {} });
    const before = await client.threads.getState(t.thread_id);
    expect(before.values).toEqual({ count: 22, steps: ['first', 'second', 'first', 'second'] });
    expect((await client.threads.getHistory(t.thread_id, { limit: 100 })).length).toBeGreaterThan(4);
    const untouched = await client.threads.create();
    await client.runs.wait(untouched.thread_id, 'counter', { input: {} });
    const untouchedHistory = await client.threads.getHistory(untouched.thread_id, { limit: 100 });

    const res = await post(url, '/threads/prune', { thread_ids: [t.thread_id], strategy: 'keep_latest' });
    expect(res.status).toBe(200);
    expect(await res.json()).toEqual({ pruned_count: 1 });

    const after = await client.threads.getState(t.thread_id);
    expect(after.values).toEqual(before.values);
    expect(after.checkpoint.checkpoint_id).toBe(before.checkpoint.checkpoint_id);
    expect(after.next).toEqual([]);
    expect(after.parent_checkpoint ?? null).toBeNull();
    const history = await client.threads.getHistory(t.thread_id, { limit: 100 });
    expect(history.map((s) => s.checkpoint.checkpoint_id)).toEqual([before.checkpoint.checkpoint_id]);
    expect((await client.threads.get(t.thread_id)).values).toEqual(before.values);
    expect((await client.runs.list(t.thread_id)).length).toBe(2);
    // Other threads keep their history.
    expect(await client.threads.getHistory(untouched.thread_id, { limit: 100 })).toEqual(untouchedHistory);

    const next = await client.runs.wait(t.thread_id, 'counter', { input: {} });
    expect(next).toEqual({ count: 33, steps: ['first', 'second', 'first', 'second', 'first', 'second'] });
    const grown = await client.threads.getHistory(t.thread_id, { limit: 100 });
    expect(grown.at(-1)!.checkpoint.checkpoint_id).toBe(before.checkpoint.checkpoint_id);
    expect(grown.length).toBeGreaterThan(1);
  });

  it('keep_latest prunes subgraph namespaces to their latest checkpoint too; the interrupted subgraph resumes', async () => {
    const t = await client.threads.create();
    await client.runs.wait(t.thread_id, 'review', { input: { topic: 'moths' } });
    const root = await client.threads.getState(t.thread_id, undefined, { subgraphs: true });
    const sub = root.tasks.find((k) => k.name === 'child')!.state as ThreadState;
    const ns = sub.checkpoint.checkpoint_ns;
    expect((await client.threads.getHistory(t.thread_id, { limit: 50 })).length).toBeGreaterThan(1);
    expect(
      (await client.threads.getHistory(t.thread_id, { limit: 50, checkpoint: { checkpoint_ns: ns } })).length,
    ).toBeGreaterThan(1);

    const res = await post(url, '/threads/prune', { thread_ids: [t.thread_id], strategy: 'keep_latest' });
    expect(await res.json()).toEqual({ pruned_count: 1 });

    const rootHistory = await client.threads.getHistory(t.thread_id, { limit: 50 });
    expect(rootHistory.map((s) => s.checkpoint.checkpoint_id)).toEqual([root.checkpoint.checkpoint_id]);
    const subHistory = await client.threads.getHistory(t.thread_id, { limit: 50, checkpoint: { checkpoint_ns: ns } });
    expect(subHistory.map((s) => s.checkpoint.checkpoint_id)).toEqual([sub.checkpoint.checkpoint_id]);
    const subAfter = await client.threads.getState(t.thread_id, { checkpoint_ns: ns } as Checkpoint);
    expect(subAfter.values).toEqual({ topic: 'moths', draft: 'draft about moths' });
    expect(subAfter.next).toEqual(['review']);
    const rootAfter = await client.threads.getState(t.thread_id);
    expect(rootAfter.next).toEqual(['child']);
    expect(rootAfter.tasks[0]!.interrupts).toEqual(root.tasks[0]!.interrupts);

    const out = await client.runs.wait(t.thread_id, 'review', { command: { resume: 'fine' } });
    expect(out).toEqual({ topic: 'moths', result: 'draft about moths (fine)' });
  });

  it('keep_latest on a thread with a run in flight is a 409 naming it, and prunes nothing', async () => {
    const idle = await client.threads.create();
    await client.runs.wait(idle.thread_id, 'counter', { input: {} });
    const historyBefore = await client.threads.getHistory(idle.thread_id, { limit: 100 });
    const busy = await client.threads.create();
    const running = await runningRun(client, busy.thread_id);

    const res = await post(url, '/threads/prune', {
      thread_ids: [idle.thread_id, busy.thread_id],
      strategy: 'keep_latest',
    });
    expect(res.status).toBe(409);
    const detail = await detailOf(res);
    expect(detail).toContain(busy.thread_id);
    expect(detail).not.toContain(idle.thread_id);
    expect(await client.threads.getHistory(idle.thread_id, { limit: 100 })).toEqual(historyBefore);
    expect(await statusOf(client, busy.thread_id, running.run_id)).toBe('running');

    await client.runs.cancel(busy.thread_id, running.run_id, true);
    const ok = await post(url, '/threads/prune', {
      thread_ids: [idle.thread_id, busy.thread_id],
      strategy: 'keep_latest',
    });
    expect(await ok.json()).toEqual({ pruned_count: 2 });
    expect((await client.threads.getHistory(idle.thread_id, { limit: 100 })).length).toBe(1);
  });
});

describe.each(['embedded', 'postgres'] as const)('bulk cancel and prune under custom auth (%s)', (store) => {
  let url: string;
  let alice: Client;
  let bob: Client;
  let reader: Client;
  let close: () => Promise<void>;

  beforeAll(async () => {
    const s = await startServerOnStore(store, ['--config', AUTH_CONFIG]);
    url = s.server.url;
    close = s.close;
    alice = sdk(url, 'token-alice');
    bob = sdk(url, 'token-bob');
    reader = sdk(url, 'token-reader');
  });
  afterAll(async () => close?.());

  it("a caller cancelling by status or by ids never touches another user's runs", async () => {
    const at = await alice.threads.create();
    const aRun = await runningRun(alice, at.thread_id, 'alice');
    const aQueued = await pendingRun(alice, at.thread_id, 'alice2');
    const bt = await bob.threads.create();
    const bRun = await runningRun(bob, bt.thread_id, 'bob');

    // Everything "all" reaches is bob's own.
    expect((await post(url, '/runs/cancel', { status: 'all' }, 'token-bob')).status).toBe(204);
    await bob.runs.join(bt.thread_id, bRun.run_id);
    expect(await statusOf(bob, bt.thread_id, bRun.run_id)).toBe('interrupted');
    expect(await statusOf(alice, at.thread_id, aRun.run_id)).toBe('running');
    expect(await statusOf(alice, at.thread_id, aQueued.run_id)).toBe('pending');

    // Alice's thread named outright is a 404 as if it did not exist, and so is her run put on bob's thread.
    const direct = await post(
      url,
      '/runs/cancel?action=rollback',
      { thread_id: at.thread_id, run_ids: [aRun.run_id, aQueued.run_id] },
      'token-bob',
    );
    expect(direct.status).toBe(404);
    expect(await detailOf(direct)).toBe(`Thread not found: ${at.thread_id}`);
    const smuggled = await post(url, '/runs/cancel', { thread_id: bt.thread_id, run_ids: [aRun.run_id] }, 'token-bob');
    expect(smuggled.status).toBe(404);
    expect((await post(url, '/runs/cancel', { status: 'pending' }, 'token-reader')).status).toBe(204);
    expect(await statusOf(alice, at.thread_id, aRun.run_id)).toBe('running');
    expect(await statusOf(alice, at.thread_id, aQueued.run_id)).toBe('pending');

    // Without a token nothing happens at all.
    expect((await post(url, '/runs/cancel', { status: 'all' })).status).toBe(401);

    // Alice cancels her own.
    const own = await post(
      url,
      '/runs/cancel',
      { thread_id: at.thread_id, run_ids: [aRun.run_id, aQueued.run_id] },
      'token-alice',
    );
    expect(own.status).toBe(204);
    await alice.runs.join(at.thread_id, aRun.run_id);
    expect(await statusOf(alice, at.thread_id, aRun.run_id)).toBe('interrupted');
    expect(await statusOf(alice, at.thread_id, aQueued.run_id)).toBe('interrupted');
  });

  it("a caller pruning never prunes, counts or reveals another user's threads", async () => {
    const a1 = await alice.threads.create();
    await alice.runs.wait(a1.thread_id, 'counter', { input: {} });
    const historyBefore = await alice.threads.getHistory(a1.thread_id, { limit: 100 });
    const a2 = await alice.threads.create();
    const aRun = await runningRun(alice, a2.thread_id, 'busy');
    const mine = await reader.threads.create().catch(() => null);
    expect(mine).toBeNull(); // the reader may not create threads: it owns nothing

    for (const strategy of ['delete', 'keep_latest'] as const) {
      const res = await post(
        url,
        '/threads/prune',
        { thread_ids: [a1.thread_id, a2.thread_id], strategy },
        'token-reader',
      );
      // keep_latest would be a 409 for alice's busy thread: the reader must not learn it exists.
      expect(res.status, strategy).toBe(200);
      expect(await res.json()).toEqual({ pruned_count: 0 });
    }
    // threads:delete is bob's handler's to refuse, as for DELETE /threads/{id}.
    const refused = await post(url, '/threads/prune', { thread_ids: [a1.thread_id] }, 'token-bob');
    expect(refused.status).toBe(418);
    expect((await post(url, '/threads/prune', { thread_ids: [a1.thread_id] })).status).toBe(401);

    expect(await alice.threads.getHistory(a1.thread_id, { limit: 100 })).toEqual(historyBefore);
    expect(await statusOf(alice, a2.thread_id, aRun.run_id)).toBe('running');

    await alice.runs.cancel(a2.thread_id, aRun.run_id, true);
    const own = await post(
      url,
      '/threads/prune',
      { thread_ids: [a1.thread_id, a2.thread_id], strategy: 'keep_latest' },
      'token-alice',
    );
    expect(await own.json()).toEqual({ pruned_count: 2 });
    expect((await alice.threads.getHistory(a1.thread_id, { limit: 100 })).length).toBe(1);
    const gone = await post(url, '/threads/prune', { thread_ids: [a1.thread_id] }, 'token-alice');
    expect(await gone.json()).toEqual({ pruned_count: 1 });
    await expect(alice.threads.get(a1.thread_id)).rejects.toThrow(/404/);
  });
});

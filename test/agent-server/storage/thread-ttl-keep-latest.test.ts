// Thread TTL with langgraph.json's strategy "keep_latest" (storage/thread-ttl.ts), end to end: real server processes
// on both stores, the real SDK. The fixture sets a default TTL of 2.4 s and sweeps every 0.3 s; expiry is observed
// by polling a thread's history until the sweep has pruned it to one checkpoint.
import { Client } from '@langchain/langgraph-sdk';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { ServerProc } from '../helpers/process.ts';
import { startServerOnStore, until, type StoreServer } from '../helpers/store-server.ts';

const CONFIG = new URL('../fixtures/thread-ttl-keep-latest/langgraph.json', import.meta.url).pathname;
const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

describe.concurrent.each(['embedded', 'postgres'] as const)('thread ttl keep_latest (%s)', (kind) => {
  let running: StoreServer | undefined;
  let server: ServerProc;
  let client: Client;

  beforeAll(async () => {
    running = await startServerOnStore(kind, ['--config', CONFIG, '--executor-threads', '0']);
    server = running.server;
    client = new Client({ apiUrl: server.url });
  }, 90_000);
  afterAll(async () => {
    await running?.close();
  });

  const exists = async (id: string) => (await fetch(`${server.url}/threads/${id}`)).status === 200;
  const history = async (id: string) =>
    (await client.threads.getHistory(id, { limit: 100 })).map((s) => s.checkpoint.checkpoint_id);

  it('keeps an idle thread, its runs and its latest checkpoint; new runs continue from it', async () => {
    const t = await client.threads.create();
    await client.runs.wait(t.thread_id, 'counter', { input: {} });
    await client.runs.wait(t.thread_id, 'counter', { input: {} });
    const before = await client.threads.getState(t.thread_id);
    expect(before.values).toEqual({ count: 22, steps: ['first', 'second', 'first', 'second'] });
    expect((await history(t.thread_id)).length).toBeGreaterThan(4);

    await until('the thread is pruned to one checkpoint', async () => (await history(t.thread_id)).length === 1);
    expect(await exists(t.thread_id)).toBe(true);
    expect(await history(t.thread_id)).toEqual([before.checkpoint.checkpoint_id]);
    const after = await client.threads.getState(t.thread_id);
    expect(after.values).toEqual(before.values);
    expect(after.next).toEqual([]);
    expect((await client.threads.get(t.thread_id)).values).toEqual(before.values);
    expect((await client.runs.list(t.thread_id)).length).toBe(2);

    // Idle: later sweeps leave it as it is (the prune does not count as an update, nor restart its ttl).
    const pruned = await client.threads.get(t.thread_id);
    await sleep(3_000);
    expect(await client.threads.get(t.thread_id)).toEqual(pruned);
    expect(await history(t.thread_id)).toEqual([before.checkpoint.checkpoint_id]);

    const next = await client.runs.wait(t.thread_id, 'counter', { input: {} });
    expect(next).toEqual({ count: 33, steps: ['first', 'second', 'first', 'second', 'first', 'second'] });
    const grown = await history(t.thread_id);
    expect(grown.at(-1)).toBe(before.checkpoint.checkpoint_id);
    expect(grown.length).toBeGreaterThan(1);
    // Updated by the run, it is pruned again once the ttl has passed since.
    await until('the thread is pruned again', async () => (await history(t.thread_id)).length === 1);
    expect(await history(t.thread_id)).toEqual([grown[0]]);
    expect((await client.threads.getState(t.thread_id)).values).toEqual(next);
  });

  it('never prunes a thread while a run is in flight on it; prunes it after the run', async () => {
    const t = await client.threads.create();
    await client.runs.wait(t.thread_id, 'sleeper', { input: { sleep_ms: 0 } });
    const run = await client.runs.create(t.thread_id, 'sleeper', { input: { sleep_ms: 6_000 } });
    await until(
      'the run has started',
      async () => (await client.runs.get(t.thread_id, run.run_id)).status !== 'pending',
    );
    const busyHistory = (await history(t.thread_id)).length;
    expect(busyHistory).toBeGreaterThan(1);
    // A thread created after the busy one is pruned: the ttl has run out for both.
    const witness = await client.threads.create();
    await client.runs.wait(witness.thread_id, 'sleeper', { input: { sleep_ms: 0 } });
    await until('a thread with the same ttl is pruned', async () => (await history(witness.thread_id)).length === 1);
    const during = await client.runs.get(t.thread_id, run.run_id);
    if (during.status === 'running') expect((await history(t.thread_id)).length).toBeGreaterThanOrEqual(busyHistory);
    await client.runs.join(t.thread_id, run.run_id);
    expect((await client.runs.get(t.thread_id, run.run_id)).status).toBe('success');
    await until('the thread is pruned after its run', async () => (await history(t.thread_id)).length === 1);
    expect(await exists(t.thread_id)).toBe(true);
    expect((await client.runs.list(t.thread_id)).length).toBe(2);
  });

  it('deletes threads whose own ttl has strategy delete, created or patched, and prunes the default ones', async () => {
    const patched = await client.threads.create();
    const plain = await client.threads.create();
    for (const t of [patched, plain]) await client.runs.wait(t.thread_id, 'counter', { input: {} });
    // Created last and left alone: its own ttl (0.6 s) may run out before any further request of a loaded machine.
    const own = await client.threads.create({ ttl: { ttl: 0.01, strategy: 'delete' } });
    await client.threads.update(patched.thread_id, { ttl: 0.01 });
    await until('the threads with a ttl of their own are deleted', async () => {
      return !(await exists(own.thread_id)) && !(await exists(patched.thread_id));
    });
    await until('the default thread is pruned', async () => (await history(plain.thread_id)).length === 1);
    expect(await exists(plain.thread_id)).toBe(true);
  });
});

// Thread TTL end to end (storage/thread-ttl.ts): real server processes on both stores, the real SDK. The fixture's
// langgraph.json sets a default TTL of 2.4 s and sweeps every 0.3 s, so expiry is observed by polling. The tests wait
// on the clock, each with threads of its own: both stores and all their tests run concurrently.
import { Client } from '@langchain/langgraph-sdk';
import pg from 'pg';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { ServerProc } from '../helpers/process.ts';
import { startServerOnStore, until, type StoreServer } from '../helpers/store-server.ts';

const CONFIG = new URL('../fixtures/thread-ttl/langgraph.json', import.meta.url).pathname;

describe.concurrent.each(['embedded', 'postgres'] as const)('thread ttl (%s)', (kind) => {
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

  /** Checkpoint rows of a thread, straight from Postgres (the API answers 404 for a deleted thread anyway). */
  async function checkpointRows(threadId: string): Promise<number> {
    const c = new pg.Client({ connectionString: running!.databaseUrl });
    await c.connect();
    try {
      const { rows } = await c.query('SELECT count(*)::int AS n FROM agentplane.checkpoints WHERE thread_id = $1', [
        threadId,
      ]);
      return rows[0].n as number;
    } finally {
      await c.end();
    }
  }

  it('deletes a thread, its runs and checkpoints once its own ttl has passed', async () => {
    const thread = await client.threads.create({ ttl: { ttl: 0.02, strategy: 'delete' } });
    const run = await client.runs.create(thread.thread_id, 'sleeper', { input: { sleep_ms: 0 } });
    await client.runs.join(thread.thread_id, run.run_id);
    expect((await client.threads.getState(thread.thread_id)).values).toMatchObject({ done: true });
    if (kind === 'postgres') expect(await checkpointRows(thread.thread_id)).toBeGreaterThan(0);
    await until('the thread is swept', async () => !(await exists(thread.thread_id)));
    expect((await fetch(`${server.url}/threads/${thread.thread_id}/state`)).status).toBe(404);
    expect((await fetch(`${server.url}/threads/${thread.thread_id}/runs/${run.run_id}`)).status).toBe(404);
    if (kind === 'postgres') expect(await checkpointRows(thread.thread_id)).toBe(0);
  });

  it("applies langgraph.json default_ttl to threads created without one, runs' own threads too", async () => {
    const plain = await client.threads.create();
    const viaRun = crypto.randomUUID();
    const run = await client.runs.create(viaRun, 'sleeper', { input: { sleep_ms: 0 }, ifNotExists: 'create' });
    await client.runs.join(viaRun, run.run_id);
    await until('both threads are swept', async () => !(await exists(plain.thread_id)) && !(await exists(viaRun)));
  });

  it('keeps a thread whose own ttl is longer than the default, and a PATCH ttl shortens it', async () => {
    const keep = await client.threads.create({ ttl: 1000 });
    const patched = await client.threads.create({ ttl: 1000 });
    const short = await client.threads.create({ ttl: 0.01 });
    await until('the short-lived thread is swept', async () => !(await exists(short.thread_id)));
    // The default TTL (2.4 s) has passed too once a thread created with it is gone.
    const probe = await client.threads.create();
    await until('a default-ttl thread created later is swept', async () => !(await exists(probe.thread_id)));
    expect(await exists(keep.thread_id)).toBe(true);
    expect(await exists(patched.thread_id)).toBe(true);
    await client.threads.update(patched.thread_id, { ttl: 0.01, metadata: { patched: true } });
    await until('the patched thread is swept', async () => !(await exists(patched.thread_id)));
    expect(await exists(keep.thread_id)).toBe(true);
  });

  it('never deletes a thread while a run is in flight on it; sweeps it after the run', async () => {
    const thread = await client.threads.create({ ttl: 0.01 });
    const run = await client.runs.create(thread.thread_id, 'sleeper', { input: { sleep_ms: 6_000 } });
    // A thread created after the busy one with the same short ttl is swept: the ttl has run out for both.
    const witness = await client.threads.create({ ttl: 0.01 });
    await until('a thread with the same ttl is swept', async () => !(await exists(witness.thread_id)));
    const during = await client.runs.get(thread.thread_id, run.run_id);
    if (during.status === 'pending' || during.status === 'running') expect(await exists(thread.thread_id)).toBe(true);
    await client.runs.join(thread.thread_id, run.run_id);
    expect((await client.runs.get(thread.thread_id, run.run_id)).status).toBe('success');
    await until('the thread is swept after its run', async () => !(await exists(thread.thread_id)));
  });

  it('refuses a bad ttl with 422 naming the field', async () => {
    for (const ttl of [-1, 0, { ttl: 5, strategy: 'keep' }, 'soon', 1e12]) {
      const res = await fetch(`${server.url}/threads`, {
        method: 'POST',
        headers: { 'content-type': 'application/json' },
        body: JSON.stringify({ ttl }),
      });
      expect(res.status).toBe(422);
      expect(JSON.stringify(await res.json())).toContain('ttl');
    }
  });
});

// Crons through the SDK against real agent-server processes: the API on the embedded store (records, bad input,
// restart survival), and on one Postgres shared by two replicas (each tick runs exactly once, a tick missed while
// no replica ran runs once on start). The tests mostly wait for ticks: the two stores run concurrently, and so do
// the Postgres tests, each on a database and replicas of its own; the embedded store's tests share one server and
// run one after the other.
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { Client, type Run } from '@langchain/langgraph-sdk';
import { afterAll, beforeAll, describe, it, type TestContext } from 'vitest';
import { FIXTURE_CONFIG } from '../helpers/harness.ts';
import { createTestDatabase } from '../helpers/pg.ts';
import { startServerProcess, type ServerProc } from '../helpers/process.ts';

const EVERY_SECOND = '* * * * * *';
const EVERY_2S = '*/2 * * * * *';

async function post(url: string, path: string, body: unknown): Promise<{ status: number; json: any }> {
  const res = await fetch(`${url}${path}`, {
    method: 'POST',
    headers: { 'content-type': 'application/json' },
    body: JSON.stringify(body),
  });
  return { status: res.status, json: await res.json().catch(() => null) };
}

/** Every run the crons of graph `graph` made, through the public API (ticks' threads are kept). */
async function cronRuns(client: Client, graph: string): Promise<Run[]> {
  const threads = await client.threads.search({ metadata: { graph_id: graph }, limit: 1000 });
  const runs: Run[] = [];
  for (const t of threads) runs.push(...(await client.runs.list(t.thread_id, { limit: 100 })));
  return runs.filter((r) => typeof r.metadata?.cron_id === 'string');
}

describe.concurrent('crons on the embedded store', { timeout: 120_000 }, () => {
  let dir: string;
  let server: ServerProc;
  let client: Client;

  const start = async () => {
    server = await startServerProcess(['--config', FIXTURE_CONFIG, '--data-dir', dir, '--cron-poll-ms', '200']);
    client = new Client({ apiUrl: server.url, callerOptions: { maxRetries: 0 } });
  };

  beforeAll(async () => {
    dir = mkdtempSync(join(tmpdir(), 'ap-as-crons-'));
    await start();
  });
  afterAll(async () => {
    await server?.stop();
    rmSync(dir, { recursive: true, force: true });
  });

  it.sequential('says so in /info', async ({ expect }) => {
    const info = (await (await fetch(`${server.url}/info`)).json()) as { flags: { crons: boolean } };
    expect(info.flags.crons).toBe(true);
  });

  it.sequential('refuses bad input with 422 naming the field', async ({ expect }) => {
    const bad = await post(server.url, '/runs/crons', { assistant_id: 'counter', schedule: 'every tuesday' });
    expect(bad.status).toBe(422);
    expect(bad.json.detail).toContain('"every tuesday"');
    const tz = await post(server.url, '/runs/crons', {
      assistant_id: 'counter',
      schedule: '0 9 * * *',
      timezone: 'Mars/Base',
    });
    expect(tz.status).toBe(422);
    expect(tz.json.detail).toContain('timezone');
    const hook = await post(server.url, '/runs/crons', {
      assistant_id: 'counter',
      schedule: '0 9 * * *',
      webhook: 'file:///etc/passwd',
    });
    expect(hook.status).toBe(422);
    expect(hook.json.detail).toContain('webhook');
    const end = await post(server.url, '/runs/crons', {
      assistant_id: 'counter',
      schedule: '0 9 * * *',
      end_time: 'soon',
    });
    expect(end.status).toBe(422);
    expect(end.json.detail).toContain('end_time');
    expect((await post(server.url, '/runs/crons', { assistant_id: 'nope', schedule: '0 9 * * *' })).status).toBe(404);
    const missingThread = await post(server.url, '/threads/00000000-0000-4000-8000-000000000000/runs/crons', {
      assistant_id: 'counter',
      schedule: '0 9 * * *',
    });
    expect(missingThread.status).toBe(404);
    expect((await fetch(`${server.url}/runs/crons/not-a-uuid`, { method: 'DELETE' })).status).toBe(422);
    expect(
      (await fetch(`${server.url}/runs/crons/00000000-0000-4000-8000-000000000000`, { method: 'DELETE' })).status,
    ).toBe(404);
  });

  it.sequential('creates, searches, counts, updates and deletes crons', async ({ expect }) => {
    const thread = await client.threads.create();
    const a = await client.crons.create('counter', { schedule: '0 9 * * *', metadata: { team: 'a' } });
    const b = await client.crons.createForThread(thread.thread_id, 'counter', {
      schedule: '30 8 * * 1',
      input: { count: 1 },
    });
    expect(a).toMatchObject({
      schedule: '0 9 * * *',
      thread_id: null,
      enabled: true,
      on_run_completed: 'delete',
      metadata: { team: 'a' },
    });
    expect(a.next_run_date).toMatch(/T09:00:00/);
    expect(b).toMatchObject({ thread_id: thread.thread_id, payload: { input: { count: 1 } } });
    expect(new Date(b.next_run_date!).getUTCDay()).toBe(1);

    expect(await client.crons.count({ threadId: thread.thread_id })).toBe(1);
    const found = await client.crons.search({ assistantId: 'counter', limit: 100 });
    expect(found.map((c) => c.cron_id)).toEqual(expect.arrayContaining([a.cron_id, b.cron_id]));
    const picked = await client.crons.search({ threadId: thread.thread_id, select: ['cron_id', 'schedule'] });
    expect(picked).toEqual([{ cron_id: b.cron_id, schedule: '30 8 * * 1' }]);

    const off = await client.crons.update(a.cron_id, { enabled: false, schedule: '15 10 * * *' });
    expect(off).toMatchObject({ enabled: false, schedule: '15 10 * * *' });
    expect(off.next_run_date).toMatch(/T10:15:00/);
    expect((await client.crons.search({ enabled: false, limit: 100 })).map((c) => c.cron_id)).toContain(a.cron_id);
    const badPatch = await fetch(`${server.url}/runs/crons/${a.cron_id}`, {
      method: 'PATCH',
      headers: { 'content-type': 'application/json' },
      body: JSON.stringify({ schedule: '99 * * * *' }),
    });
    expect(badPatch.status).toBe(422);
    expect(((await badPatch.json()) as { detail: string }).detail).toContain('"99 * * * *"');

    await client.crons.delete(a.cron_id);
    await client.crons.delete(b.cron_id);
    expect(await client.crons.count()).toBe(0);
  });

  it.sequential(
    'runs a stateless cron on a new thread each tick, keeps or deletes the thread, and survives a restart',
    async ({ expect }) => {
      const kept = await client.crons.create('counter', {
        schedule: EVERY_SECOND,
        onRunCompleted: 'keep',
        input: { count: 0 },
      });
      await expect
        .poll(async () => (await cronRuns(client, 'counter')).filter((r) => r.status === 'success').length, {
          timeout: 30_000,
          interval: 300,
        })
        .toBeGreaterThanOrEqual(2);
      const runs = (await cronRuns(client, 'counter')).filter((r) => r.metadata?.cron_id === kept.cron_id);
      // One run per thread: a new thread each tick.
      expect(new Set(runs.map((r) => r.thread_id)).size).toBe(runs.length);
      const state = await client.threads.getState<{ count: number }>(
        runs.find((r) => r.status === 'success')!.thread_id,
      );
      expect(state.values.count).toBe(11);
      await client.crons.update(kept.cron_id, { enabled: false });

      // on_run_completed delete (the default): the tick's thread goes once its run has ended.
      // Runs that take 1.5 s, so the test sees their threads before they go.
      const deleting = await client.crons.create('ledger', {
        schedule: EVERY_SECOND,
        input: { i: 1, sleep_ms: 1_500 },
      });
      const seen = new Set<string>();
      await expect
        .poll(
          async () => {
            for (const t of await client.threads.search({ metadata: { graph_id: 'ledger' }, limit: 1000 })) {
              const [r] = await client.runs.list(t.thread_id, { limit: 1 });
              if (r?.metadata?.cron_id === deleting.cron_id) seen.add(t.thread_id);
            }
            return seen.size;
          },
          { timeout: 30_000, interval: 100 },
        )
        .toBeGreaterThanOrEqual(1);
      await client.crons.update(deleting.cron_id, { enabled: false });
      for (const id of seen) {
        await expect.poll(async () => (await client.threads.search({ ids: [id] })).length, { timeout: 30_000 }).toBe(0);
      }

      // A thread cron keeps running on its thread after the server restarts.
      const thread = await client.threads.create();
      const onThread = await client.crons.createForThread(thread.thread_id, 'counter', {
        schedule: EVERY_SECOND,
        multitaskStrategy: 'enqueue',
        input: { count: 0 },
      });
      await server.stop();
      await start();
      expect((await client.crons.search({ threadId: thread.thread_id }))[0]?.cron_id).toBe(onThread.cron_id);
      await expect
        .poll(
          async () =>
            (await client.runs.list(thread.thread_id, { limit: 100 })).filter((r) => r.status === 'success').length,
          { timeout: 30_000, interval: 300 },
        )
        .toBeGreaterThanOrEqual(2);
      // Deleting the thread ends its cron.
      await client.threads.delete(thread.thread_id);
      await expect
        .poll(async () => (await client.crons.search({ threadId: thread.thread_id })).length, { timeout: 30_000 })
        .toBe(0);
    },
  );
});

describe.concurrent('crons on Postgres with two replicas', { timeout: 180_000 }, () => {
  /** A database of the test's own; its replicas are killed when the test ends, failed or not. */
  const setup = async ({ onTestFinished }: TestContext) => {
    const db = await createTestDatabase();
    const procs: ServerProc[] = [];
    onTestFinished(async () => {
      for (const p of procs.splice(0)) await p.kill9();
      await db.drop();
    });
    return async () => {
      const p = await startServerProcess([
        '--config',
        FIXTURE_CONFIG,
        '--database-url',
        db.url,
        '--cron-poll-ms',
        '100',
      ]);
      procs.push(p);
      return p;
    };
  };

  const clientOf = (p: ServerProc) => new Client({ apiUrl: p.url, callerOptions: { maxRetries: 0 } });

  it('runs each tick exactly once across replicas', async (ctx) => {
    const { expect } = ctx;
    const start = await setup(ctx);
    const [a, b] = await Promise.all([start(), start()]);
    const client = clientOf(a);
    const cron = await client.crons.create('ledger', { schedule: EVERY_2S, onRunCompleted: 'keep', input: { i: 1 } });
    // Both replicas poll every 100 ms: each would fire every tick if claims were not exclusive.
    await expect
      .poll(async () => new Set((await cronRuns(client, 'ledger')).map((r) => r.metadata?.cron_tick)).size, {
        timeout: 60_000,
        interval: 500,
      })
      .toBeGreaterThanOrEqual(5);
    await client.crons.delete(cron.cron_id);
    // The last tick's run may still be queued: both replicas work the queue off.
    await expect
      .poll(async () => (await cronRuns(client, 'ledger')).every((r) => r.status === 'success'), { timeout: 60_000 })
      .toBe(true);
    const runs = await cronRuns(client, 'ledger');
    const ticks = runs.map((r) => String(r.metadata?.cron_tick));
    expect(new Set(ticks).size).toBe(runs.length);
    for (const tick of ticks) expect(new Date(tick).getUTCSeconds() % 2).toBe(0);
    await Promise.all([a.stop(), b.stop()]);
  });

  it('fires ticks missed while no replica ran once on start, not once per missed tick', async (ctx) => {
    const { expect } = ctx;
    const start = await setup(ctx);
    const first = await start();
    const client = clientOf(first);
    const cron = await client.crons.create('counter', {
      schedule: EVERY_SECOND,
      onRunCompleted: 'keep',
      input: { count: 0 },
    });
    const own = async (c: Client) => (await cronRuns(c, 'counter')).filter((r) => r.metadata?.cron_id === cron.cron_id);
    await expect
      .poll(async () => (await own(client)).length, { timeout: 30_000, interval: 200 })
      .toBeGreaterThanOrEqual(1);
    await first.stop();
    const stoppedAt = Date.now();
    // About five ticks pass with no replica running.
    await new Promise((r) => setTimeout(r, 5_500));
    const restartAt = Date.now();
    const again = await start();
    await expect
      .poll(async () => (await own(clientOf(again))).filter((r) => Date.parse(r.created_at) > restartAt).length, {
        timeout: 30_000,
        interval: 200,
      })
      .toBeGreaterThanOrEqual(3);
    await clientOf(again).crons.delete(cron.cron_id);
    const late = (await own(clientOf(again))).filter((r) => Date.parse(r.created_at) > stoppedAt);
    // Runs made after the restart for ticks due before it: exactly one.
    const missed = late.filter((r) => Date.parse(String(r.metadata?.cron_tick)) < restartAt);
    expect(missed).toHaveLength(1);
    await again.stop();
  });
});

// The process's Postgres connections (--postgres-pool-max-size, LANGGRAPH_POSTGRES_POOL_MAX_SIZE): a real server
// process on a budget of two (one connection for the HTTP thread, one for the executor thread) takes a burst of
// everything at once (runs waited on by streams and joins, an interrupt and its resume, a cancel, state reads and
// updates, history, searches, deletes) and finishes all of it: with one connection per pool, any code that held a
// connection while asking its pool for another would hang here. It never opens more than its budget, as
// pg_stat_activity shows it (the pools name themselves in application_name).
import pg from 'pg';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { Client } from '@langchain/langgraph-sdk';
import { createTestDatabase } from '../../helpers/pg.ts';
import { startServerProcess, type ServerProc } from '../../helpers/process.ts';
import { EXECUTOR_APPLICATION, HTTP_APPLICATION } from '../../../../src/agent-server/storage/postgres/index.ts';

const CONFIG = new URL('../../../fixtures/agent-server/langgraph.json', import.meta.url).pathname;

describe('a Postgres connection budget of two (postgres)', { timeout: 120_000 }, () => {
  let db: Awaited<ReturnType<typeof createTestDatabase>>;
  let server: ServerProc;
  let watcher: pg.Client;
  beforeAll(async () => {
    db = await createTestDatabase();
    server = await startServerProcess(
      [
        ...['--config', CONFIG, '--database-url', db.url, '--executor-threads', '1', '--jobs-per-worker', '4'],
        ...['--log-level', 'debug'],
      ],
      { LANGGRAPH_POSTGRES_POOL_MAX_SIZE: '2', PGAPPNAME: '' },
    );
    // The executor thread starts with the first run, and runs execute on the HTTP thread until it has loaded the
    // graphs: the burst waits for it.
    const sdk = new Client({ apiUrl: server.url });
    for (let i = 0; i < 300 && !server.output().includes('"msg":"executor thread ready"'); i++) {
      await sdk.runs.wait(null, 'counter', { input: { count: 0 } });
      await new Promise((r) => setTimeout(r, 100));
    }
    expect(server.output()).toContain('"msg":"executor thread ready"');
    watcher = new pg.Client({ connectionString: db.url });
    await watcher.connect();
  });
  afterAll(async () => {
    await watcher?.end();
    await server?.stop();
    await db?.drop();
  });

  /** The server's pooled connections now, by application_name. */
  async function pooled(): Promise<Record<string, number>> {
    const { rows } = await watcher.query(
      `SELECT application_name AS app, count(*)::int AS n FROM pg_stat_activity
        WHERE datname = current_database() AND pid <> pg_backend_pid() GROUP BY 1`,
    );
    return Object.fromEntries(rows.map((r: { app: string; n: number }) => [r.app, r.n]));
  }

  it('finishes a burst of every kind of request, on at most one connection per pool', async () => {
    const seen: Record<string, number>[] = [];
    let watching = true;
    const sampling = (async () => {
      while (watching) {
        seen.push(await pooled());
        await new Promise((r) => setTimeout(r, 10));
      }
    })();
    const sdk = new Client({ apiUrl: server.url });
    const counterRuns = Array.from({ length: 12 }, async (_, i) => {
      const t = await sdk.threads.create();
      if (i % 3 === 0) {
        const events: string[] = [];
        for await (const e of sdk.runs.stream(t.thread_id, 'counter', { input: { count: i } })) events.push(e.event);
        expect(events).toContain('values');
      } else {
        const run = await sdk.runs.create(t.thread_id, 'counter', { input: { count: i } });
        expect(await sdk.runs.join(t.thread_id, run.run_id)).toMatchObject({ count: i + 11 });
      }
      const state = await sdk.threads.getState(t.thread_id);
      expect(state.values).toMatchObject({ count: i + 11, steps: ['first', 'second'] });
      expect((await sdk.threads.getHistory(t.thread_id)).length).toBeGreaterThan(1);
      await sdk.threads.updateState(t.thread_id, { values: { count: 100 }, asNode: 'second' });
      expect((await sdk.threads.getState(t.thread_id)).values).toMatchObject({ count: i + 111 });
      if (i % 4 === 0) await sdk.threads.delete(t.thread_id);
    });
    const interrupted = (async () => {
      const t = await sdk.threads.create();
      await sdk.runs.wait(t.thread_id, 'hitl', { input: { question: 'name?' } });
      expect((await sdk.threads.getState(t.thread_id)).next).toEqual(['ask']);
      const resumed = await sdk.runs.wait(t.thread_id, 'hitl', { command: { resume: 'Ada' } });
      expect(resumed).toMatchObject({ answer: 'Ada', prepared: true });
    })();
    const cancelled = (async () => {
      const t = await sdk.threads.create();
      const run = await sdk.runs.create(t.thread_id, 'slow', { input: { delay_ms: 30_000 } });
      await new Promise((r) => setTimeout(r, 300));
      await sdk.runs.cancel(t.thread_id, run.run_id, true);
      expect((await sdk.runs.get(t.thread_id, run.run_id)).status).toBe('interrupted');
    })();
    const searches = (async () => {
      for (let i = 0; i < 10; i++) {
        await sdk.threads.search({ limit: 5 });
        await sdk.assistants.search({ graphId: 'counter' });
      }
    })();
    await Promise.all([...counterRuns, interrupted, cancelled, searches]);
    watching = false;
    await sampling;

    expect(seen.length).toBeGreaterThan(10);
    const most = (app: string) => Math.max(...seen.map((s) => s[app] ?? 0));
    expect(most(HTTP_APPLICATION)).toBe(1);
    expect(most(EXECUTOR_APPLICATION)).toBe(1);
  });
});

// A join on one replica of a run that was created through it and waits in its queue (known there without a read),
// while another replica runs the run or deletes it: the run's values once the other replica ran it; a 404 once the
// other replica deleted it, also when the join comes right after the delete (before this replica may have heard the
// delete's NOTIFY) or was already waiting. Two real server processes on one Postgres database, one run at a time
// each.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createTestDatabase } from '../helpers/pg.ts';
import { EXECUTOR_THREAD, startServerProcess, type ServerProc } from '../helpers/process.ts';

const CONFIG = new URL('../../fixtures/agent-server/langgraph.json', import.meta.url).pathname;

async function call(p: ServerProc, method: string, path: string, body?: unknown) {
  const res = await fetch(`${p.url}${path}`, {
    method,
    headers: body === undefined ? {} : { 'content-type': 'application/json' },
    body: body === undefined ? undefined : JSON.stringify(body),
  });
  const text = (await res.text()).trim();
  return { status: res.status, body: text ? JSON.parse(text) : null };
}

describe('join of a run queued on its replica, run or deleted by another (postgres)', { timeout: 120_000 }, () => {
  let db: Awaited<ReturnType<typeof createTestDatabase>>;
  let a: ServerProc;
  let b: ServerProc;
  beforeAll(async () => {
    db = await createTestDatabase();
    const args = ['--config', CONFIG, '--database-url', db.url, '--jobs-per-worker', '1'];
    [a, b] = await Promise.all([
      startServerProcess([...EXECUTOR_THREAD, ...args]),
      startServerProcess([...EXECUTOR_THREAD, ...args]),
    ]);
  });
  afterAll(async () => {
    await Promise.all([a?.stop(), b?.stop()]);
    await db?.drop();
  });

  const newThread = async (p: ServerProc) => (await call(p, 'POST', '/threads', {})).body.thread_id as string;
  /** A slow run created through `p`, which takes its only slot (it is free), and its thread. */
  async function busy(p: ServerProc, ms: number) {
    const t = await newThread(p);
    const r = await call(p, 'POST', `/threads/${t}/runs`, { assistant_id: 'slow', input: { delay_ms: ms } });
    expect(r.status).toBe(200);
    return { t, runId: r.body.run_id as string };
  }
  const create = async (p: ServerProc, t: string, count: number) => {
    const r = await call(p, 'POST', `/threads/${t}/runs`, { assistant_id: 'counter', input: { count } });
    expect(r.status).toBe(200);
    expect(r.body.status).toBe('pending');
    return r.body.run_id as string;
  };

  it('a run queued on A and run by B: the join on A answers its values', async () => {
    const slow = await busy(a, 2_000);
    const t = await newThread(a);
    const runId = await create(a, t, 1);
    const joined = await call(a, 'GET', `/threads/${t}/runs/${runId}/join`);
    expect(joined.status).toBe(200);
    expect(joined.body).toEqual({ count: 12, steps: ['first', 'second'] });
    expect((await call(b, 'GET', `/threads/${t}/runs/${runId}`)).body.status).toBe('success');
    await call(a, 'GET', `/threads/${slow.t}/runs/${slow.runId}/join`);
  });

  it('a run queued on A and deleted through B: the join on A right after is a 404', async () => {
    // Both replicas busy, so the runs created through A stay queued.
    const slowA = await busy(a, 3_000);
    const slowB = await busy(b, 3_000);
    for (let i = 0; i < 5; i++) {
      const t = await newThread(a);
      const runId = await create(a, t, i);
      expect((await call(b, 'DELETE', `/threads/${t}/runs/${runId}`)).status).toBe(204);
      const joined = await call(a, 'GET', `/threads/${t}/runs/${runId}/join`);
      expect(joined.status).toBe(404);
      expect(JSON.stringify(joined.body)).toContain(runId);
    }
    // The join already waiting when B deletes the run: A took the run as existing without reading it, so the
    // run found gone at the end of the wait is a 404 too (the delete may have come before the join).
    const t = await newThread(a);
    const runId = await create(a, t, 9);
    const waiting = call(a, 'GET', `/threads/${t}/runs/${runId}/join`);
    await new Promise((r) => setTimeout(r, 200));
    expect((await call(b, 'DELETE', `/threads/${t}/runs/${runId}`)).status).toBe(204);
    expect((await waiting).status).toBe(404);
    await call(a, 'GET', `/threads/${slowA.t}/runs/${slowA.runId}/join`);
    await call(b, 'GET', `/threads/${slowB.t}/runs/${slowB.runId}/join`);
  });
});

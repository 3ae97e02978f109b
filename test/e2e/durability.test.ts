// Durability and scale on Postgres with real server processes: kill -9 mid-run, and two processes sharing
// one database (each run executed exactly once, order per thread preserved). Each test has a database and processes
// of its own; the two kill -9 tests, which mostly wait out leases, run at once, the 200-run one after them alone.
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { Client } from '@langchain/langgraph-sdk';
import { afterAll, beforeAll, describe, it, type TestContext } from 'vitest';
import { FIXTURE_CONFIG } from '../agent-server/helpers/harness.ts';
import { createTestDatabase } from '../agent-server/helpers/pg.ts';
import { EXECUTOR_THREAD, startServerProcess, type ServerProc } from '../agent-server/helpers/process.ts';

type Db = Awaited<ReturnType<typeof createTestDatabase>>;

function ledgerLines(file: string): Array<{ node: string; thread: string; run: string; i: number; pid: string }> {
  return readFileSync(file, 'utf8')
    .split('\n')
    .filter(Boolean)
    .map((l) => {
      const [node, thread, run, i, pid] = l.split(' ');
      return { node: node!, thread: thread!, run: run!, i: Number(i), pid: pid! };
    });
}

// Real processes and 200 graph runs: generous limits so a loaded CI machine does not fail them.
describe('durability on Postgres', { timeout: 180_000 }, () => {
  let dir: string;

  beforeAll(() => {
    dir = mkdtempSync(join(tmpdir(), 'ap-as-dur-'));
  });
  afterAll(() => {
    rmSync(dir, { recursive: true, force: true });
  });

  /** The test's own database; its processes are killed and the database dropped when the test ends. */
  async function setup({ onTestFinished }: TestContext) {
    const db: Db = await createTestDatabase();
    const procs: ServerProc[] = [];
    onTestFinished(async () => {
      for (const p of procs) await p.kill9();
      await db.drop();
    });
    return async (ledger: string, extra: string[] = []): Promise<ServerProc> => {
      const p = await startServerProcess(
        [...EXECUTOR_THREAD, '--config', FIXTURE_CONFIG, '--database-url', db.url, '--lease-secs', '2', ...extra],
        { LEDGER_FILE: ledger },
      );
      procs.push(p);
      return p;
    };
  }

  it.concurrent(
    'kill -9 with runs in flight: after a restart every run reaches a terminal status and no thread stays busy',
    async (ctx) => {
      const { expect } = ctx;
      const start = await setup(ctx);
      const ledger = join(dir, 'kill.ledger');
      writeFileSync(ledger, '');
      const a = await start(ledger);
      const client = new Client({ apiUrl: a.url, callerOptions: { maxRetries: 0 } });
      const runs: Array<{ thread_id: string; run_id: string }> = [];
      for (let k = 0; k < 6; k++) {
        const t = await client.threads.create();
        const r = await client.runs.create(t.thread_id, 'ledger', { input: { i: k, sleep_ms: 4_000 } });
        runs.push({ thread_id: t.thread_id, run_id: r.run_id });
      }
      // A second run queued behind one of them must survive too.
      const queued = await client.runs.create(runs[0]!.thread_id, 'ledger', {
        input: { i: 99 },
        multitaskStrategy: 'enqueue',
      });
      await expect
        .poll(() => ledgerLines(ledger).filter((l) => l.node === 'record').length, { timeout: 30_000 })
        .toBe(6);
      await a.kill9();

      // The restarted process finds the abandoned runs once their lease expires and runs them again.
      const b = await start(ledger);
      const c2 = new Client({ apiUrl: b.url, callerOptions: { maxRetries: 0 } });
      for (const r of runs) await c2.runs.join(r.thread_id, r.run_id);
      await c2.runs.join(runs[0]!.thread_id, queued.run_id);
      for (const r of [...runs, { thread_id: runs[0]!.thread_id, run_id: queued.run_id }]) {
        expect((await c2.runs.get(r.thread_id, r.run_id)).status).toBe('success');
        expect((await c2.threads.get(r.thread_id)).status).toBe('idle');
      }
      // Each abandoned run was started again by the new process; the queued one ran there once.
      const byB = ledgerLines(ledger).filter((l) => l.node === 'record' && l.pid === String(b.proc.pid));
      expect(new Set(byB.map((l) => l.run))).toEqual(new Set([...runs.map((r) => r.run_id), queued.run_id]));
      const state = await c2.threads.getState<{ seq: number[] }>(runs[0]!.thread_id);
      expect(state.values.seq).toEqual([0, 99]);
      await b.stop();
    },
  );

  it.concurrent(
    'kill -9 repeatedly: a run that keeps losing its worker ends in error after 3 attempts',
    async (ctx) => {
      const { expect } = ctx;
      const start = await setup(ctx);
      const ledger = join(dir, 'attempts.ledger');
      writeFileSync(ledger, '');
      let p = await start(ledger);
      let client = new Client({ apiUrl: p.url, callerOptions: { maxRetries: 0 } });
      const t = await client.threads.create();
      const r = await client.runs.create(t.thread_id, 'ledger', { input: { i: 1, sleep_ms: 60_000 } });
      for (let attempt = 1; attempt <= 3; attempt++) {
        await expect
          .poll(() => ledgerLines(ledger).filter((l) => l.run === r.run_id).length, { timeout: 30_000 })
          .toBe(attempt);
        await p.kill9();
        p = await start(ledger);
        client = new Client({ apiUrl: p.url, callerOptions: { maxRetries: 0 } });
      }
      await expect
        .poll(async () => (await client.runs.get(t.thread_id, r.run_id)).status, { timeout: 30_000 })
        .toBe('error');
      expect((await client.threads.get(t.thread_id)).status).toBe('error');
      const joined = (await client.runs.join(t.thread_id, r.run_id)) as Record<string, any>;
      expect(joined.__error__.error).toBe('WorkerLost');
      await p.stop();
    },
  );

  it('two processes, 200 runs over 20 threads with enqueue: each node runs exactly once per run, in order', async (ctx) => {
    const { expect } = ctx;
    const start = await setup(ctx);
    const ledger = join(dir, 'shared.ledger');
    writeFileSync(ledger, '');
    const [a, b] = await Promise.all([start(ledger), start(ledger)]);
    const clients = [a!, b!].map((p) => new Client({ apiUrl: p.url, callerOptions: { maxRetries: 0 } }));
    const threads = await Promise.all(Array.from({ length: 20 }, (_, k) => clients[k % 2]!.threads.create()));
    const created: Array<{ thread_id: string; run_id: string; i: number }> = [];
    // Per thread, runs are created in order i = 0..9, alternating the process that receives them.
    await Promise.all(
      threads.map(async (t, k) => {
        for (let i = 0; i < 10; i++) {
          const r = await clients[(k + i) % 2]!.runs.create(t.thread_id, 'ledger', {
            input: { i },
            multitaskStrategy: 'enqueue',
          });
          created.push({ thread_id: t.thread_id, run_id: r.run_id, i });
        }
      }),
    );
    await Promise.all(created.map((r, n) => clients[n % 2]!.runs.join(r.thread_id, r.run_id)));

    const lines = ledgerLines(ledger);
    expect(lines).toHaveLength(400);
    for (const node of ['record', 'confirm']) {
      const perRun = new Map<string, number>();
      for (const l of lines.filter((x) => x.node === node)) perRun.set(l.run, (perRun.get(l.run) ?? 0) + 1);
      expect(perRun.size).toBe(200);
      expect([...perRun.values()].every((n) => n === 1)).toBe(true);
    }
    // Both processes did work.
    expect(new Set(lines.map((l) => l.pid))).toEqual(new Set([String(a!.proc.pid), String(b!.proc.pid)]));
    for (const t of threads) {
      const order = lines.filter((l) => l.node === 'record' && l.thread === t.thread_id).map((l) => l.i);
      expect(order).toEqual([0, 1, 2, 3, 4, 5, 6, 7, 8, 9]);
      const state = await clients[0]!.threads.getState<{ seq: number[] }>(t.thread_id);
      expect(state.values.seq).toEqual([0, 1, 2, 3, 4, 5, 6, 7, 8, 9]);
      expect((await clients[1]!.threads.get(t.thread_id)).status).toBe('idle');
    }
    for (const r of created) expect((await clients[1]!.runs.get(r.thread_id, r.run_id)).status).toBe('success');

    // Cancel across processes: ask the process that is NOT executing the run.
    const t = await clients[0]!.threads.create();
    const long = await clients[0]!.runs.create(t.thread_id, 'ledger', { input: { i: 7, sleep_ms: 120_000 } });
    await expect.poll(() => ledgerLines(ledger).some((l) => l.run === long.run_id), { timeout: 30_000 }).toBe(true);
    const runner = ledgerLines(ledger).find((l) => l.run === long.run_id)!.pid;
    const other = runner === String(a!.proc.pid) ? clients[1]! : clients[0]!;
    await other.runs.cancel(t.thread_id, long.run_id, true);
    expect((await other.runs.get(t.thread_id, long.run_id)).status).toBe('interrupted');
    expect((await other.threads.get(t.thread_id)).status).toBe('idle');
    await Promise.all([a!.stop(), b!.stop()]);
  });
});

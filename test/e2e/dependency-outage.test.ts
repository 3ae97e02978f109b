// An agent server outlives its dependencies going away: a PostgreSQL server of the test's own is shut down under
// it (every connection gets 57P01, then refusals) and started again, and a Redis of its own is killed with -9 and
// started again. Meanwhile the process stays up, its requests answer 503 with Retry-After (not 500), and once the
// dependency is back it serves again by itself, with the run that was in flight finished exactly once.
import { spawn, type ChildProcess } from 'node:child_process';
import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { createServer } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { Client } from '@langchain/langgraph-sdk';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startThrowawayPostgres, type ThrowawayPostgres } from '../support/throwaway-postgres.ts';
import { hasTool } from '../support/system-tools.ts';
import { FIXTURE_CONFIG } from '../agent-server/helpers/harness.ts';
import { EXECUTOR_THREAD, startServerProcess, type ServerProc } from '../agent-server/helpers/process.ts';

const scratch = mkdtempSync(join(tmpdir(), 'ap-outage-'));
afterAll(() => rmSync(scratch, { recursive: true, force: true }));

async function until<T>(what: string, fn: () => Promise<T | undefined | false>, limitMs = 30_000): Promise<T> {
  const end = Date.now() + limitMs;
  for (;;) {
    const v = await fn().catch(() => undefined);
    if (v) return v;
    if (Date.now() > end) throw new Error(`gave up waiting for ${what}`);
    await new Promise((r) => setTimeout(r, 100));
  }
}

/** Lines of the ledger graph's file for one run and node: how often that node really executed. */
const executions = (ledger: string, runId: string, node: string) =>
  readFileSync(ledger, 'utf8')
    .split('\n')
    .filter((l) => l.startsWith(`${node} `) && l.split(' ')[2] === runId).length;

describe('PostgreSQL restarts under a running agent server', () => {
  let pgServer: ThrowawayPostgres;
  let server: ServerProc;
  const ledger = join(scratch, 'pg-ledger');
  beforeAll(async () => {
    pgServer = await startThrowawayPostgres();
    server = await startServerProcess(
      [
        ...EXECUTOR_THREAD,
        '--config',
        FIXTURE_CONFIG,
        '--database-url',
        pgServer.url,
        '--database-wait',
        '60',
        '--lease-secs',
        '10',
      ],
      { LEDGER_FILE: ledger },
    );
  }, 90_000);
  afterAll(async () => {
    await server?.stop();
    await pgServer?.stop();
  });

  it('answers 503 with Retry-After while it is down, and recovers by itself', async () => {
    const client = new Client({ apiUrl: server.url, callerOptions: { maxRetries: 0 } });
    const thread = await client.threads.create();
    const first = await client.runs.create(thread.thread_id, 'ledger', { input: { i: 1 } });
    await client.runs.join(thread.thread_id, first.run_id);
    // Every pool gets an idle connection the restart will break: ours, the memory store's, the checkpointer's.
    await client.store.putItem(['outage'], 'k', { v: 1 });
    expect((await client.store.getItem(['outage'], 'k'))?.value).toEqual({ v: 1 });
    // A run in flight across the outage.
    const inflight = await client.runs.create(thread.thread_id, 'ledger', { input: { i: 2, sleep_ms: 1_500 } });
    await until('the run to start', async () => executions(ledger, inflight.run_id, 'record') > 0);

    await pgServer.down();
    const down = await fetch(`${server.url}/threads/${thread.thread_id}`);
    expect(down.status).toBe(503);
    expect(Number(down.headers.get('retry-after'))).toBeGreaterThan(0);
    expect(((await down.json()) as { detail: string }).detail).toMatch(/database is unavailable/);
    const create = await fetch(`${server.url}/threads/${thread.thread_id}/runs`, {
      method: 'POST',
      headers: { 'content-type': 'application/json' },
      body: JSON.stringify({ assistant_id: 'ledger', input: { i: 3 } }),
    });
    expect(create.status).toBe(503);
    // The in-flight run's end cannot be stored now; the process waits instead of dying or failing the run.
    await new Promise((r) => setTimeout(r, 2_500));
    expect(server.proc.exitCode).toBeNull();
    expect((await fetch(`${server.url}/ok`)).status).toBe(200);

    const back = Date.now();
    await pgServer.up();
    await until('the thread to answer again', async () => {
      const res = await fetch(`${server.url}/threads/${thread.thread_id}`);
      return res.status === 200;
    });
    const recoveredMs = Date.now() - back;
    const done = await client.runs.join(thread.thread_id, inflight.run_id);
    expect(done).toMatchObject({ seq: [1, 2] });
    expect((await client.runs.get(thread.thread_id, inflight.run_id)).status).toBe('success');
    // Finished once: the result waited for the database instead of the run being executed again.
    expect(executions(ledger, inflight.run_id, 'confirm')).toBe(1);
    const after = await client.runs.create(thread.thread_id, 'ledger', { input: { i: 4 } });
    expect(await client.runs.join(thread.thread_id, after.run_id)).toMatchObject({ seq: [1, 2, 4] });
    expect((await client.store.getItem(['outage'], 'k'))?.value).toEqual({ v: 1 });
    expect(server.output()).not.toMatch(/Unhandled|uncaught/i);
    expect(recoveredMs).toBeLessThan(30_000);
  }, 90_000);

  it('survives its connections being terminated (57P01) while idle', async () => {
    const client = new Client({ apiUrl: server.url, callerOptions: { maxRetries: 0 } });
    await client.store.putItem(['outage'], 'k2', { v: 2 });
    const admin = await import('pg');
    const sql = new admin.default.Client({ connectionString: pgServer.url });
    await sql.connect();
    try {
      const { rowCount } = await sql.query(
        'SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE pid <> pg_backend_pid() AND backend_type = $1',
        ['client backend'],
      );
      expect(rowCount).toBeGreaterThan(0);
    } finally {
      await sql.end();
    }
    await new Promise((r) => setTimeout(r, 500));
    expect(server.proc.exitCode).toBeNull();
    const thread = await until('a thread to be created', () => client.threads.create());
    const run = await client.runs.create(thread.thread_id, 'ledger', { input: { i: 7 } });
    expect(await client.runs.join(thread.thread_id, run.run_id)).toMatchObject({ seq: [7] });
    expect((await client.store.getItem(['outage'], 'k2'))?.value).toEqual({ v: 2 });
  }, 60_000);
});

async function freePort(): Promise<number> {
  const srv = createServer();
  await new Promise<void>((r) => srv.listen(0, '127.0.0.1', r));
  const { port } = srv.address() as { port: number };
  await new Promise<void>((r) => srv.close(() => r()));
  return port;
}

const hasRedis = hasTool('redis-server', 'the Redis restart case of test/e2e/dependency-outage.test.ts');

describe.runIf(hasRedis)('Redis killed and restarted under a running agent server', () => {
  let redis: ChildProcess | undefined;
  let port = 0;
  let server: ServerProc;
  const startRedis = async () => {
    redis = spawn('redis-server', ['--port', String(port), '--bind', '127.0.0.1', '--save', '', '--appendonly', 'no'], {
      stdio: 'ignore',
    });
    await until('redis to answer', async () => {
      const { Redis } = await import('ioredis');
      const r = new Redis(`redis://127.0.0.1:${port}`, { lazyConnect: true, retryStrategy: () => null });
      r.on('error', () => undefined);
      try {
        await r.connect();
        return (await r.ping()) === 'PONG';
      } finally {
        r.disconnect();
      }
    });
  };
  beforeAll(async () => {
    port = await freePort();
    await startRedis();
    server = await startServerProcess([
      ...EXECUTOR_THREAD,
      '--config',
      FIXTURE_CONFIG,
      '--data-dir',
      join(scratch, 'redis-data'),
      '--redis-url',
      `redis://127.0.0.1:${port}`,
    ]);
  }, 90_000);
  afterAll(async () => {
    await server?.stop();
    redis?.kill('SIGKILL');
  });

  it('keeps running, answers 503 for what needs Redis, and streams again once it is back', async () => {
    const client = new Client({ apiUrl: server.url, callerOptions: { maxRetries: 0 } });
    const thread = await client.threads.create();
    const run = await client.runs.create(thread.thread_id, 'ledger', { input: { i: 1 } });
    await client.runs.join(thread.thread_id, run.run_id);

    const gone = new Promise((r) => redis!.once('exit', r));
    redis!.kill('SIGKILL');
    await gone;
    // Reading a run's stream needs Redis: a 503 before the stream starts, or a stream cut short (the client
    // reconnects with Last-Event-ID), never a 500 and never a stream that looks finished.
    const stream = await fetch(`${server.url}/threads/${thread.thread_id}/runs/${run.run_id}/stream`, {
      signal: AbortSignal.timeout(20_000),
    }).then(
      async (res) => {
        if (res.status === 503) expect(Number(res.headers.get('retry-after'))).toBeGreaterThan(0);
        const body = await res.text().catch(() => 'cut');
        return res.status === 200 && body !== 'cut' ? `complete: ${body}` : res.status === 200 ? 'cut' : res.status;
      },
      () => 'cut',
    );
    expect([503, 'cut']).toContain(stream);
    await new Promise((r) => setTimeout(r, 1_000));
    expect(server.proc.exitCode).toBeNull();

    await startRedis();
    const again = await until('a run to stream after Redis returned', async () => {
      const next = await client.runs.create(thread.thread_id, 'ledger', { input: { i: 2 } });
      const events: string[] = [];
      for await (const e of client.runs.joinStream(thread.thread_id, next.run_id)) events.push(e.event);
      return events.length > 0 && events;
    });
    expect(again).toContain('values');
    expect(server.proc.exitCode).toBeNull();
  }, 90_000);
});

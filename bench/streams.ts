// Stream benchmark (not a test): time to first token and tokens/s through a run's stream, read from the replica
// that executes the run and from another replica on the same Postgres database (the durable stream-event log in
// between), and what the log costs a short run's whole cycle; for each transport of the log: the Postgres table
// (default) and Redis Streams (--redis-url). Two real agent-server processes per transport, the real SDK, the
// fake chat model of test/fixtures/streams (one character per token, no sleep: what is measured is the server,
// not a model). The transports take turns, so changing background load hits both alike.
//
//   npm run bench -- --only streams        # ~3 minutes, writes bench/results/streams.md (part of npm run bench)
//   node --import tsx bench/streams.ts --samples 20 --tokens 4000 --no-write
import { randomBytes } from 'node:crypto';
import { writeFile } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { parseArgs } from 'node:util';
import { readFileSync } from 'node:fs';
import { Client } from '@langchain/langgraph-sdk';
import { Redis } from 'ioredis';
import pg from 'pg';
import { startServerProcess, type ServerProc } from '../test/agent-server/helpers/process.ts';

const root = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '..');
const CONFIG = path.join(root, 'test/fixtures/streams/langgraph.json');
const ADMIN_URL = process.env.BENCH_PG_ADMIN_URL ?? 'postgres://postgres@127.0.0.1:5432/postgres';
const REDIS_URL = process.env.BENCH_REDIS_URL ?? 'redis://127.0.0.1:6379';

type Transport = 'postgres' | 'redis';

/** CPU seconds (user + system, every thread) a process has used so far. */
const cpuSecs = (pid: number): number => {
  const stat = readFileSync(`/proc/${pid}/stat`, 'utf8');
  const f = stat.slice(stat.lastIndexOf(')') + 2).split(' ');
  return (Number(f[11]) + Number(f[12])) / 100;
};

async function redisAnswers(url: string): Promise<boolean> {
  const r = new Redis(url, { lazyConnect: true, maxRetriesPerRequest: 0, retryStrategy: () => null });
  r.on('error', () => undefined);
  try {
    await r.connect();
    return (await r.ping()) === 'PONG';
  } catch {
    return false;
  } finally {
    r.disconnect();
  }
}

const pct = (xs: number[], p: number) => {
  const s = [...xs].sort((a, b) => a - b);
  return s[Math.min(s.length - 1, Math.floor((p / 100) * s.length))]!;
};

/** Samples taken again because their run ended before its replica was seen (see measure). */
let redone = 0;

/** One run: created through `creator`, its stream joined on the executing replica or the other one. */
async function measure(
  procs: ServerProc[],
  sql: pg.Client,
  cross: boolean,
  text: string,
): Promise<{ ttftMs: number; tokens: number; tokensPerSec: number; executing: ServerProc }> {
  const creator = new Client({ apiUrl: procs[0]!.url, callerOptions: { maxRetries: 0 } });
  // Which replica executes a run (its worker id starts with the pid) is asked of the database, as few ms as it
  // takes. A short run can end before the first answer, and an ended run has no worker id any more: that sample
  // is dropped and taken again with a new run (it would have been read as a replay, not as a live stream anyway).
  for (let attempt = 1; ; attempt++) {
    const t = await creator.threads.create();
    const t0 = performance.now();
    const run = await creator.runs.create(t.thread_id, 'chat', {
      input: { text, messages: [{ role: 'user', content: 'go' }] },
      streamMode: ['messages-tuple'],
    });
    let worker: string | undefined;
    for (;;) {
      const { rows } = await sql.query('SELECT worker_id, status FROM agentplane.runs WHERE run_id = $1', [run.run_id]);
      worker = rows[0]?.worker_id as string | undefined;
      if (worker || !['pending', 'running'].includes(rows[0]?.status as string)) break;
    }
    if (!worker) {
      if (attempt >= 20) throw new Error(`20 runs in a row ended before their replica was seen (last ${run.run_id})`);
      redone++;
      continue;
    }
    return await readStream(procs, worker, t.thread_id, run.run_id, cross, text, t0);
  }
}

async function readStream(
  procs: ServerProc[],
  worker: string,
  threadId: string,
  runId: string,
  cross: boolean,
  text: string,
  t0: number,
): Promise<{ ttftMs: number; tokens: number; tokensPerSec: number; executing: ServerProc }> {
  const executing = procs.find((p) => worker.startsWith(`${p.proc.pid}-`))!;
  const reader = cross ? procs.find((p) => p !== executing)! : executing;
  const client = new Client({ apiUrl: reader.url, callerOptions: { maxRetries: 0 } });
  let first = 0;
  let last = 0;
  let tokens = 0;
  for await (const e of client.runs.joinStream(threadId, runId)) {
    if (e.event !== 'messages') continue;
    last = performance.now();
    if (!tokens) first = last;
    tokens++;
  }
  if (tokens !== text.length) throw new Error(`expected ${text.length} tokens, got ${tokens}`);
  return {
    executing,
    ttftMs: first - t0,
    tokens,
    tokensPerSec: tokens > 1 ? ((tokens - 1) * 1000) / (last - first) : 0,
  };
}

/**
 * The run cycle on one replica: `clients` SDK clients each loop create thread → create run (default stream mode)
 * → join → get state for `seconds`; cycles/s and the server's CPU ms per cycle.
 */
async function runCycles(
  proc: ServerProc,
  seconds: number,
  clients: number,
  warmupSeconds: number,
): Promise<{ perSec: number; cpuMs: number; failures: string[] }> {
  const client = new Client({ apiUrl: proc.url, callerOptions: { maxRetries: 0 } });
  const input = { text: 'hi', messages: [{ role: 'user', content: 'go' }] };
  const one = async () => {
    const t = await client.threads.create();
    const run = await client.runs.create(t.thread_id, 'chat', { input });
    await client.runs.join(t.thread_id, run.run_id);
    const state = await client.threads.getState(t.thread_id);
    if (!(state.values as { messages?: unknown[] }).messages?.length) {
      const r = await client.runs.get(t.thread_id, run.run_id);
      throw new Error(`run ${run.run_id} left no messages: status ${r.status}`);
    }
  };
  let done = 0;
  const failures: string[] = [];
  const load = (until: number, count: boolean) =>
    Promise.all(
      Array.from({ length: clients }, async () => {
        while (performance.now() < until) {
          try {
            await one();
            if (count) done++;
          } catch (err) {
            if (count) failures.push((err as Error).message);
          }
        }
      }),
    );
  // Warm-up under the same load (a fresh server's first seconds measure the JIT warming up), then the window.
  await load(performance.now() + warmupSeconds * 1000, false);
  const cpu0 = cpuSecs(proc.proc.pid!);
  await load(performance.now() + seconds * 1000, true);
  const cpu = cpuSecs(proc.proc.pid!) - cpu0;
  return { perSec: done / seconds, cpuMs: (cpu * 1000) / done, failures };
}

interface Setup {
  transport: Transport;
  procs: ServerProc[];
  sql: pg.Client;
  db: string;
}

export async function runStreamBench(opts: {
  samples?: number;
  tokens?: number;
  write: boolean;
  transports?: Transport[];
  cycleSeconds?: number;
}): Promise<void> {
  const samples = opts.samples ?? 30;
  const longTokens = opts.tokens ?? 3000;
  const cycleSeconds = opts.cycleSeconds ?? 10;
  let transports = opts.transports ?? ['postgres', 'redis'];
  const notes: string[] = [];
  if (transports.includes('redis') && !(await redisAnswers(REDIS_URL))) {
    transports = transports.filter((t) => t !== 'redis');
    notes.push(`- Redis Streams not measured: nothing answers at ${REDIS_URL} (set BENCH_REDIS_URL).`);
  }
  const admin = new pg.Client({ connectionString: ADMIN_URL });
  await admin.connect();
  const setups: Setup[] = [];
  try {
    for (const transport of transports) {
      const db = `ap_bench_streams_${randomBytes(4).toString('hex')}`;
      await admin.query(`CREATE DATABASE ${db}`);
      const url = new URL(ADMIN_URL);
      url.pathname = `/${db}`;
      const setup: Setup = { transport, procs: [], sql: new pg.Client({ connectionString: url.toString() }), db };
      setups.push(setup);
      const extra = transport === 'redis' ? ['--redis-url', REDIS_URL] : [];
      for (let i = 0; i < 2; i++)
        setup.procs.push(await startServerProcess(['--config', CONFIG, '--database-url', url.toString(), ...extra]));
      await setup.sql.connect();
    }
    const short = 'Hello there, how are you?';
    const long = 'abcdefghij'.repeat(Math.ceil(longTokens / 10)).slice(0, longTokens);
    // Warm both replicas of each setup until each has executed runs (executor threads start with a first run).
    for (const s of setups) {
      const executed = new Set<ServerProc>();
      for (let i = 0; i < 40 && executed.size < 2; i++)
        executed.add((await measure(s.procs, s.sql, i % 2 === 1, short)).executing);
      for (let i = 0; i < 6; i++) await measure(s.procs, s.sql, i % 2 === 1, short);
    }
    type Key = `${Transport}/${'local' | 'cross'}`;
    const ttft = new Map<Key, number[]>();
    const rates = new Map<Key, number[]>();
    const push = (m: Map<Key, number[]>, k: Key, v: number) => m.set(k, [...(m.get(k) ?? []), v]);
    // Every case takes its turn in each round.
    for (let i = 0; i < samples; i++)
      for (const s of setups)
        for (const cross of [false, true])
          push(
            ttft,
            `${s.transport}/${cross ? 'cross' : 'local'}`,
            (await measure(s.procs, s.sql, cross, short)).ttftMs,
          );
    for (let i = 0; i < 3; i++)
      for (const s of setups)
        for (const cross of [false, true])
          push(
            rates,
            `${s.transport}/${cross ? 'cross' : 'local'}`,
            (await measure(s.procs, s.sql, cross, long)).tokensPerSec,
          );
    const cycles = new Map<Transport, Array<{ perSec: number; cpuMs: number; failures: string[] }>>();
    for (let round = 0; round < 3; round++)
      for (const s of setups)
        cycles.set(s.transport, [
          ...(cycles.get(s.transport) ?? []),
          await runCycles(s.procs[0]!, cycleSeconds, 8, round === 0 ? 5 : 2),
        ]);

    const label = { postgres: 'Postgres table + NOTIFY', redis: 'Redis Streams' } as const;
    const rows: string[] = [];
    for (const s of setups) {
      for (const side of ['local', 'cross'] as const) {
        const k: Key = `${s.transport}/${side}`;
        rows.push(
          `| ${label[s.transport]} | ${side === 'cross' ? 'other replica' : 'executing replica'} | ` +
            `${pct(ttft.get(k)!, 50).toFixed(1)} | ${pct(ttft.get(k)!, 99).toFixed(1)} | ${pct(rates.get(k)!, 50).toFixed(0)} |`,
        );
        process.stdout.write(`${rows.at(-1)}\n`);
      }
    }
    const cycleRows = setups.map((s) => {
      const c = cycles.get(s.transport)!;
      const mean = (f: (x: { perSec: number; cpuMs: number }) => number) => c.reduce((a, x) => a + f(x), 0) / c.length;
      return (
        `| ${label[s.transport]} | ${c.map((x) => x.perSec.toFixed(1)).join(' / ')} | ${mean((x) => x.perSec).toFixed(1)} | ` +
        `${c.map((x) => x.cpuMs.toFixed(1)).join(' / ')} | ${mean((x) => x.cpuMs).toFixed(1)} | ` +
        `${c.reduce((a, x) => a + x.failures.length, 0)} |`
      );
    });
    for (const s of setups) {
      const failed = cycles.get(s.transport)!.flatMap((x) => x.failures);
      if (failed.length) notes.push(`- ${label[s.transport]}: ${failed.length} failed cycles, first: ${failed[0]}`);
    }
    if (redone) {
      notes.push(
        `- ${redone} stream samples taken again: their run had ended before the bench saw which replica ran it.`,
      );
    }
    const load = os.loadavg()[0]!.toFixed(1);
    const md = [
      '# Stream benchmark',
      '',
      `${new Date().toISOString()} · ${os.cpus().length} × ${os.cpus()[0]?.model.split(' ').slice(0, 2).join(' ')} · Node ${process.version} · ` +
        `per transport two agent-server processes on one Postgres database · load avg ${load} at the end`,
      '',
      `Time to first token: from the run's creation (POST /threads/{id}/runs) to the first messages-tuple event ` +
        `at the client, over ${samples} runs of ${short.length} tokens, joined with the SDK on the replica that ` +
        `executes the run or on the other one. Tokens/s: a ${longTokens}-token run (fake model, no delay), ` +
        'first to last token at the client, median of 3. All cases take turns.',
      '',
      '| stream events in | stream read from | first token p50 ms | p99 ms | tokens/s |',
      '|---|---|---|---|---|',
      ...rows,
      '',
      `Run cycle on one replica: 8 SDK clients each loop create thread → create run (stream mode values, 2-token ` +
        `chat) → join → get state, ${cycleSeconds} s per window after a warm-up under the same load (5 s before a ` +
        `transport's first window, 2 s before the others), three windows per transport taking turns; server CPU ` +
        "is the agent-server process's user+system time per cycle (Postgres' and Redis' own CPU not included).",
      '',
      '| stream events in | cycles/s (windows) | cycles/s mean | server CPU ms / cycle (windows) | mean | failed |',
      '|---|---|---|---|---|---|',
      ...cycleRows,
      '',
      '- The time to first token includes finding the executing replica (a query per sample) and the join request.',
      ...notes,
      '- Command: `npm run bench -- --only streams` (or `node --import tsx bench/streams.ts --help`).',
      '',
    ].join('\n');
    process.stdout.write(`\n${md}`);
    if (opts.write) await writeFile(path.join(root, 'bench/results/streams.md'), md);
  } finally {
    for (const s of setups) {
      await s.sql.end().catch(() => undefined);
      for (const p of s.procs) await p.stop();
      await admin.query(`DROP DATABASE IF EXISTS ${s.db} WITH (FORCE)`);
    }
    await admin.end();
  }
}

if (process.argv[1] && path.resolve(process.argv[1]) === fileURLToPath(import.meta.url)) {
  const { values: args } = parseArgs({
    options: {
      samples: { type: 'string', default: '30' },
      tokens: { type: 'string', default: '3000' },
      transports: { type: 'string', default: 'postgres,redis' },
      'cycle-seconds': { type: 'string', default: '10' },
      'no-write': { type: 'boolean', default: false },
      help: { type: 'boolean', default: false },
    },
  });
  if (args.help) {
    process.stdout.write(
      [
        'Usage: node --import tsx bench/streams.ts [options]',
        '  --samples N   runs per case for time to first token (default 30)',
        '  --tokens N    tokens of the long run measured for tokens/s (default 3000)',
        '  --transports LIST  postgres,redis (default both; redis is left out when it does not answer)',
        '  --cycle-seconds N  seconds per run-cycle window (default 10)',
        '  --no-write    print only, do not write bench/results/streams.md',
        'Env: BENCH_PG_ADMIN_URL (default postgres://postgres@127.0.0.1:5432/postgres),',
        '     BENCH_REDIS_URL (default redis://127.0.0.1:6379)',
        '',
      ].join('\n'),
    );
  } else {
    const transports = args.transports.split(',').map((t) => t.trim());
    for (const t of transports) if (t !== 'postgres' && t !== 'redis') throw new Error(`--transports: unknown "${t}"`);
    await runStreamBench({
      samples: Number(args.samples),
      tokens: Number(args.tokens),
      write: !args['no-write'],
      transports: transports as Transport[],
      cycleSeconds: Number(args['cycle-seconds']),
    });
  }
}

// Stream benchmark (not a test): time to first token and tokens/s through a run's stream, read from the replica
// that executes the run and from another replica on the same Postgres database (the durable stream-event log in
// between). Two real agent-server processes, the real SDK, the fake chat model of test/fixtures/streams (one
// character per token, no sleep: what is measured is the server, not a model).
//
//   npm run bench -- --only streams        # ~1 minute, writes bench/results/streams.md (part of npm run bench)
//   node --import tsx bench/streams.ts --samples 20 --tokens 4000 --no-write
import { randomBytes } from 'node:crypto';
import { writeFile } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { parseArgs } from 'node:util';
import { Client } from '@langchain/langgraph-sdk';
import pg from 'pg';
import { startServerProcess, type ServerProc } from '../test/agent-server/helpers/process.ts';

const root = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '..');
const CONFIG = path.join(root, 'test/fixtures/streams/langgraph.json');
const ADMIN_URL = process.env.BENCH_PG_ADMIN_URL ?? 'postgres://postgres@127.0.0.1:5432/postgres';

const pct = (xs: number[], p: number) => {
  const s = [...xs].sort((a, b) => a - b);
  return s[Math.min(s.length - 1, Math.floor((p / 100) * s.length))]!;
};

/** One run: created through `creator`, its stream joined on the executing replica or the other one. */
async function measure(
  procs: ServerProc[],
  sql: pg.Client,
  cross: boolean,
  text: string,
): Promise<{ ttftMs: number; tokens: number; tokensPerSec: number; executing: ServerProc }> {
  const creator = new Client({ apiUrl: procs[0]!.url, callerOptions: { maxRetries: 0 } });
  const t = await creator.threads.create();
  const t0 = performance.now();
  const run = await creator.runs.create(t.thread_id, 'chat', {
    input: { text, messages: [{ role: 'user', content: 'go' }] },
    streamMode: ['messages-tuple'],
  });
  // Which replica executes it (its worker id starts with the pid): asked of the database, as few ms as it takes.
  let worker: string | undefined;
  for (;;) {
    const { rows } = await sql.query('SELECT worker_id FROM agentplane.runs WHERE run_id = $1', [run.run_id]);
    worker = rows[0]?.worker_id as string | undefined;
    if (worker) break;
  }
  const executing = procs.find((p) => worker!.startsWith(`${p.proc.pid}-`))!;
  const reader = cross ? procs.find((p) => p !== executing)! : executing;
  const client = new Client({ apiUrl: reader.url, callerOptions: { maxRetries: 0 } });
  let first = 0;
  let last = 0;
  let tokens = 0;
  for await (const e of client.runs.joinStream(t.thread_id, run.run_id)) {
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

export async function runStreamBench(opts: { samples?: number; tokens?: number; write: boolean }): Promise<void> {
  const samples = opts.samples ?? 30;
  const longTokens = opts.tokens ?? 3000;
  const name = `ap_bench_streams_${randomBytes(4).toString('hex')}`;
  const admin = new pg.Client({ connectionString: ADMIN_URL });
  await admin.connect();
  await admin.query(`CREATE DATABASE ${name}`);
  const url = new URL(ADMIN_URL);
  url.pathname = `/${name}`;
  const procs: ServerProc[] = [];
  const sql = new pg.Client({ connectionString: url.toString() });
  try {
    for (let i = 0; i < 2; i++)
      procs.push(await startServerProcess(['--config', CONFIG, '--database-url', url.toString()]));
    await sql.connect();
    const rows: string[] = [];
    const short = 'Hello there, how are you?';
    const long = 'abcdefghij'.repeat(Math.ceil(longTokens / 10)).slice(0, longTokens);
    // Warm both replicas until each has executed runs (executor threads start with a replica's first run).
    const executed = new Set<ServerProc>();
    for (let i = 0; i < 40 && executed.size < 2; i++)
      executed.add((await measure(procs, sql, i % 2 === 1, short)).executing);
    for (let i = 0; i < 6; i++) await measure(procs, sql, i % 2 === 1, short);
    // The two cases take turns, so changing background load hits both alike.
    const ttft: Record<'local' | 'cross', number[]> = { local: [], cross: [] };
    const rates: Record<'local' | 'cross', number[]> = { local: [], cross: [] };
    for (let i = 0; i < samples; i++) {
      for (const cross of [false, true])
        ttft[cross ? 'cross' : 'local'].push((await measure(procs, sql, cross, short)).ttftMs);
    }
    for (let i = 0; i < 3; i++) {
      for (const cross of [false, true])
        rates[cross ? 'cross' : 'local'].push((await measure(procs, sql, cross, long)).tokensPerSec);
    }
    for (const k of ['local', 'cross'] as const) {
      const label = k === 'cross' ? 'other replica (durable log + NOTIFY)' : 'executing replica';
      rows.push(
        `| ${label} | ${pct(ttft[k], 50).toFixed(1)} | ${pct(ttft[k], 99).toFixed(1)} | ${pct(rates[k], 50).toFixed(0)} |`,
      );
      process.stdout.write(`${rows.at(-1)}\n`);
    }
    const load = os.loadavg()[0]!.toFixed(1);
    const md = [
      '# Stream benchmark',
      '',
      `${new Date().toISOString()} · ${os.cpus().length} × ${os.cpus()[0]?.model.split(' ').slice(0, 2).join(' ')} · Node ${process.version} · ` +
        `two agent-server processes on one Postgres · load avg ${load}`,
      '',
      `Time to first token: from the run's creation (POST /threads/{id}/runs) to the first messages-tuple event ` +
        `at the client, over ${samples} runs of ${short.length} tokens, joined with the SDK on the replica that ` +
        `executes the run or on the other one. Tokens/s: a ${longTokens}-token run (fake model, no delay), ` +
        'first to last token at the client, median of 3; the two cases take turns.',
      '',
      '| stream read from | first token p50 ms | p99 ms | tokens/s |',
      '|---|---|---|---|',
      ...rows,
      '',
      '- The time to first token includes finding the executing replica (a query per sample) and the join request.',
      '- Command: `npm run bench -- --only streams` (or `node --import tsx bench/streams.ts --help`).',
      '',
    ].join('\n');
    process.stdout.write(`\n${md}`);
    if (opts.write) await writeFile(path.join(root, 'bench/results/streams.md'), md);
  } finally {
    await sql.end().catch(() => undefined);
    for (const p of procs) await p.stop();
    await admin.query(`DROP DATABASE IF EXISTS ${name} WITH (FORCE)`);
    await admin.end();
  }
}

if (process.argv[1] && path.resolve(process.argv[1]) === fileURLToPath(import.meta.url)) {
  const { values: args } = parseArgs({
    options: {
      samples: { type: 'string', default: '30' },
      tokens: { type: 'string', default: '3000' },
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
        '  --no-write    print only, do not write bench/results/streams.md',
        'Env: BENCH_PG_ADMIN_URL (default postgres://postgres@127.0.0.1:5432/postgres)',
        '',
      ].join('\n'),
    );
  } else {
    await runStreamBench({ samples: Number(args.samples), tokens: Number(args.tokens), write: !args['no-write'] });
  }
}

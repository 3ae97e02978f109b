// Agent-server benchmark (not a test): the example agent on the reference dev server
// (npx @langchain/langgraph-cli dev), on ours embedded and on ours with Postgres, side by side in one run,
// plus the in-process limit (graph.invoke with a MemorySaver).
//
//   npm run bench                      # everything, ~2-3 minutes (targets take turns over 3 rounds)
//   npm run bench -- --seconds 10 --only embedded,limit
//
// Each of --clients SDK clients loops: create thread -> create run -> join -> get state -> get run.
// Results go to stdout and bench/results/agent-server.md.
import { execFile, spawn, type ChildProcess } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { existsSync, openSync } from 'node:fs';
import { mkdir, mkdtemp, readdir, readFile, rm, writeFile } from 'node:fs/promises';
import { createServer } from 'node:net';
import os from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { parseArgs, promisify } from 'node:util';
import { MemorySaver } from '@langchain/langgraph';
import { Client } from '@langchain/langgraph-sdk';
import pg from 'pg';
import { loadGraphs } from '../src/agent-server/graphs/index.ts';
import { silentLogger } from '../src/lib/logger.ts';
import { postgresCpuSeconds } from './agent-server-process.ts';
import { startStatementCounter } from './pg-statement-counter.ts';
import { runStreamBench } from './streams.ts';

const root = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '..');
const exampleConfig = path.join(root, 'examples/agent/langgraph.json');
const referenceDir = path.join(root, 'bench/.reference');
const resultsFile = path.join(root, 'bench/results/agent-server.md');
const ADMIN_URL = process.env.BENCH_PG_ADMIN_URL ?? 'postgres://postgres@127.0.0.1:5432/postgres';
const INPUT = { messages: [{ role: 'human', content: 'Ada' }] };
const EXPECTED_REPLY = 'The greeting tool says: Hello, Ada!';

const TARGETS = ['reference', 'embedded', 'postgres', 'limit', 'streams'] as const;
type Target = (typeof TARGETS)[number];

const { values: args } = parseArgs({
  options: {
    seconds: { type: 'string', default: '15' },
    rounds: { type: 'string', default: '3' },
    warmup: { type: 'string', default: '2' },
    'first-warmup': { type: 'string', default: '10' },
    clients: { type: 'string', default: '32' },
    'latency-samples': { type: 'string', default: '50' },
    only: { type: 'string', default: TARGETS.join(',') },
    'no-write': { type: 'boolean', default: false },
    profile: { type: 'boolean', default: false },
    baseline: { type: 'string' },
    'sql-top': { type: 'string', default: '0' },
    json: { type: 'string' },
    help: { type: 'boolean', default: false },
  },
});
if (args.help) {
  process.stdout.write(
    [
      'Usage: node --import tsx bench/agent-server.ts [options]',
      '  --seconds N          measured seconds per target, split over the rounds (default 15)',
      '  --rounds N           targets take turns this many times, so background load hits all alike (default 3)',
      '  --warmup N           unmeasured warm-up seconds before each window (default 2)',
      "  --first-warmup N     before a target's first window instead (default 10): the JIT's warm-up, so round 1",
      '                       measures a warm server as the later rounds do',
      '  --clients N          concurrent SDK clients (default 32)',
      '  --latency-samples N  sequential runs used for created->running latency (default 50)',
      `  --only LIST          comma-separated subset of ${TARGETS.join(',')}`,
      '  --no-write           print the table only, do not write bench/results/agent-server.md',
      '  --profile            run our servers with --cpu-prof; .cpuprofile files land in the log folder',
      '  --baseline DIR       also run embedded/postgres from another checkout (e.g. a git worktree of an older',
      '                       commit) as targets "embedded@base"/"postgres@base", in the same rounds (A/B)',
      '  --sql-top N          print the N statements Postgres targets sent most (whole run, by SQL text)',
      '  --json FILE          also write the results as JSON (bench/cpu-per-cycle.ts reads it)',
      'Env: BENCH_PG_ADMIN_URL (default postgres://postgres@127.0.0.1:5432/postgres)',
      '',
    ].join('\n'),
  );
  process.exit(0);
}
const seconds = Number(args.seconds);
const rounds = Math.max(1, Number(args.rounds));
const windowSeconds = seconds / rounds;
const warmupSeconds = Number(args.warmup);
const firstWarmupSeconds = Math.max(warmupSeconds, Number(args['first-warmup']));
const clients = Number(args.clients);
const latencySamples = Number(args['latency-samples']);
const only = new Set(args.only.split(',').map((s) => s.trim()) as Target[]);
for (const t of only) if (!TARGETS.includes(t)) throw new Error(`--only: unknown target "${t}"`);
const baselineRoot = args.baseline ? path.resolve(args.baseline) : undefined;
if (baselineRoot && !existsSync(path.join(baselineRoot, 'bin/agentplane.mjs'))) {
  throw new Error(`--baseline: ${baselineRoot}/bin/agentplane.mjs not found`);
}
/** A target, or an agentplane target of the --baseline checkout ("postgres@base"). */
type TargetName = Target | `${'embedded' | 'postgres'}@base`;

interface Result {
  target: string;
  cycles: number;
  errors: number;
  firstError?: string;
  cyclesPerSec: number;
  p50: number;
  p99: number;
  /** CPU ms the server (or, for the limit, its own process) spent per completed cycle in the measured window. */
  cpuMsPerCycle?: number;
  /** SQL statements the server sent to PostgreSQL per completed cycle (Postgres targets; bench/pg-statement-counter.ts). */
  statementsPerCycle?: number;
  /** CPU ms the PostgreSQL server's processes spent per completed cycle in the measured window (Postgres targets). */
  dbCpuMsPerCycle?: number;
  /** CPU ms this process (the SDK clients) spent per cycle; it shares the machine with the server. */
  clientCpuMsPerCycle?: number;
  /** 1-minute load average when the measured window began: how busy the shared machine was. */
  loadAvg: number;
  /** run created_at -> first checkpoint of the run, sequential runs (no queueing). */
  startP50?: number;
  startP99?: number;
}

function log(msg: string): void {
  process.stderr.write(`[bench] ${msg}\n`);
}

function percentile(sorted: number[], p: number): number {
  if (sorted.length === 0) return NaN;
  return sorted[Math.min(sorted.length - 1, Math.ceil((p / 100) * sorted.length) - 1)]!;
}

async function freePort(): Promise<number> {
  return new Promise((resolve, reject) => {
    const srv = createServer();
    srv.once('error', reject);
    srv.listen(0, '127.0.0.1', () => {
      const { port } = srv.address() as { port: number };
      srv.close(() => resolve(port));
    });
  });
}

// ---------------------------------------------------------------------------------------------- processes

interface Server {
  url: string;
  proc: ChildProcess;
  logFile: string;
}

async function startServer(
  name: string,
  cmd: string,
  argv: string[],
  opts: { cwd: string; env?: Record<string, string>; port: number; logDir: string },
): Promise<Server> {
  const logFile = path.join(opts.logDir, `${name}.log`);
  const fd = openSync(logFile, 'w');
  // Own process group, so the reference CLI's child server goes down with it.
  const proc = spawn(cmd, argv, {
    cwd: opts.cwd,
    env: { ...process.env, ...opts.env },
    stdio: ['ignore', fd, fd],
    detached: true,
  });
  const url = `http://127.0.0.1:${opts.port}`;
  const deadline = Date.now() + 120_000;
  while (Date.now() < deadline) {
    if (proc.exitCode !== null) throw new Error(`${name} exited with ${proc.exitCode}; see ${logFile}`);
    try {
      const res = await fetch(`${url}/ok`);
      if (res.ok) return { url, proc, logFile };
    } catch {
      // not listening yet
    }
    await new Promise((r) => setTimeout(r, 200));
  }
  await stopServer({ url, proc, logFile });
  throw new Error(`${name} did not answer /ok within 120 s; see ${logFile}`);
}

async function stopServer(server: Server): Promise<void> {
  const { proc } = server;
  if (proc.exitCode !== null || proc.pid === undefined) return;
  const exited = new Promise<void>((r) => proc.once('exit', () => r()));
  process.kill(-proc.pid, 'SIGTERM');
  const timer = setTimeout(() => {
    if (proc.exitCode === null) process.kill(-proc.pid!, 'SIGKILL');
  }, 10_000);
  await exited;
  clearTimeout(timer);
}

async function ensureReferenceInstalled(): Promise<string> {
  const cli = path.join(referenceDir, 'node_modules/@langchain/langgraph-cli/dist/cli/cli.mjs');
  if (!existsSync(cli)) {
    log('installing @langchain/langgraph-cli into bench/.reference (once)');
    await mkdir(referenceDir, { recursive: true });
    await writeFile(
      path.join(referenceDir, 'package.json'),
      JSON.stringify({ private: true, type: 'module' }, null, 2),
    );
    await promisify(execFile)(
      'npm',
      ['install', '--no-audit', '--no-fund', '--prefer-offline', '@langchain/langgraph-cli'],
      {
        cwd: referenceDir,
        timeout: 600_000,
      },
    );
  }
  return cli;
}

/** An error's message with those of its causes ("fetch failed" says little without the socket error under it). */
function causeChain(err: unknown): string {
  const parts: string[] = [];
  for (let e = err as { message?: unknown; code?: unknown; cause?: unknown } | undefined; e && parts.length < 5;) {
    parts.push(`${String(e.message ?? e)}${typeof e.code === 'string' ? ` (${e.code})` : ''}`);
    e = e.cause as typeof e;
  }
  return parts.join(' <- ');
}

/** CPU seconds (user + system) used so far by every process in a process group, from /proc (Linux). */
async function groupCpuSeconds(pgid: number): Promise<number> {
  let ticks = 0;
  for (const entry of await readdir('/proc')) {
    if (!/^\d+$/.test(entry)) continue;
    const stat = await readFile(`/proc/${entry}/stat`, 'utf8').catch(() => '');
    // Fields after the parenthesised command name: state ppid pgrp ... utime(14) stime(15).
    const fields = stat.slice(stat.lastIndexOf(')') + 2).split(' ');
    if (Number(fields[2]) === pgid) ticks += Number(fields[11]) + Number(fields[12]);
  }
  return ticks / 100; // USER_HZ
}

function selfCpuSeconds(): number {
  const { user, system } = process.cpuUsage();
  return (user + system) / 1e6;
}

// ---------------------------------------------------------------------------------------------- load

/** One full seed cycle through the SDK; throws if the run did not end as the example agent should. */
async function cycle(client: Client): Promise<void> {
  const thread = await client.threads.create();
  const run = await client.runs.create(thread.thread_id, 'agent', { input: INPUT });
  await client.runs.join(thread.thread_id, run.run_id);
  const state = await client.threads.getState<{ messages: Array<{ content: unknown }> }>(thread.thread_id);
  const finished = await client.runs.get(thread.thread_id, run.run_id);
  if (finished.status !== 'success') throw new Error(`run ${run.run_id} ended ${finished.status}`);
  const last = state.values.messages.at(-1);
  if (last?.content !== EXPECTED_REPLY) throw new Error(`unexpected final message ${JSON.stringify(last)}`);
}

/** What one measured window produced. */
interface Window {
  completed: number;
  latencies: number[];
  errors: number;
  firstError?: string;
  /** Server (or the limit: its process) CPU seconds in the window. */
  cpu?: number;
  /** SQL statements the server sent in the window (Postgres targets). */
  statements?: number;
  /** CPU seconds of the PostgreSQL server's processes in the window (Postgres targets). */
  dbCpu?: number;
  clientCpu: number;
  loadAvg: number;
}

/** `workers` concurrent loops of `op` for `warmup` seconds + `windowSeconds`; only the measured window counts. */
async function drive(
  target: string,
  op: (worker: number) => Promise<void>,
  workers: number,
  cpuSeconds?: () => number | Promise<number>,
  statements?: () => number,
  dbCpuSeconds?: () => Promise<number>,
  warmup = warmupSeconds,
): Promise<Window> {
  const latencies: number[] = [];
  let completed = 0;
  let errors = 0;
  let firstError: string | undefined;
  const warmEnd = performance.now() + warmup * 1000;
  const end = warmEnd + windowSeconds * 1000;
  let cpuStart: Promise<number> | undefined;
  let cpuEnd: Promise<number> | undefined;
  let dbStart: Promise<number> | undefined;
  let dbEnd: Promise<number> | undefined;
  let loadAvg = NaN;
  let selfStart = NaN;
  let selfEnd = NaN;
  let sqlStart = NaN;
  let sqlEnd = NaN;
  // Checked from the loops, not timers: an in-process graph run can keep the event loop in microtasks.
  const mark = (now: number) => {
    if (now >= warmEnd && Number.isNaN(loadAvg)) {
      loadAvg = os.loadavg()[0]!;
      selfStart = selfCpuSeconds();
      if (statements) sqlStart = statements();
      if (cpuSeconds) cpuStart = Promise.resolve(cpuSeconds());
      if (dbCpuSeconds) dbStart = dbCpuSeconds();
    }
    if (now >= end && Number.isNaN(selfEnd)) {
      selfEnd = selfCpuSeconds();
      if (statements) sqlEnd = statements();
      if (cpuSeconds) cpuEnd = Promise.resolve(cpuSeconds());
      if (dbCpuSeconds) dbEnd = dbCpuSeconds();
    }
  };
  // Timers as well: when a cycle takes longer than the window (a loaded machine), no loop iteration may fall in it.
  const timers = [warmEnd, end].map((at) => setTimeout(() => mark(performance.now()), at - performance.now() + 1));
  const loops = Array.from({ length: workers }, async (_, w) => {
    while (performance.now() < end) {
      const t0 = performance.now();
      mark(t0);
      try {
        await op(w);
        const t1 = performance.now();
        mark(t1);
        // Throughput counts completions inside the window; latency only cycles wholly inside it.
        if (t1 >= warmEnd && t1 <= end) completed++;
        if (t0 >= warmEnd && t1 <= end) latencies.push(t1 - t0);
      } catch (err) {
        errors++;
        firstError ??= causeChain(err).slice(0, 500);
        if (errors > 200) throw new Error(`${target}: too many errors, first: ${firstError}`, { cause: err });
      }
    }
  });
  await Promise.all(loops);
  for (const t of timers) clearTimeout(t);
  mark(performance.now());
  return {
    completed,
    latencies,
    errors,
    ...(firstError ? { firstError } : {}),
    ...(cpuStart && cpuEnd ? { cpu: (await cpuEnd) - (await cpuStart) } : {}),
    ...(dbStart && dbEnd ? { dbCpu: (await dbEnd) - (await dbStart) } : {}),
    ...(statements ? { statements: sqlEnd - sqlStart } : {}),
    clientCpu: selfEnd - selfStart,
    loadAvg,
  };
}

/** Merges a target's windows from all rounds. */
function combine(target: string, windows: Window[]): Result {
  const completed = windows.reduce((a, w) => a + w.completed, 0);
  const latencies = windows.flatMap((w) => w.latencies).sort((a, b) => a - b);
  const cpu = windows.every((w) => w.cpu !== undefined) ? windows.reduce((a, w) => a + w.cpu!, 0) : undefined;
  const dbCpu = windows.every((w) => w.dbCpu !== undefined) ? windows.reduce((a, w) => a + w.dbCpu!, 0) : undefined;
  const clientCpu = windows.reduce((a, w) => a + w.clientCpu, 0);
  const firstError = windows.find((w) => w.firstError)?.firstError;
  return {
    target,
    cycles: completed,
    errors: windows.reduce((a, w) => a + w.errors, 0),
    ...(firstError ? { firstError } : {}),
    cyclesPerSec: completed / (windowSeconds * windows.length),
    ...(cpu !== undefined && completed > 0 ? { cpuMsPerCycle: (cpu * 1000) / completed } : {}),
    ...(dbCpu !== undefined && completed > 0 ? { dbCpuMsPerCycle: (dbCpu * 1000) / completed } : {}),
    ...(completed > 0 ? { clientCpuMsPerCycle: (clientCpu * 1000) / completed } : {}),
    loadAvg: windows.reduce((a, w) => a + w.loadAvg, 0) / windows.length,
    p50: percentile(latencies, 50),
    p99: percentile(latencies, 99),
  };
}

/**
 * created -> running: one client, runs one after another so nothing queues. The run's first checkpoint (the
 * input checkpoint, written when the graph starts executing) is the earliest observable sign it is running.
 */
async function startLatency(client: Client, samples: number): Promise<{ p50: number; p99: number }> {
  const deltas: number[] = [];
  for (let i = 0; i < samples; i++) {
    const thread = await client.threads.create();
    const run = await client.runs.create(thread.thread_id, 'agent', { input: INPUT });
    await client.runs.join(thread.thread_id, run.run_id);
    const history = await client.threads.getHistory(thread.thread_id, { limit: 100 });
    const first = history.at(-1);
    if (!first?.created_at) throw new Error('thread history has no checkpoint with created_at');
    deltas.push(Date.parse(first.created_at) - Date.parse(run.created_at));
  }
  deltas.sort((a, b) => a - b);
  return { p50: percentile(deltas, 50), p99: percentile(deltas, 99) };
}

interface Contender {
  target: TargetName;
  /** One measured window at full load, after `warmup` seconds of it. */
  window(warmup: number): Promise<Window>;
  latency?(): Promise<{ p50: number; p99: number }>;
  /** SQL statements per cycle, from a window of its own (Postgres targets: see statementWindow). */
  statementsPerCycle?(): Promise<number>;
  stop(): Promise<void>;
}

/**
 * Between its windows a server idles while the others run, long enough for it to close this process's idle keep-alive
 * connections (keepAliveTimeout 72 s). This process closes them first (the server's Keep-Alive hint, minus a second)
 * unless its event loop is too busy to run that timer, as it is while the in-process limit runs: the first request on
 * such a socket then fails ("fetch failed"), once per client, in the next target's window. Requests on every pooled
 * socket first (more than the clients' count, at once) take the closed ones out; their failures are not the server's.
 */
async function dropStaleSockets(url: string): Promise<void> {
  await Promise.all(
    Array.from({ length: clients * 2 }, () =>
      fetch(`${url}/ok`).then(
        (r) => r.arrayBuffer(),
        () => undefined,
      ),
    ),
  );
}

function serverContender(target: TargetName, server: Server, cleanup: () => Promise<void> = async () => {}): Contender {
  const sdk = Array.from({ length: clients }, () => new Client({ apiUrl: server.url }));
  const pgid = server.proc.pid!;
  return {
    target,
    window: async (warmup) => {
      await dropStaleSockets(server.url);
      return drive(
        target,
        (w) => cycle(sdk[w]!),
        clients,
        () => groupCpuSeconds(pgid),
        undefined,
        target.startsWith('postgres') ? postgresCpuSeconds : undefined,
        warmup,
      );
    },
    latency: () => startLatency(sdk[0]!, latencySamples),
    stop: async () => {
      await stopServer(server);
      await cleanup();
    },
  };
}

/**
 * The limit's runs: invoke + getState of the example graph on new threads, in the process that calls it. A
 * MemorySaver of its own per window (`fresh()`): one for the whole run would hold every checkpoint of the limit's
 * runs and cost later windows more.
 */
async function limitOp(): Promise<{ op: () => Promise<void>; fresh: () => Promise<void> }> {
  const registry = await loadGraphs(exampleConfig, { logger: silentLogger() });
  let graph = await registry.getGraph('agent', {}, { checkpointer: new MemorySaver() });
  let n = 0;
  return {
    op: async () => {
      const config = { configurable: { thread_id: `t${n++}` } };
      await graph.invoke(INPUT, config);
      const state = await graph.getState(config);
      const last = (state.values as { messages: Array<{ content: unknown }> }).messages.at(-1);
      if (last?.content !== EXPECTED_REPLY) throw new Error('unexpected final message');
    },
    fresh: async () => {
      graph = await registry.getGraph('agent', {}, { checkpointer: new MemorySaver() });
    },
  };
}

/**
 * The limit runs in a child process of its own (this script with BENCH_LIMIT_CHILD set; see limitChild): run in
 * this one, LangChain's AsyncLocalStorage would stay switched on here after its first window, and Node's promise
 * hooks with it, which made the SDK clients of every later server window a quarter dearer (client CPU 4.4 against
 * 3.3 ms per cycle) on the cores the servers share with them.
 */
async function limitContender(): Promise<Contender> {
  const child = spawn(
    process.execPath,
    [...process.execArgv, fileURLToPath(import.meta.url), ...process.argv.slice(2)],
    {
      env: { ...process.env, BENCH_LIMIT_CHILD: '1' },
      stdio: ['ignore', 'inherit', 'inherit', 'ipc'],
    },
  );
  const next = () =>
    new Promise<unknown>((resolve, reject) => {
      const onExit = (code: number | null) => reject(new Error(`the limit's process exited with code ${code}`));
      child.once('exit', onExit);
      child.once('message', (m) => {
        child.off('exit', onExit);
        resolve(m);
      });
    });
  await next(); // loaded
  return {
    target: 'limit',
    window: async (warmup) => {
      const answer = next();
      child.send({ warmup });
      return (await answer) as Window;
    },
    stop: async () => {
      if (child.exitCode !== null) return;
      const exited = new Promise((r) => child.once('exit', r));
      child.kill();
      await exited;
    },
  };
}

/** The limit's process: one window per message from the bench ({ warmup }), answered with the window. */
async function limitChild(): Promise<void> {
  const { op, fresh } = await limitOp();
  process.on('message', (m: { warmup: number }) => {
    void (async () => {
      await fresh();
      process.send!(await drive('limit', op, clients, selfCpuSeconds, undefined, undefined, m.warmup));
    })();
  });
  process.send!({ loaded: true });
}

// ---------------------------------------------------------------------------------------------- report

function fmt(n: number | undefined, digits = 1): string {
  return n === undefined || Number.isNaN(n) ? '-' : n.toFixed(digits);
}

function report(results: Result[]): string {
  const by = (t: string) => results.find((r) => r.target === t);
  const ref = by('reference');
  const limitRate = by('limit')?.cyclesPerSec;
  const limitCpu = by('limit')?.cpuMsPerCycle;
  const label: Record<string, string> = {
    reference: 'reference (langgraph-cli dev, in-memory)',
    embedded: 'agentplane embedded',
    postgres: 'agentplane Postgres',
    'embedded@base': 'agentplane embedded (--baseline)',
    'postgres@base': 'agentplane Postgres (--baseline)',
    limit: 'limit: in-process graph.invoke, MemorySaver',
  };
  const isServer = (r: Result) => r.target !== 'limit';
  const rows = results.map((r) =>
    [
      label[r.target] ?? r.target,
      fmt(r.cyclesPerSec),
      fmt(r.p50),
      fmt(r.p99),
      ref && r !== ref ? `${fmt(r.cyclesPerSec / ref.cyclesPerSec, 2)}×` : '-',
      limitRate && isServer(r) ? `${fmt(r.cyclesPerSec / limitRate, 2)}×` : '-',
      r.startP50 === undefined ? '-' : `${fmt(r.startP50, 0)} / ${fmt(r.startP99, 0)}`,
      fmt(r.cpuMsPerCycle),
      limitCpu && r.cpuMsPerCycle && isServer(r) ? `${fmt(r.cpuMsPerCycle / limitCpu, 2)}×` : '-',
      fmt(r.statementsPerCycle),
      fmt(r.dbCpuMsPerCycle),
      isServer(r) ? fmt(r.clientCpuMsPerCycle) : '-',
      ref?.cpuMsPerCycle && r.cpuMsPerCycle && r !== ref ? `${fmt(ref.cpuMsPerCycle / r.cpuMsPerCycle, 2)}×` : '-',
      fmt(r.loadAvg),
      `${r.cycles} / ${r.errors}`,
    ].join(' | '),
  );
  const cpu = os.cpus()[0]?.model ?? 'unknown CPU';
  const lines = [
    '# Agent server benchmark',
    '',
    `${new Date().toISOString()} · ${os.cpus().length} × ${cpu} · Node ${process.version} · ${clients} concurrent SDK clients · ` +
      `${seconds} s measured per target in ${rounds} turns (each after ${warmupSeconds} s warm-up, the first after ${firstWarmupSeconds} s) · example graph examples/agent (agent -> tools -> agent)`,
    '',
    'A cycle: create thread → create run → join → get state → get run (5 requests, 1 run of 3 graph steps).',
    '',
    '| server | cycles/s | p50 ms | p99 ms | vs reference | vs limit | created→running p50 / p99 ms | server CPU ms / cycle | server CPU vs limit | SQL statements / cycle | Postgres CPU ms / cycle | client CPU ms / cycle | CPU efficiency vs reference | load avg | cycles / errors |',
    '|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|',
    ...rows.map((r) => `| ${r} |`),
    '',
    '- Targets take turns (limit, reference, embedded, Postgres, then again) so changing background load on the shared ' +
      'machine hits each alike; all servers stay up for the whole run.',
    "- created→running: run `created_at` to the run's first checkpoint `created_at` (GET history), on " +
      `${latencySamples} sequential runs after the load phase (1 client, nothing queued); timestamps have 1 ms resolution.`,
    "- server CPU ms / cycle: user+system CPU of the server's process group (the limit: its own process) in the measured " +
      "window divided by cycles; it depends far less on other load than cycles/s. Postgres' own CPU is the next column but one.",
    '- SQL statements / cycle: queries and executes the server sent to PostgreSQL (every connection: HTTP thread, ' +
      'executor threads, LISTEN), counted on the wire by a relay in this process (bench/pg-statement-counter.ts), in a ' +
      'window of their own on a second server of the same tree and its own database; the measured windows talk to ' +
      'PostgreSQL directly.',
    "- Postgres CPU ms / cycle: user+system CPU of every process named postgres on this machine in a Postgres target's " +
      'measured window divided by its cycles (the database work of the cycle; the other servers are idle then, and ' +
      'nothing else should use that PostgreSQL server during the run).',
    '- client CPU ms / cycle: this process running the 32 SDK clients; it competes with the server for the same cores.',
    "- load avg: the machine's 1-minute load average when the window began (2 cores, shared with other work).",
    '- The limit runs invoke + getState on new threads in a Node process of its own (a child of this one), without ' +
      "HTTP or a server, with a MemorySaver of its own per window; its CPU is that process's.",
    "- server CPU vs limit: the server CPU per cycle over the limit's (a process running invoke + getState).",
    '- Targets (issue 30): embedded ≥ 5× the reference and Postgres ≥ 3.5× in cycles/s; embedded server CPU ≤ 4 ms per ' +
      "cycle and ≤ 1.6× the limit's; p99 no worse than before. Earlier ones: embedded ≥ 7× the reference and ≥ 0.5× " +
      'the limit in cycles/s, Postgres ≥ 4×, created→running p50 ≤ 5 ms.',
    '- Command: `npm run bench` (options: `npm run bench -- --help`).',
    '',
  ];
  for (const r of results) if (r.firstError) lines.push(`- ${r.target}: ${r.errors} errors, first: ${r.firstError}`);
  return lines.join('\n');
}

function median(xs: number[]): number {
  const s = [...xs].sort((a, b) => a - b);
  const mid = Math.floor(s.length / 2);
  return s.length % 2 ? s[mid]! : (s[mid - 1]! + s[mid]!) / 2;
}

/**
 * With --baseline: this tree against the baseline per store, from the rounds' pairs (each pair ran back to back,
 * so background load hits both alike): median and range of the per-round ratios.
 */
function baselineComparison(windows: Map<TargetName, Window[]>): string {
  const lines: string[] = [];
  for (const store of ['embedded', 'postgres'] as const) {
    const ours = windows.get(store);
    const base = windows.get(`${store}@base`);
    if (!ours || !base) continue;
    const rate: number[] = [];
    const cpu: number[] = [];
    const db: number[] = [];
    ours.forEach((w, i) => {
      const b = base[i];
      if (!b || !w.completed || !b.completed) return;
      rate.push(w.completed / b.completed);
      if (w.cpu !== undefined && b.cpu !== undefined) cpu.push(w.cpu / w.completed / (b.cpu / b.completed));
      if (w.dbCpu && b.dbCpu) db.push(w.dbCpu / w.completed / (b.dbCpu / b.completed));
    });
    if (!rate.length) continue;
    const show = (xs: number[]) =>
      `median ${fmt((median(xs) - 1) * 100)} % (rounds: ${xs.map((x) => fmt((x - 1) * 100)).join(', ')})`;
    const dbPart = db.length ? `; Postgres CPU ms/cycle ${show(db)}` : '';
    lines.push(
      `- ${store} vs --baseline, per-round pairs: cycles/s ${show(rate)}; server CPU ms/cycle ${show(cpu)}${dbPart}.`,
    );
  }
  return lines.length ? `${lines.join('\n')}\n` : '';
}

/**
 * Server CPU per cycle over the limit's, round by round (the limit's window and a server's ran in the same round,
 * so a drift of the machine's speed between rounds falls on both): median and the rounds' values.
 */
function limitRatiosByRound(windows: Map<TargetName, Window[]>): string {
  const limit = windows.get('limit');
  if (!limit) return '';
  const perCycle = (w: Window | undefined) => (w?.cpu !== undefined && w.completed ? w.cpu / w.completed : undefined);
  const parts: string[] = [];
  for (const [target, ws] of windows) {
    if (target === 'limit' || target === 'reference') continue;
    const xs: number[] = [];
    ws.forEach((w, i) => {
      const ours = perCycle(w);
      const theirs = perCycle(limit[i]);
      if (ours !== undefined && theirs) xs.push(ours / theirs);
    });
    if (xs.length) parts.push(`${target} ${fmt(median(xs), 2)}× (rounds: ${xs.map((x) => fmt(x, 2)).join(', ')})`);
  }
  return parts.length ? `- Server CPU vs limit, round by round (median): ${parts.join('; ')}.\n` : '';
}

// ---------------------------------------------------------------------------------------------- main

/**
 * An agentplane server of `dir` on a new Postgres database; with `countStatements` it reaches the database through a
 * relay that counts its statements (bench/pg-statement-counter.ts). `stop` stops it and drops the database.
 */
async function postgresServer(
  name: string,
  dir: string,
  logDir: string,
  argv: (port: number, databaseUrl: string) => string[],
  countStatements = false,
) {
  const db = `ap_bench_${randomBytes(4).toString('hex')}`;
  const admin = new pg.Client({ connectionString: ADMIN_URL });
  await admin.connect();
  await admin.query(`CREATE DATABASE ${db}`);
  const dbUrl = new URL(ADMIN_URL);
  dbUrl.pathname = `/${db}`;
  const counter = countStatements
    ? await startStatementCounter({ host: dbUrl.hostname, port: Number(dbUrl.port || 5432) })
    : undefined;
  if (counter) {
    dbUrl.hostname = '127.0.0.1';
    dbUrl.port = String(counter.port);
  }
  const dropDb = async () => {
    await counter?.close();
    await admin.query(`DROP DATABASE IF EXISTS ${db} WITH (FORCE)`);
    await admin.end();
  };
  const port = await freePort();
  log(`starting agentplane (Postgres database ${db}${counter ? ', through the statement counter' : ''}) from ${dir}`);
  let server: Server;
  try {
    server = await startServer(name, process.execPath, argv(port, dbUrl.href), { cwd: dir, port, logDir });
  } catch (err) {
    await dropDb();
    throw err;
  }
  return {
    server,
    counter,
    dropDb,
    stop: async () => {
      await stopServer(server);
      await dropDb();
    },
  };
}

/** Statements per cycle of the bench's cycle on `server` (a counting one), in a window like the measured ones. */
async function statementWindow(target: string, server: Server, statements: () => number): Promise<number> {
  const sdk = Array.from({ length: clients }, () => new Client({ apiUrl: server.url }));
  await dropStaleSockets(server.url);
  const w = await drive(`${target} (statements)`, (i) => cycle(sdk[i]!), clients, undefined, statements);
  return w.completed > 0 ? w.statements! / w.completed : NaN;
}

async function startContenders(logDir: string): Promise<Contender[]> {
  const contenders: Contender[] = [];
  const node = process.execPath;
  const nodeFlags = args.profile ? ['--cpu-prof', `--cpu-prof-dir=${logDir}`] : [];
  const ours = (port: number, store: string[], tree = root) => [
    ...nodeFlags,
    path.join(tree, 'bin/agentplane.mjs'),
    'agent-server',
    '--config',
    exampleConfig,
    '--host',
    '127.0.0.1',
    '--port',
    String(port),
    ...store,
  ];
  try {
    if (only.has('limit')) contenders.push(await limitContender());
    if (only.has('reference')) {
      const cli = await ensureReferenceInstalled();
      // The dev server keeps its in-memory state in .langgraph_api next to langgraph.json; start clean.
      const state = path.join(root, 'examples/agent/.langgraph_api');
      await rm(state, { recursive: true, force: true });
      const port = await freePort();
      log('starting the reference server');
      const server = await startServer(
        'reference',
        node,
        [cli, 'dev', '--no-browser', '--host', '127.0.0.1', '--port', String(port), '--config', exampleConfig],
        { cwd: referenceDir, port, logDir },
      );
      contenders.push(serverContender('reference', server, () => rm(state, { recursive: true, force: true })));
    }
    // With --baseline, each agentplane target runs once from this tree and once from the baseline's, alternately.
    const trees: Array<{ dir: string; suffix: '' | '@base' }> = [{ dir: root, suffix: '' }];
    if (baselineRoot) trees.push({ dir: baselineRoot, suffix: '@base' });
    if (only.has('embedded')) {
      for (const tree of trees) {
        const name = `embedded${tree.suffix}` as TargetName;
        const port = await freePort();
        const dataDir = await mkdtemp(path.join(os.tmpdir(), 'ap-bench-data-'));
        log(`starting agentplane (embedded) from ${tree.dir}`);
        const server = await startServer(name, node, ours(port, ['--data-dir', dataDir], tree.dir), {
          cwd: tree.dir,
          port,
          logDir,
        });
        contenders.push(serverContender(name, server, () => rm(dataDir, { recursive: true, force: true })));
      }
    }
    if (only.has('postgres')) {
      for (const tree of trees) {
        const name = `postgres${tree.suffix}` as TargetName;
        // Two servers of the same tree, each on a database of its own: the measured one talks to Postgres directly;
        // the other through a relay that counts its statements, in a window of its own (statementWindow). A relay
        // in the measured windows would cost this process, which also runs the clients, CPU on the same cores and
        // every statement a hop: it took 20-40 % off the Postgres cycles/s on a VM with dear system calls.
        const argv = (port: number, url: string) => ours(port, ['--database-url', url], tree.dir);
        const measured = await postgresServer(name, tree.dir, logDir, argv);
        let counted: Awaited<ReturnType<typeof postgresServer>>;
        try {
          counted = await postgresServer(`${name}-statements`, tree.dir, logDir, argv, true);
        } catch (err) {
          await measured.stop();
          throw err;
        }
        const sqlTop = Number(args['sql-top']);
        const report = () => {
          if (!sqlTop || !counted.counter) return;
          const all = counted.counter.byText();
          const total = all.reduce((a, [, n]) => a + n, 0);
          log(`${name}: ${total} statements in its statement window (and start-up), the most sent:`);
          for (const [sql, n] of all.slice(0, sqlTop)) log(`  ${String(n).padStart(7)}  ${sql}`);
        };
        const contender = serverContender(name, measured.server, async () => {
          report();
          await counted.stop();
          await measured.dropDb();
        });
        contenders.push({
          ...contender,
          statementsPerCycle: () => statementWindow(name, counted.server, () => counted.counter!.statements()),
        });
      }
    }
  } catch (err) {
    for (const c of contenders) await c.stop();
    throw err;
  }
  return contenders;
}

async function main(): Promise<void> {
  const logDir = await mkdtemp(path.join(os.tmpdir(), 'ap-bench-'));
  const contenders = await startContenders(logDir);
  if (!contenders.length && only.has('streams')) {
    await runStreamBench({ write: !args['no-write'] });
    return;
  }
  const windows = new Map<TargetName, Window[]>(contenders.map((c) => [c.target, []]));
  const latencies = new Map<TargetName, { p50: number; p99: number }>();
  const sqlPerCycle = new Map<TargetName, number>();
  try {
    // All servers are up for the whole run; each target takes its turn once per round.
    for (let round = 1; round <= rounds; round++) {
      for (const c of contenders) {
        const warmup = round === 1 ? firstWarmupSeconds : warmupSeconds;
        log(
          `round ${round}/${rounds}: ${c.target}, ${clients} clients, ${warmup}s warm-up + ${windowSeconds.toFixed(1)}s`,
        );
        const w = await c.window(warmup);
        windows.get(c.target)!.push(w);
        const cpu =
          w.cpu !== undefined && w.completed ? `, server CPU ${fmt((w.cpu * 1000) / w.completed)} ms/cycle` : '';
        log(
          `  ${(w.completed / windowSeconds).toFixed(1)} cycles/s${cpu}, load avg ${w.loadAvg.toFixed(1)}, errors ${w.errors}`,
        );
      }
    }
    for (const c of contenders) {
      if (!c.statementsPerCycle) continue;
      log(`${c.target}: statements per cycle, in a window through the statement counter`);
      sqlPerCycle.set(c.target, await c.statementsPerCycle());
    }
    for (const c of contenders) {
      if (!c.latency) continue;
      log(`${c.target}: created->running on ${latencySamples} sequential runs`);
      latencies.set(c.target, await c.latency());
    }
  } finally {
    for (const c of contenders) await c.stop();
    log(`server logs in ${logDir}`);
  }
  const results = contenders.map((c) => {
    const r = combine(c.target, windows.get(c.target)!);
    const l = latencies.get(c.target);
    const sql = sqlPerCycle.get(c.target);
    const withSql = sql !== undefined && Number.isFinite(sql) ? { ...r, statementsPerCycle: sql } : r;
    return l ? { ...withSql, startP50: l.p50, startP99: l.p99 } : withSql;
  });
  const table = report(results) + limitRatiosByRound(windows) + baselineComparison(windows);
  if (args.json) await writeFile(args.json, JSON.stringify(results, null, 2));
  process.stdout.write(`${table}\n`);
  if (!args['no-write']) {
    await mkdir(path.dirname(resultsFile), { recursive: true });
    await writeFile(resultsFile, table);
    log(`wrote ${path.relative(root, resultsFile)}`);
  }
  // Streams: time to first token and tokens/s on one replica and across two (bench/streams.ts).
  if (only.has('streams')) await runStreamBench({ write: !args['no-write'] });
}

if (process.env.BENCH_LIMIT_CHILD) await limitChild();
else await main();

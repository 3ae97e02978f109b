// Server CPU per run cycle of two checkouts, in short windows that alternate (A B, B A, A B, ...), so the drift of a
// shared machine's speed falls on both alike and a change of a few per cent shows in the paired ratios. bench/agent-
// server.ts compares the same way with its rounds, but its windows are 15-20 s apart: too coarse for small changes.
//   node --import tsx bench/ab-cycle.ts --a <checkout> --b <checkout> [--store embedded|postgres] [--pairs 20]
//     [--seconds 3] [--clients 16] [--a-node-flags="..."] [--b-node-flags="..."] (the servers' node flags; the same
//     checkout twice with different flags compares the flags) [--a-env="K=V K2=V2"] [--b-env="..."] (variables
//     added to a server's environment, e.g. LANGGRAPH_POSTGRES_POOL_MAX_SIZE=4)
// Both checkouts need `npm run build:cli` (and node_modules, e.g. a symlink to this one's). A cycle is the bench's:
// create thread → create run → join → get state → get run. Server CPU: the process's user+system time from /proc;
// with --store postgres also the CPU of every process named postgres in each window (nothing else should use it).
// Each median comes with a 90 % bootstrap interval over the pairs. On a VM whose speed drifts, medians of 2-8 % have
// come out in favour of B with the trees either way round (bench/results/issue-30.md, seventh session): trust an
// effect only when its interval excludes 1 and it keeps its sign with --a and --b swapped.
import type { ChildProcess } from 'node:child_process';
import os from 'node:os';
import path from 'node:path';
import { parseArgs } from 'node:util';
import { Client } from '@langchain/langgraph-sdk';
import {
  cycles as runCycles,
  freshStore,
  postgresCpuSeconds,
  startAgentServer,
  threadCpuSeconds,
} from './agent-server-process.ts';

const { values: args } = parseArgs({
  options: {
    a: { type: 'string' },
    b: { type: 'string' },
    store: { type: 'string', default: 'embedded' },
    pairs: { type: 'string', default: '20' },
    seconds: { type: 'string', default: '3' },
    clients: { type: 'string', default: '16' },
    'a-node-flags': { type: 'string', default: '' },
    'b-node-flags': { type: 'string', default: '' },
    'a-env': { type: 'string', default: '' },
    'b-env': { type: 'string', default: '' },
  },
});
if (!args.a || !args.b) throw new Error('usage: --a <checkout> --b <checkout> (see the head of bench/ab-cycle.ts)');

async function cpuSeconds(pid: number): Promise<number> {
  const [main, rest] = await threadCpuSeconds(pid);
  return main + rest;
}

interface Server {
  proc: ChildProcess;
  sdk: Client[];
  cleanup(): Promise<void>;
}

/** "K=V K2=V2" as an environment. */
function envOf(text: string): Record<string, string> {
  const pairs = text.split(' ').filter(Boolean);
  for (const p of pairs) if (!p.includes('=')) throw new Error(`--a-env / --b-env: ${p} is not NAME=value`);
  return Object.fromEntries(pairs.map((p) => [p.slice(0, p.indexOf('=')), p.slice(p.indexOf('=') + 1)]));
}

async function start(dir: string, port: number, nodeFlags: string, env: string): Promise<Server> {
  const store = await freshStore(args.store!, `ap_ab_${port}_${process.pid}`);
  const flags = nodeFlags.split(' ').filter(Boolean);
  const { proc } = await startAgentServer(dir, port, store.args, flags, envOf(env)).catch(async (err: unknown) => {
    await store.cleanup();
    throw err;
  });
  const sdk = Array.from({ length: Number(args.clients) }, () => new Client({ apiUrl: `http://127.0.0.1:${port}` }));
  return { proc, sdk, cleanup: store.cleanup };
}

const withPostgres = args.store === 'postgres';

async function window(s: Server, ms: number): Promise<{ cycles: number; cpuMs: number; pgMs: number; p99: number }> {
  const before = await cpuSeconds(s.proc.pid!);
  const pgBefore = withPostgres ? await postgresCpuSeconds() : 0;
  const latencies: number[] = [];
  const cycles = await runCycles(s.sdk, ms, latencies);
  const cpuMs = ((await cpuSeconds(s.proc.pid!)) - before) * 1000;
  const pgMs = withPostgres ? ((await postgresCpuSeconds()) - pgBefore) * 1000 : 0;
  return { cycles, cpuMs, pgMs, p99: quantile(latencies, 0.99) };
}

const quantile = (xs: number[], q: number) => [...xs].sort((x, y) => x - y)[Math.floor((xs.length - 1) * q)]!;
const median = (xs: number[]) => [...xs].sort((x, y) => x - y)[Math.floor(xs.length / 2)]!;

/** The 5th and 95th percentiles of the median over 2000 resamples (with replacement) of `xs`. */
function interval(xs: number[]): string {
  const medians = Array.from({ length: 2000 }, () =>
    median(Array.from(xs, () => xs[Math.floor(Math.random() * xs.length)]!)),
  ).sort((x, y) => x - y);
  const [lo, hi] = [medians[100]!, medians[1899]!];
  return `90 % interval ${lo.toFixed(3)}-${hi.toFixed(3)}${lo <= 1 && hi >= 1 ? ', no difference resolved' : ''}`;
}

const a = await start(path.resolve(args.a), 18951, args['a-node-flags']!, args['a-env']!);
const b = await start(path.resolve(args.b), 18952, args['b-node-flags']!, args['b-env']!);
try {
  // JIT warm-up: the first windows of a fresh process cost a third more.
  for (let i = 0; i < 3; i++) for (const s of [a, b]) await window(s, 4_000);
  const perCycle: Record<'a' | 'b', number[]> = { a: [], b: [] };
  const cycles = { a: 0, b: 0 };
  const ratios: number[] = [];
  const pgPerCycle: Record<'a' | 'b', number[]> = { a: [], b: [] };
  const pgRatios: number[] = [];
  const p99: Record<'a' | 'b', number[]> = { a: [], b: [] };
  const rates: number[] = [];
  for (let i = 0; i < Number(args.pairs); i++) {
    const order = i % 2 ? (['b', 'a'] as const) : (['a', 'b'] as const);
    const got: Partial<Record<'a' | 'b', number>> = {};
    const done: Partial<Record<'a' | 'b', number>> = {};
    const pg: Partial<Record<'a' | 'b', number>> = {};
    for (const k of order) {
      const w = await window(k === 'a' ? a : b, Number(args.seconds) * 1000);
      got[k] = w.cpuMs / w.cycles;
      pg[k] = w.pgMs / w.cycles;
      pgPerCycle[k].push(pg[k]);
      perCycle[k].push(got[k]);
      p99[k].push(w.p99);
      cycles[k] += w.cycles;
      done[k] = w.cycles;
    }
    ratios.push(got.a! / got.b!);
    if (withPostgres) pgRatios.push(pg.a! / pg.b!);
    rates.push(done.b! / done.a!);
  }
  const mean = (xs: number[]) => xs.reduce((s, x) => s + x, 0) / xs.length;
  process.stdout.write(
    [
      `store ${args.store}, ${args.clients} clients, ${args.pairs} pairs of ${args.seconds} s windows, load avg ${os.loadavg()[0]!.toFixed(1)}`,
      `A ${args.a}: server CPU ms/cycle ${perCycle.a.map((x) => x.toFixed(2)).join(' ')}`,
      `B ${args.b}: server CPU ms/cycle ${perCycle.b.map((x) => x.toFixed(2)).join(' ')}`,
      `A/B server CPU per cycle: median of paired ratios ${median(ratios).toFixed(3)} (${interval(ratios)}), means ${mean(perCycle.a).toFixed(2)} / ${mean(perCycle.b).toFixed(2)} ms; cycles ${cycles.a} / ${cycles.b}`,
      ...(withPostgres
        ? [
            `A/B Postgres CPU per cycle: median of paired ratios ${median(pgRatios).toFixed(3)} (${interval(pgRatios)}), means ${mean(pgPerCycle.a).toFixed(2)} / ${mean(pgPerCycle.b).toFixed(2)} ms`,
          ]
        : []),
      `B/A cycles per window: median of paired ratios ${median(rates).toFixed(3)} (${interval(rates)})`,
      `cycle latency p99 per window, ms: A ${p99.a.map((x) => x.toFixed(0)).join(' ')} (median ${median(p99.a).toFixed(0)}); B ${p99.b.map((x) => x.toFixed(0)).join(' ')} (median ${median(p99.b).toFixed(0)})`,
      '',
    ].join('\n'),
  );
} finally {
  for (const s of [a, b]) {
    s.proc.kill();
    await s.cleanup().catch(() => undefined);
  }
}

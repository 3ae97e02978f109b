// Density benchmark (not a test): how many deployments of the example agent one machine holds with the idle policy
// off and on, and what a sleeping deployment's first request costs. The local runtime and its proxy run in this
// process (as in `agentplane dev`, without the control plane), agent servers are real child processes (no sandbox).
// The example agent is built once (agentplane's packages linked as node_modules); every other deployment gets a
// copy of that build folder (a few files and a link), so the bench measures serving, not npm or git.
//
//   node --expose-gc --import tsx bench/density.ts [--budget-mb 0] [--sleepers 4] [--deployments 200] [--wakes 10]
//
// - policy off (skipped with --budget-mb 0): deployments are started one by one, each serving one run, until the
//   agents' memory (proportional set size of their process trees, /proc/<pid>/smaps_rollup) reaches --budget-mb;
// - policy on, slept: --sleepers deployments serve one run each and fall asleep by the idle policy;
// - policy on, many: --deployments deployments that were asleep when the platform stopped (a sleep record beside
//   their build, what the runtime writes when one falls asleep) are deployed: each is routed and asleep with no
//   process, as after a restart of the platform; what they cost is this process's growth (RSS after a GC) and disk;
// - wake latency: --wakes of them are woken one at a time by their first request (POST /runs/wait of one chat turn,
//   then POST /runs/stream: its first event), with where the first wakes' time went (the runtime's lines and the
//   agent server's own start_ms).
//
// Results go to stdout and bench/results/density.md.
import { execFileSync } from 'node:child_process';
import { cpSync, mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { cpus, loadavg, tmpdir } from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { parseArgs } from 'node:util';
import Fastify from 'fastify';
import { silentLogger } from '../src/lib/logger.ts';
import { LocalRuntime } from '../src/operator/runtimes/local/index.ts';
import { deploymentProxy } from '../src/operator/runtimes/local/proxy.ts';
import type { ServerSpec } from '../src/operator/runtimes/types.ts';
import { makeExampleRepo } from '../test/operator/helpers/example-repo.ts';
import { buildAndServe, until } from '../test/operator/helpers/local-serve.ts';

const root = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '..');
const { values: args } = parseArgs({
  options: {
    'budget-mb': { type: 'string', default: '0' },
    sleepers: { type: 'string', default: '4' },
    deployments: { type: 'string', default: '200' },
    wakes: { type: 'string', default: '10' },
  },
});
const budgetMb = Number(args['budget-mb']);
const sleepers = Number(args.sleepers);
const many = Number(args.deployments);
const wakes = Math.min(Number(args.wakes), many);
const MACHINE_MB = 24 * 1024;
const loads: number[] = [];
const sampleLoad = () => loads.push(loadavg()[0]!);

/** Proportional set size (kB -> MB) of a process and its descendants: shared pages counted once over all agents. */
function pssMb(pid: number): number {
  let kb = 0;
  const walk = (p: number) => {
    try {
      const m = /^Pss:\s+(\d+)/m.exec(readFileSync(`/proc/${p}/smaps_rollup`, 'utf8'));
      kb += Number(m?.[1] ?? 0);
    } catch {
      return;
    }
    let kids: number[] = [];
    try {
      kids = execFileSync('ps', ['-o', 'pid=', '--ppid', String(p)], { encoding: 'utf8' })
        .split('\n')
        .map((s) => Number(s.trim()))
        .filter((n) => n > 0);
    } catch {
      // none
    }
    kids.forEach(walk);
  };
  walk(pid);
  return kb / 1024;
}

const gc = (globalThis as { gc?: () => void }).gc;
/** This process's resident memory (MB), after a full GC when --expose-gc allows one. */
function selfRssMb(): number {
  gc?.();
  return process.memoryUsage().rss / 1024 / 1024;
}

function quantile(xs: number[], q: number): number {
  const s = [...xs].sort((a, b) => a - b);
  return s[Math.min(s.length - 1, Math.floor(q * s.length))]!;
}

/** Every deploy-log line per deployment with when this process received it, and the agent's own start_ms. */
const timeline: { deploymentId: string; at: number; msg: string; startMs?: Record<string, number> }[] = [];
const tmp = mkdtempSync(path.join(tmpdir(), 'ap-density-'));
const dataDir = path.join(tmp, 'data');
const repo = makeExampleRepo(tmp);
const idle = { minuteMs: 1_000, checkMs: 250, wakeWaitMs: 300_000 };
const runtime = new LocalRuntime({
  dataDir,
  logs: {
    append: async (ref, type, lines) => {
      if (type !== 'deploy') return;
      const at = Date.now();
      for (const line of lines) {
        try {
          const rec = JSON.parse(line) as { msg?: string; start_ms?: Record<string, number> };
          if (rec.msg) timeline.push({ deploymentId: ref.deploymentId, at, msg: rec.msg, startMs: rec.start_ms });
        } catch {
          timeline.push({ deploymentId: ref.deploymentId, at, msg: line });
        }
      }
    },
  },
  logger: silentLogger(),
  allowLocalRepos: [tmp],
  idle,
  healthTimeoutMs: 300_000,
});
const app = Fastify();
await deploymentProxy(app, { resolve: (id) => runtime.backend(id) });
runtime.setBaseUrl(await app.listen({ host: '127.0.0.1', port: 0 }));
const specs = new Map<string, ServerSpec>();
runtime.onChange((ref) => {
  const spec = specs.get(ref.deploymentId);
  if (spec && spec.revision === ref.revision) void runtime.deploy(spec);
});

const specOf = (n: number, idleMinutes: number): ServerSpec => ({
  namespace: 'default',
  deployment: `d${n}`,
  deploymentId: `dep-${n}`,
  revision: `d${n}-r1`,
  graphConfigPath: 'langgraph.json',
  env: {},
  tenantId: 't1',
  access: 'public',
  idleTimeoutMinutes: idleMinutes,
});

// One real build; the others are copies of its folder (the build marker and checkout included).
const first = specOf(0, 0);
specs.set(first.deploymentId, first);
await buildAndServe(runtime, first, repo.path);
const builtDir = path.join(tmp, 'build-template');
cpSync(path.join(dataDir, 'deployments', first.deploymentId, 'revisions', first.revision), builtDir, {
  recursive: true,
  verbatimSymlinks: true,
});
const copyBuild = (spec: ServerSpec) => {
  const dir = path.join(dataDir, 'deployments', spec.deploymentId, 'revisions');
  mkdirSync(dir, { recursive: true });
  cpSync(builtDir, path.join(dir, spec.revision), { recursive: true, verbatimSymlinks: true });
};

async function serve(spec: ServerSpec): Promise<void> {
  specs.set(spec.deploymentId, spec);
  copyBuild(spec);
  await until('the server', async () => (await runtime.deploy(spec)).phase === 'Ready', 300_000);
  await runtime.route(spec, spec.revision);
}

const human = JSON.stringify({ assistant_id: 'agent', input: { messages: [{ role: 'human', content: 'Ada' }] } });
async function chat(spec: ServerSpec): Promise<number> {
  const url = await runtime.url(spec);
  const t0 = performance.now();
  const res = await fetch(`${url}/runs/wait`, {
    method: 'POST',
    headers: { 'content-type': 'application/json' },
    body: human,
  });
  if (!res.ok) throw new Error(`runs/wait answered ${res.status}: ${await res.text()}`);
  await res.arrayBuffer();
  return performance.now() - t0;
}

async function firstEvent(spec: ServerSpec): Promise<number> {
  const url = await runtime.url(spec);
  const t0 = performance.now();
  const res = await fetch(`${url}/runs/stream`, {
    method: 'POST',
    headers: { 'content-type': 'application/json' },
    body: human,
  });
  if (!res.ok || !res.body) throw new Error(`runs/stream answered ${res.status}`);
  const reader = res.body.getReader();
  let text = '';
  let at = 0;
  for (;;) {
    const { value, done } = await reader.read();
    if (done) break;
    text += Buffer.from(value).toString();
    if (!at && /^event: /m.test(text)) at = performance.now() - t0;
  }
  return at;
}

const asleep = (spec: ServerSpec) => {
  const s = runtime.serverStatus(spec);
  return s?.phase === 'Ready' && !!s.sleeping && !runtime.pids().length;
};

// 1. Policy off: until the agents hold the budget.
const off: { n: number; agentsMb: number }[] = [];
await chat(first);
off.push({ n: 1, agentsMb: runtime.pids().reduce((a, p) => a + pssMb(p), 0) });
for (let n = 1; budgetMb > 0 && off.at(-1)!.agentsMb < budgetMb; n++) {
  const spec = specOf(n, 0);
  await serve(spec);
  await chat(spec);
  const agentsMb = runtime.pids().reduce((a, p) => a + pssMb(p), 0);
  off.push({ n: n + 1, agentsMb });
  sampleLoad();
  console.log(`policy off: ${n + 1} deployments, agents ${agentsMb.toFixed(0)} MB`);
}
const perAwakeMb = off.at(-1)!.agentsMb / off.at(-1)!.n;
const offCount = off.at(-1)!.n;
for (let n = 0; n < offCount; n++) await runtime.cleanup(specOf(n, 0));
specs.clear();

// 2. Policy on: deployments that served once and fell asleep.
for (let n = 0; n < sleepers; n++) {
  const spec = specOf(100_000 + n, 1);
  await serve(spec);
  await chat(spec);
  await until('sleep', () => asleep(spec), 120_000);
  sampleLoad();
  console.log(`policy on: ${n + 1} deployments fell asleep`);
}

// 3. Many deployments asleep: written down as the runtime writes a sleep, then deployed as after a restart.
const selfBefore = selfRssMb();
const restoreStart = performance.now();
const cpuBefore = process.cpuUsage();
const sleepy: ServerSpec[] = [];
for (let n = 0; n < many; n++) {
  const spec = specOf(1 + n, 1);
  specs.set(spec.deploymentId, spec);
  copyBuild(spec);
  const record = { revision: spec.revision, since: Date.now() };
  writeFileSync(path.join(dataDir, 'deployments', spec.deploymentId, 'sleep.json'), `${JSON.stringify(record)}\n`);
  const status = await runtime.deploy(spec);
  if (status.phase !== 'Ready' || !status.sleeping)
    throw new Error(`d${n + 1} is not asleep: ${JSON.stringify(status)}`);
  sleepy.push(spec);
  if ((n + 1) % 100 === 0) {
    sampleLoad();
    console.log(`policy on: ${n + 1} deployments asleep, platform RSS ${selfRssMb().toFixed(0)} MB`);
  }
}
const restoreCpu = process.cpuUsage(cpuBefore);
const restoreMs = performance.now() - restoreStart;
const selfAfter = selfRssMb();
const perSleeperMb = (selfAfter - selfBefore) / Math.max(1, many);
const diskKb = Number(
  execFileSync('du', ['-sk', path.join(dataDir, 'deployments')], { encoding: 'utf8' }).split('\t')[0],
);
const diskPerKb = diskKb / (many + sleepers);
if (runtime.pids().length !== 0) throw new Error(`agent servers running: ${runtime.pids().length}`);

// 4. Wake latency: first request to its answer, then (asleep again) a stream's first event.
const toAnswer: number[] = [];
const toFirstEvent: number[] = [];
const wakeLines: string[] = [];
const startMs: Record<string, number>[] = [];
for (let i = 0; i < wakes; i++) {
  const spec = sleepy[Math.floor((i * sleepy.length) / wakes)]!;
  const sent = Date.now();
  toAnswer.push(await chat(spec));
  sampleLoad();
  const mine = () => timeline.filter((t) => t.deploymentId === spec.deploymentId && t.at >= sent);
  const listening = await until('its start', () => mine().find((t) => t.msg === 'agent server listening'), 30_000);
  if (listening.startMs) startMs.push(listening.startMs);
  if (i < 2) {
    const lines = mine().filter((t) => !/^\{/.test(t.msg));
    wakeLines.push(
      [...lines.map((t) => `${t.at - sent} ms ${t.msg.slice(0, 60)}`), `${toAnswer.at(-1)!.toFixed(0)} ms answer`].join(
        '; ',
      ),
    );
  }
  await until('asleep', () => asleep(spec), 120_000);
  toFirstEvent.push(await firstEvent(spec));
  await until('asleep', () => asleep(spec), 120_000);
  console.log(
    `wake ${i + 1}: answer ${toAnswer.at(-1)!.toFixed(0)} ms, first event ${toFirstEvent.at(-1)!.toFixed(0)} ms, start ${JSON.stringify(listening.startMs)}`,
  );
}

await runtime.shutdown();
await app.close();
rmSync(tmp, { recursive: true, force: true });

const activeShare = 0.05;
const sleeperMb = Math.max(perSleeperMb, 0.05);
const onCapacity = Math.floor(MACHINE_MB / (activeShare * perAwakeMb + (1 - activeShare) * sleeperMb));
const s2 = (x: number) => `${(x / 1000).toFixed(2)} s`;
const median = (xs: number[]) => quantile(xs, 0.5);
const steps = Object.keys(startMs[0] ?? {});
const report = `# Density: idle agents sleep (bench/density.ts)

${new Date().toISOString().slice(0, 16).replace('T', ' ')} UTC, ${cpus().length} cores shared with other work (load
average ${Math.min(...loads).toFixed(0)} to ${Math.max(...loads).toFixed(0)} while it ran), Node ${process.version},
embedded store, no sandbox; the example agent;
\`node --expose-gc --import tsx bench/density.ts --budget-mb ${budgetMb} --sleepers ${sleepers} --deployments ${many} --wakes ${wakes}\`.

| | policy off | policy on |
|---|---|---|
| deployments measured | ${offCount} awake (${budgetMb > 0 ? `until the agents held ${budgetMb} MB` : 'one, after one run'}) | ${many} asleep (+ ${sleepers} that fell asleep after a run) |
| memory per deployment | ${perAwakeMb.toFixed(0)} MB (agent process tree, PSS) | ${perSleeperMb.toFixed(3)} MB (platform RSS growth after a GC, ${selfBefore.toFixed(0)} → ${selfAfter.toFixed(0)} MB; no process) |
| disk per deployment | | ${diskPerKb.toFixed(0)} kB (build folder with a linked node_modules, store, logs) |
| deployments on a 24 GB machine (extrapolated) | ${Math.floor(MACHINE_MB / perAwakeMb)} | ${onCapacity} with 5 % awake (asleep at max(measured, 0.05 MB)) |

Putting ${many} deployments to sleep from their records took ${s2(restoreMs)} wall, ${s2((restoreCpu.user + restoreCpu.system) / 1000)} CPU of
the platform process (build folder copies included).

Wake latency from asleep (the first request starts the server; ${wakes} wakes, each then asleep again for a stream):

| | p50 | p99 | max |
|---|---|---|---|
| first request (runs/wait of one chat turn) to its answer | ${s2(median(toAnswer))} | ${s2(quantile(toAnswer, 0.99))} | ${s2(Math.max(...toAnswer))} |
| a stream's (runs/stream) first event | ${s2(median(toFirstEvent))} | ${s2(quantile(toFirstEvent, 0.99))} | ${s2(Math.max(...toFirstEvent))} |

The agent server's own start (\`start_ms\` of its 'agent server listening' line; medians over the first requests'
wakes, ms): ${steps.map((k) => `${k} ${median(startMs.map((m) => m[k] ?? 0))}`).join(', ')}. \`process\` is Node's start
and the platform's modules up to loading the graph, \`graphs\` the graph's modules (LangGraph, LangChain) and its
config, \`store\` opening the store and its migrations, \`app\` the HTTP app, \`listen\` taking connections and the
run engine.

The first wakes, line by line (ms after the request was sent; the runtime's lines as this process received them):

${wakeLines.map((l) => `- ${l}`).join('\n')}
`;
console.log(report);
writeFileSync(path.join(root, 'bench/results/density.md'), report);

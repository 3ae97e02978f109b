// Density benchmark (not a test): how many deployments of the example agent one machine holds with the idle policy
// off and on, and what a sleeping deployment's first request costs. The local runtime and its proxy run in this
// process (as in `agentplane dev`, without the control plane), agent servers are real child processes (no sandbox).
// The example agent is built once; every other deployment gets a hard-linked copy of that build folder, so the bench
// measures serving, not npm.
//
//   node --import tsx bench/density.ts [--budget-mb 2048] [--sleepers 40] [--wakes 20]
//
// - policy off: deployments are started one by one, each serving one run, until the agents' memory (proportional
//   set size of their process trees, /proc/<pid>/smaps_rollup) reaches --budget-mb; the per-deployment cost
//   extrapolates to a 24 GB machine;
// - policy on: --sleepers deployments serve one run each and fall asleep; what they still cost is this process's
//   own growth (routes, ports, state); with 5 % of them awake, the capacity follows;
// - wake latency: a sleeping deployment's first request (POST /threads/<id>/runs/wait of one chat turn) to its
//   answer, and a stream's (POST /runs/stream) first event, p50/p99 over --wakes each.
//
// Results go to stdout and bench/results/density.md.
import { execFileSync } from 'node:child_process';
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
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
    'budget-mb': { type: 'string', default: '2048' },
    sleepers: { type: 'string', default: '40' },
    wakes: { type: 'string', default: '20' },
  },
});
const budgetMb = Number(args['budget-mb']);
const sleepers = Number(args.sleepers);
const wakes = Number(args.wakes);
const MACHINE_MB = 24 * 1024;

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

const selfRssMb = () => process.memoryUsage().rss / 1024 / 1024;

function quantile(xs: number[], q: number): number {
  const s = [...xs].sort((a, b) => a - b);
  return s[Math.min(s.length - 1, Math.floor(q * s.length))]!;
}

const timeline: { deploymentId: string; at: number; msg: string }[] = [];
const tmp = mkdtempSync(path.join(tmpdir(), 'ap-density-'));
const dataDir = path.join(tmp, 'data');
const repo = makeExampleRepo(tmp);
const idle = { minuteMs: 1_000, checkMs: 250, wakeWaitMs: 60_000 };
const runtime = new LocalRuntime({
  dataDir,
  // The agents' own log lines (pino JSON, with their time) of each deployment: where a wake's start goes.
  logs: {
    append: async (ref, type, lines) => {
      if (type !== 'deploy') return;
      for (const line of lines) {
        try {
          // pino writes its time as epoch ms or (the agent server's format) as an ISO string.
          const rec = JSON.parse(line) as { time?: number | string; msg?: string };
          const at = typeof rec.time === 'string' ? Date.parse(rec.time) : rec.time;
          if (at && rec.msg) timeline.push({ deploymentId: ref.deploymentId, at, msg: rec.msg });
        } catch {
          // the runtime's own lines
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

// One real build; the others are hard-linked copies of its folder (the build marker and checkout included).
const first = specOf(0, 0);
specs.set(first.deploymentId, first);
await buildAndServe(runtime, first, repo.path);
// Kept apart: the first deployment is deleted with the policy-off ones.
const builtDir = path.join(tmp, 'build-template');
execFileSync('cp', [
  '-al',
  path.join(dataDir, 'deployments', first.deploymentId, 'revisions', first.revision),
  builtDir,
]);

async function serve(spec: ServerSpec): Promise<void> {
  specs.set(spec.deploymentId, spec);
  const dir = path.join(dataDir, 'deployments', spec.deploymentId, 'revisions');
  execFileSync('mkdir', ['-p', dir]);
  execFileSync('cp', ['-al', builtDir, path.join(dir, spec.revision)]);
  await until('the server', async () => (await runtime.deploy(spec)).phase === 'Ready', 300_000);
  await runtime.route(spec, spec.revision);
}

const base = async (spec: ServerSpec) => runtime.url(spec);
async function chat(spec: ServerSpec): Promise<number> {
  const url = await base(spec);
  const t0 = performance.now();
  const res = await fetch(`${url}/runs/wait`, {
    method: 'POST',
    headers: { 'content-type': 'application/json' },
    body: JSON.stringify({ assistant_id: 'agent', input: { messages: [{ role: 'human', content: 'Ada' }] } }),
  });
  if (!res.ok) throw new Error(`runs/wait answered ${res.status}: ${await res.text()}`);
  await res.arrayBuffer();
  return performance.now() - t0;
}

async function firstEvent(spec: ServerSpec): Promise<number> {
  const url = await base(spec);
  const t0 = performance.now();
  const res = await fetch(`${url}/runs/stream`, {
    method: 'POST',
    headers: { 'content-type': 'application/json' },
    body: JSON.stringify({ assistant_id: 'agent', input: { messages: [{ role: 'human', content: 'Ada' }] } }),
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
for (let n = 1; off.at(-1)!.agentsMb < budgetMb; n++) {
  const spec = specOf(n, 0);
  await serve(spec);
  await chat(spec);
  const agentsMb = runtime.pids().reduce((a, p) => a + pssMb(p), 0);
  off.push({ n: n + 1, agentsMb });
  console.log(`policy off: ${n + 1} deployments, agents ${agentsMb.toFixed(0)} MB`);
}
const perAwakeMb = off.at(-1)!.agentsMb / off.at(-1)!.n;
const offCount = off.at(-1)!.n;
// Everything off-policy goes away before the next phase.
for (let n = 0; n < offCount; n++) await runtime.cleanup(specOf(n, 0));
specs.clear();

// 2. Policy on: deployments that served once and fell asleep.
const selfBefore = selfRssMb();
const sleepy: ServerSpec[] = [];
for (let n = 0; n < sleepers; n++) {
  const spec = specOf(1000 + n, 1);
  await serve(spec);
  await chat(spec);
  sleepy.push(spec);
  // Let it fall asleep before the next starts: this machine is shared.
  await until('sleep', () => asleep(spec) || runtime.pids().length === 0, 120_000);
  console.log(`policy on: ${n + 1} deployments asleep`);
}
const selfAfter = selfRssMb();
const perSleeperMb = Math.max(0, (selfAfter - selfBefore) / sleepers);

// 3. Wake latency: first request to its answer, and a stream's first event, from asleep.
const toAnswer: number[] = [];
const toFirstEvent: number[] = [];
let wakeTimeline = '';
for (let i = 0; i < wakes; i++) {
  const spec = sleepy[i % sleepy.length]!;
  await until('asleep', () => asleep(spec), 120_000);
  const wokeAt = Date.now();
  toAnswer.push(await chat(spec));
  if (i === 0) {
    // The first wake's start, from the agent's own log lines (ms after the request was sent).
    await new Promise((r) => setTimeout(r, 1500));
    wakeTimeline = timeline
      .filter((t) => t.deploymentId === spec.deploymentId && t.at >= wokeAt)
      .map((t) => `${t.at - wokeAt} ms ${t.msg}`)
      .join('; ');
  }
  await until('asleep', () => asleep(spec), 120_000);
  toFirstEvent.push(await firstEvent(spec));
  console.log(
    `wake ${i + 1}: answer ${toAnswer.at(-1)!.toFixed(0)} ms, first event ${toFirstEvent.at(-1)!.toFixed(0)} ms`,
  );
}

await runtime.shutdown();
await app.close();
rmSync(tmp, { recursive: true, force: true });

const activeShare = 0.05;
const onCapacity = Math.floor(
  MACHINE_MB / (activeShare * perAwakeMb + (1 - activeShare) * Math.max(perSleeperMb, 0.5)),
);
const ms = (x: number) => `${(x / 1000).toFixed(2)} s`;
const report = `# Density: idle agents sleep (bench/density.ts)

${new Date().toISOString().slice(0, 10)}, ${(await import('node:os')).cpus().length} cores (shared with other work),
Node ${process.version}, embedded store, no sandbox; the example agent; \`node --import tsx bench/density.ts
--budget-mb ${budgetMb} --sleepers ${sleepers} --wakes ${wakes}\`.

| | policy off | policy on |
|---|---|---|
| deployments measured | ${offCount} (until the agents held ${budgetMb} MB) | ${sleepers} asleep |
| memory per deployment | ${perAwakeMb.toFixed(0)} MB (agent process tree, PSS, after one run) | ${perSleeperMb.toFixed(2)} MB (platform process growth while asleep; no process) |
| deployments on a 24 GB machine (extrapolated) | ${Math.floor(MACHINE_MB / perAwakeMb)} | ${onCapacity} with 5 % awake (awake ones at ${perAwakeMb.toFixed(0)} MB; asleep at max(measured, 0.5 MB)) |

Wake latency from asleep (the first request starts the server; ${wakes} samples each):

| | p50 | p99 | max |
|---|---|---|---|
| first request (runs/wait of one chat turn) to its answer | ${ms(quantile(toAnswer, 0.5))} | ${ms(quantile(toAnswer, 0.99))} | ${ms(Math.max(...toAnswer))} |
| a stream's (runs/stream) first event | ${ms(quantile(toFirstEvent, 0.5))} | ${ms(quantile(toFirstEvent, 0.99))} | ${ms(Math.max(...toFirstEvent))} |

Where the first wake went (the agent's log lines, ms after the request; the answer came at
${toAnswer[0]!.toFixed(0)} ms): ${wakeTimeline || 'no lines'}.

Policy-off samples (deployments: agents' MB): ${off.map((o) => `${o.n}: ${o.agentsMb.toFixed(0)}`).join(', ')}.
`;
console.log(report);
writeFileSync(path.join(root, 'bench/results/density.md'), report);

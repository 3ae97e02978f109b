// Agent protocols benchmark (not a test): one chat turn of the example agent on a new thread, answered when the
// run has ended, three ways against one real agent-server process: through the LangGraph API (POST
// /threads/{id}/runs/wait, if_not_exists create), as an MCP tools/call (POST /mcp) and as an A2A 0.3 message/send
// (POST /a2a/{assistant_id}). Each is one HTTP request from a plain fetch client, so what differs is the server's
// work: MCP and A2A make their API requests as the caller in-process (http/as-caller.ts). The three take turns in
// short windows, so background load hits them alike; reported: calls/s with `--clients` concurrent callers, the
// server's CPU per call (its threads' time on a CPU, to the nanosecond) and the sequential latency p50, each against
// the LangGraph API's.
//
//   node --import tsx bench/agent-protocols.ts                    # writes bench/results/agent-protocols.md
//   node --import tsx bench/agent-protocols.ts --store postgres --rounds 6 --seconds 4 --no-write
//   node --import tsx bench/agent-protocols.ts --only MCP --profile /tmp/prof --no-write   # then profile-summary.ts
import { randomUUID } from 'node:crypto';
import { writeFile } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { parseArgs } from 'node:util';
import { freshStore, schedCpuSeconds, startAgentServer } from './agent-server-process.ts';

const root = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '..');
const { values: args } = parseArgs({
  options: {
    store: { type: 'string', default: 'embedded' },
    rounds: { type: 'string', default: '5' },
    seconds: { type: 'string', default: '3' },
    clients: { type: 'string', default: '8' },
    sequential: { type: 'string', default: '60' },
    'no-write': { type: 'boolean', default: false },
    // The ways whose name contains this text (a profile of one way alone), and the server run with --cpu-prof.
    only: { type: 'string' },
    profile: { type: 'string' },
  },
});
const ROUNDS = Number(args.rounds);
const WINDOW_MS = Number(args.seconds) * 1000;
const CLIENTS = Number(args.clients);
const SEQUENTIAL = Number(args.sequential);
const QUESTION = 'What is the weather in San Francisco?';

type Way = 'LangGraph API runs/wait' | 'MCP tools/call' | 'A2A 0.3 message/send';
const WAYS = (['LangGraph API runs/wait', 'MCP tools/call', 'A2A 0.3 message/send'] as Way[]).filter(
  (w) => !args.only || w.includes(args.only),
);

const pct = (xs: number[], p: number) => {
  const s = [...xs].sort((a, b) => a - b);
  return s[Math.min(s.length - 1, Math.floor((p / 100) * s.length))]!;
};
const median = (xs: number[]) => pct(xs, 50);

async function post(url: string, body: unknown): Promise<unknown> {
  const res = await fetch(url, {
    method: 'POST',
    headers: { 'content-type': 'application/json', accept: 'application/json' },
    body: JSON.stringify(body),
  });
  if (!res.ok) throw new Error(`${url}: ${res.status} ${await res.text()}`);
  return res.json();
}

/** One call each way; each checks the agent answered, so a broken way cannot look fast. */
function callers(base: string, assistantId: string): Record<Way, () => Promise<void>> {
  const input = { messages: [{ role: 'user', content: QUESTION }] };
  const answered = (text: unknown) => {
    if (!JSON.stringify(text).includes('San Francisco')) throw new Error(`unexpected answer: ${JSON.stringify(text)}`);
  };
  let id = 0;
  return {
    'LangGraph API runs/wait': async () => {
      const values = await post(`${base}/threads/${randomUUID()}/runs/wait`, {
        assistant_id: assistantId,
        input,
        if_not_exists: 'create',
      });
      answered(values);
    },
    'MCP tools/call': async () => {
      const out = (await post(`${base}/mcp`, {
        jsonrpc: '2.0',
        id: ++id,
        method: 'tools/call',
        params: { name: 'agent', arguments: input },
      })) as { result?: { structuredContent?: unknown } };
      answered(out.result?.structuredContent);
    },
    'A2A 0.3 message/send': async () => {
      const out = (await post(`${base}/a2a/${assistantId}`, {
        jsonrpc: '2.0',
        id: ++id,
        method: 'message/send',
        params: {
          message: {
            kind: 'message',
            messageId: randomUUID(),
            role: 'user',
            parts: [{ kind: 'text', text: QUESTION }],
          },
        },
      })) as { result?: { status?: { state?: string }; artifacts?: unknown } };
      if (out.result?.status?.state !== 'completed') throw new Error(`A2A: ${JSON.stringify(out)}`);
      answered(out.result.artifacts);
    },
  };
}

async function main(): Promise<void> {
  const store = await freshStore(args.store!, `ap_bench_protocols_${process.pid}`);
  const port = 20_000 + (process.pid % 20_000);
  const profile = args.profile ? ['--cpu-prof', `--cpu-prof-dir=${path.resolve(args.profile)}`] : [];
  const { proc, url } = await startAgentServer(root, port, store.args, profile);
  const cpu = () => schedCpuSeconds(proc.pid!);
  const calls: Record<Way, number> = Object.fromEntries(WAYS.map((w) => [w, 0])) as never;
  const secs: Record<Way, number> = Object.fromEntries(WAYS.map((w) => [w, 0])) as never;
  const cpuSecs: Record<Way, number> = Object.fromEntries(WAYS.map((w) => [w, 0])) as never;
  const latency: Record<Way, number[]> = Object.fromEntries(WAYS.map((w) => [w, []])) as never;
  const ratios: Record<Way, number[]> = Object.fromEntries(WAYS.map((w) => [w, []])) as never;
  try {
    const assistants = (await post(`${url}/assistants/search`, { graph_id: 'agent', limit: 1 })) as Array<{
      assistant_id: string;
    }>;
    const call = callers(url, assistants[0]!.assistant_id);
    // Warm-up: the JIT, the graph's first build, the store's first statements.
    for (const w of WAYS) for (let i = 0; i < 30; i++) await call[w]();
    for (let round = 0; round < ROUNDS; round++) {
      const perCall: Partial<Record<Way, number>> = {};
      // Alternate the order per round, so none always runs right after another's leftovers.
      for (const w of round % 2 ? [...WAYS].reverse() : WAYS) {
        const cpu0 = await cpu();
        const t0 = performance.now();
        let n = 0;
        const end = Date.now() + WINDOW_MS;
        await Promise.all(
          Array.from({ length: CLIENTS }, async () => {
            while (Date.now() < end) {
              await call[w]();
              n++;
            }
          }),
        );
        const elapsed = (performance.now() - t0) / 1000;
        const used = (await cpu()) - cpu0;
        calls[w] += n;
        secs[w] += elapsed;
        cpuSecs[w] += used;
        perCall[w] = used / n;
        for (let i = 0; i < Math.ceil(SEQUENTIAL / ROUNDS); i++) {
          const s = performance.now();
          await call[w]();
          latency[w].push(performance.now() - s);
        }
      }
      const api = perCall['LangGraph API runs/wait'];
      if (api) for (const w of WAYS) ratios[w].push(perCall[w]! / api);
      process.stderr.write(`round ${round + 1}/${ROUNDS} done\n`);
    }
  } finally {
    proc.kill('SIGTERM');
    await new Promise((r) => proc.once('exit', r));
    await store.cleanup();
  }
  const base: Way = 'LangGraph API runs/wait';
  const rows = WAYS.map((w) => {
    const rate = calls[w] / secs[w];
    const cpuMs = (cpuSecs[w] / calls[w]) * 1000;
    const p50 = median(latency[w]);
    // Without the API (--only), there is nothing to compare with.
    const alone = !WAYS.includes(base);
    const vs = (x: number, y: number) => (w === base || alone ? '—' : `${((x / y - 1) * 100).toFixed(1)} %`);
    return (
      `| ${w} | ${rate.toFixed(1)} | ${cpuMs.toFixed(2)} | ${vs(cpuMs, (cpuSecs[base] / calls[base]) * 1000)} | ` +
      `${w === base || alone ? '—' : `${((median(ratios[w]) - 1) * 100).toFixed(1)} %`} | ${p50.toFixed(1)} | ` +
      `${alone ? '—' : vs(p50, median(latency[base]))} |`
    );
  });
  const report = [
    '# Agent protocols: one chat turn through the LangGraph API, MCP and A2A',
    '',
    `${new Date().toISOString()} · ${os.cpus().length} cores (${os.cpus()[0]?.model ?? '?'}) · load ` +
      `${os.loadavg()[0]!.toFixed(2)} · store ${args.store} · ${ROUNDS} rounds of ${args.seconds} s, ${CLIENTS} ` +
      `concurrent callers · \`node --import tsx bench/agent-protocols.ts --store ${args.store}\``,
    '',
    '| way | calls/s | server CPU ms/call | CPU vs API | CPU vs API (median of rounds) | sequential p50 ms | p50 vs API |',
    '|---|---|---|---|---|---|---|',
    ...rows,
    '',
  ].join('\n');
  process.stdout.write(report);
  if (!args['no-write']) await writeFile(path.join(root, 'bench/results/agent-protocols.md'), report);
}

await main();

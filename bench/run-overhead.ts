// CPU per run of the example agent (examples/agent) executed in this process, the way the agent server's executor
// runs it, with and without the extras the server adds around every run: the memory store attached (through the
// event-driven AsyncBatchedStore, src/agent-server/platform/batched-store.ts); and, for comparison, one more
// AsyncLocalStorage scope around each run (what naming the run in graph code's log lines cost before that moved to
// LangGraph's runnable config, src/agent-server/platform/context.ts). No HTTP, no database (MemorySaver): it isolates
// the graph-side cost of those extras from everything else the run-cycle benchmark measures.
// `lean` is `plain` with the agent server's lean run context (src/agent-server/shims/lean-run-context.ts: no
// langsmith RunTree per runnable call while tracing is off); `deltas` is `lean` with the callback handler that
// records a run-API run's messages as thread-protocol events (src/agent-server/runs/protocol-messages.ts), its
// events serialized as the executor does, as every run started through the run API has it.
//   node --import tsx bench/run-overhead.ts plain|store|context|both|lean|deltas [--runs N] [--concurrency N]
// One mode per process (an AsyncLocalStorage, once used, stays enabled for the process); alternate modes over
// several invocations on a shared machine.
import { AsyncLocalStorage } from 'node:async_hooks';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { parseArgs } from 'node:util';
import { InMemoryStore, MemorySaver } from '@langchain/langgraph';
import { loadGraphs } from '../src/agent-server/graphs/index.ts';
import { silentLogger } from '../src/lib/logger.ts';
import { installLeanRunContext } from '../src/agent-server/shims/lean-run-context.ts';
import { ProtocolMessagesRecorder } from '../src/agent-server/runs/protocol-messages.ts';
import { stringify } from '../src/agent-server/serde.ts';

const MODES = ['plain', 'store', 'context', 'both', 'lean', 'deltas'] as const;
const { values, positionals } = parseArgs({
  options: { runs: { type: 'string', default: '600' }, concurrency: { type: 'string', default: '16' } },
  allowPositionals: true,
});
const mode = positionals[0] as (typeof MODES)[number];
if (!MODES.includes(mode)) throw new Error(`usage: run-overhead.ts ${MODES.join('|')} [--runs N] [--concurrency N]`);
const runs = Number(values.runs);
const concurrency = Number(values.concurrency);
const root = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '..');

if (mode === 'lean' || mode === 'deltas') installLeanRunContext();
// loadGraphs patches the project's AsyncBatchedStore, as the server does.
const registry = await loadGraphs(path.join(root, 'examples/agent/langgraph.json'), { logger: silentLogger() });
const withStore = mode === 'store' || mode === 'both';
const withContext = mode === 'context' || mode === 'both';
const extraContext = new AsyncLocalStorage<Record<string, string>>();
const graph = await registry.getGraph(
  'agent',
  {},
  { checkpointer: new MemorySaver(), ...(withStore ? { store: new InMemoryStore() } : {}) },
);
const INPUT = { messages: [{ role: 'human', content: 'Ada' }] };

let n = 0;
let recorded = 0;
async function one(): Promise<void> {
  const thread_id = `t${n++}`;
  const callbacks =
    mode === 'deltas'
      ? [new ProtocolMessagesRecorder((_ns, payload) => void (recorded += stringify(payload).length))]
      : [];
  const exec = async () => {
    const options = { configurable: { thread_id }, streamMode: ['values'], ...(callbacks.length ? { callbacks } : {}) };
    for await (const _ of await graph.stream(INPUT, options as never));
  };
  if (withContext) await extraContext.run({ graph_id: 'agent', run_id: thread_id, thread_id }, exec);
  else await exec();
}

async function batch(count: number): Promise<void> {
  let left = count;
  await Promise.all(
    Array.from({ length: concurrency }, async () => {
      while (left-- > 0) await one();
    }),
  );
}

await batch(Math.max(50, runs / 4)); // warm-up (JIT)
const before = process.cpuUsage();
const started = performance.now();
await batch(runs);
const cpu = process.cpuUsage(before);
const cpuMs = (cpu.user + cpu.system) / 1000;
process.stdout.write(
  `${JSON.stringify({ mode, runs, concurrency, cpu_ms_per_run: +(cpuMs / runs).toFixed(3), wall_ms: Math.round(performance.now() - started), ...(mode === 'deltas' ? { recorded_bytes_per_run: Math.round(recorded / (runs + Math.max(50, runs / 4))) } : {}) })}\n`,
);

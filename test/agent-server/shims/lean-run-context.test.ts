// The lean run context (src/agent-server/shims/lean-run-context.ts): with tracing off, runnable calls get no
// langsmith RunTree of their own, yet graph code still sees its config and LangChain context variables; with
// tracing on (a local HTTP server standing in for LangSmith), an agent server still posts the run's trace.
import http from 'node:http';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { getContextVariable, setContextVariable } from '@langchain/core/context';
import { RunnableLambda } from '@langchain/core/runnables';
import { Annotation, END, getConfig, MemorySaver, START, StateGraph } from '@langchain/langgraph';
import { Client } from '@langchain/langgraph-sdk';
import { RunTree } from 'langsmith/run_trees';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { installLeanRunContext } from '../../../src/agent-server/shims/lean-run-context.ts';
import { EXECUTOR_THREAD, startServerProcess, type ServerProc } from '../helpers/process.ts';

const EXAMPLE = new URL('../../../examples/agent/langgraph.json', import.meta.url).pathname;

describe('lean run context, tracing off (in process)', () => {
  it('builds no RunTree per runnable call; nodes still see their config and context variables', async () => {
    for (const k of ['LANGSMITH_TRACING_V2', 'LANGCHAIN_TRACING_V2', 'LANGSMITH_TRACING', 'LANGCHAIN_TRACING'])
      delete process.env[k];
    installLeanRunContext();
    const State = Annotation.Root({
      seen: Annotation<string[]>({ reducer: (a, b) => [...a, ...b], default: () => [] }),
    });
    const inner = RunnableLambda.from(
      async () => `${String(getContextVariable('who'))}@${getConfig().configurable?.thread_id}`,
    );
    const graph = new StateGraph(State)
      .addNode('first', async () => {
        setContextVariable('who', 'ada');
        return { seen: [await inner.invoke({})] };
      })
      .addNode('second', async (_s, config) => ({ seen: [String(config.configurable?.thread_id)] }))
      .addEdge(START, 'first')
      .addEdge('first', 'second')
      .addEdge('second', END)
      .compile({ checkpointer: new MemorySaver() });
    // Counts RunTrees built from scratch (the constructor asks for its defaults) and lets them be built.
    const runTree = RunTree as unknown as { getDefaultConfig(): unknown };
    const defaults = runTree.getDefaultConfig.bind(RunTree);
    let built = 0;
    runTree.getDefaultConfig = () => {
      built++;
      return defaults();
    };
    try {
      const out = await graph.invoke({ seen: [] }, { configurable: { thread_id: 't-lean' } });
      expect(out.seen).toEqual(['ada@t-lean', 't-lean']);
      expect(built).toBe(0);
    } finally {
      runTree.getDefaultConfig = defaults;
    }
  });
});

describe('lean run context, tracing on (agent server process)', { timeout: 120_000 }, () => {
  const bodies: string[] = [];
  let langsmith: http.Server;
  let server: ServerProc | undefined;
  let dir: string;

  beforeAll(async () => {
    // Stands in for LangSmith: takes every request (run batches, multipart uploads, info) and keeps the bodies.
    langsmith = http.createServer((req, res) => {
      const chunks: Buffer[] = [];
      req.on('data', (d: Buffer) => chunks.push(d));
      req.on('end', () => {
        bodies.push(`${req.method} ${req.url}\n${Buffer.concat(chunks).toString('latin1')}`);
        res.writeHead(200, { 'content-type': 'application/json' }).end('{}');
      });
    });
    await new Promise<void>((r) => langsmith.listen(0, '127.0.0.1', r));
    const url = `http://127.0.0.1:${(langsmith.address() as { port: number }).port}`;
    dir = mkdtempSync(join(tmpdir(), 'ap-lean-trace-'));
    server = await startServerProcess([...EXECUTOR_THREAD, '--config', EXAMPLE, '--data-dir', dir], {
      LANGSMITH_TRACING: 'true',
      LANGSMITH_ENDPOINT: url,
      LANGSMITH_API_KEY: 'lsv2_test_lean',
      LANGSMITH_PROJECT: 'lean-run-context',
    });
  });
  afterAll(async () => {
    await server?.stop();
    await new Promise((r) => langsmith?.close(r));
    rmSync(dir, { recursive: true, force: true });
  });

  it("posts the run's node and tool runs to the tracing endpoint", async () => {
    const client = new Client({ apiUrl: server!.url });
    const thread = await client.threads.create();
    const run = await client.runs.wait(thread.thread_id, 'agent', {
      input: { messages: [{ role: 'human', content: 'Ada' }] },
    });
    expect(JSON.stringify(run)).toContain('Hello, Ada!');
    // The tracer sends in the background: the graph's nodes and its tool call arrive, in the run's project.
    await expect.poll(() => bodies.join('\n'), { timeout: 30_000, interval: 200 }).toContain('lookup_greeting');
    const all = bodies.join('\n');
    expect(all).toContain('"name":"agent"');
    expect(all).toContain('"name":"tools"');
    expect(all).toContain('lean-run-context');
  });
});

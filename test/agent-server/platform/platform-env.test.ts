// The LangGraph platform environment of graph code, against real `agentplane agent-server` processes with the
// real SDK, with graphs executing on the main thread (--executor-threads 0) and on an executor thread (1):
// getLogger() at module top level and inside nodes, `new Client()` without arguments calling the same server,
// LANGGRAPH_CONFIG applied to the system assistants, and the /metrics and /docs routes.
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { Client } from '@langchain/langgraph-sdk';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { hashApiKey } from '../../../src/agent-server/http/api-keys.ts';
import { systemAssistantId } from '../../../src/agent-server/graphs/index.ts';
import { createTestDatabase } from '../helpers/pg.ts';
import { startServerProcess, type ServerProc } from '../helpers/process.ts';

// The server requires a platform API key, as a deployed agent does: graph code's own calls must still get through.
const KEY = 'apk_platform-env-test-0123456789';
const withKey = { headers: { 'x-api-key': KEY } };
const APP_CONFIG = fileURLToPath(new URL('../fixtures/platform-app/langgraph.json', import.meta.url));
const GRAPH_DEFAULTS = {
  settings: { configurable: { model_name: 'openai' }, context: { tone: 'dry' }, recursion_limit: 7 },
};

/** JSON log lines of the server so far. */
function logLines(server: ServerProc): Array<Record<string, unknown>> {
  return server
    .output()
    .split('\n')
    .flatMap((line) => {
      try {
        return [JSON.parse(line) as Record<string, unknown>];
      } catch {
        return [];
      }
    });
}

async function eventually<T>(fn: () => T | undefined, what: string, server: ServerProc): Promise<T> {
  for (let i = 0; i < 100; i++) {
    const v = fn();
    if (v !== undefined) return v;
    await new Promise((r) => setTimeout(r, 50));
  }
  throw new Error(`never saw ${what} in the server output:\n${server.output()}`);
}

describe.each([
  [0, 'embedded'],
  [1, 'postgres'],
] as const)('platform environment of graph code (--executor-threads %i, %s store)', (threads, store) => {
  let server: ServerProc;
  let client: Client;
  let dir: string;
  let dropDb: (() => Promise<void>) | undefined;

  beforeAll(async () => {
    dir = mkdtempSync(join(tmpdir(), 'ap-as-platform-'));
    let storeArgs = ['--data-dir', dir];
    if (store === 'postgres') {
      const db = await createTestDatabase();
      dropDb = db.drop;
      storeArgs = ['--database-url', db.url];
    }
    writeFileSync(join(dir, 'keys.json'), JSON.stringify({ hashes: [hashApiKey(KEY)] }));
    server = await startServerProcess(
      [
        '--config',
        APP_CONFIG,
        ...storeArgs,
        '--executor-threads',
        String(threads),
        '--auth-keys-file',
        join(dir, 'keys.json'),
      ],
      { LANGGRAPH_CONFIG: JSON.stringify(GRAPH_DEFAULTS) },
    );
    client = new Client({ apiUrl: server.url, apiKey: KEY, callerOptions: { maxRetries: 0 } });
    // Until the executor thread has loaded, runs execute on the main thread: wait for it, so the suite covers it.
    for (let i = 0; threads && i < 100; i++) {
      const t = await client.threads.create();
      await client.runs.wait(t.thread_id, 'logging', { input: { note: 'warm-up' } });
      if (logLines(server).some((l) => l.msg === 'logging fixture node ran' && l.executor_thread === 0)) break;
      await new Promise((r) => setTimeout(r, 100));
    }
  });
  afterAll(async () => {
    await server?.stop();
    await dropDb?.();
    rmSync(dir, { recursive: true, force: true });
  });

  it('getLogger() works at module top level and in a node; lines carry the graph id and, in a run, the run', async () => {
    const top = logLines(server).find((l) => l.msg === 'logging fixture module loaded');
    expect(top).toMatchObject({ graph_id: 'logging', fixture_marker: 'top-level', level: 'info' });

    const thread = await client.threads.create();
    const run = await client.runs.create(thread.thread_id, 'logging', { input: { note: 'hello' } });
    expect(await client.runs.join(thread.thread_id, run.run_id)).toEqual({ note: 'logged hello' });
    const inNode = await eventually(
      () => logLines(server).find((l) => l.msg === 'logging fixture node ran' && l.run_id === run.run_id),
      'the node log line',
      server,
    );
    expect(inNode).toMatchObject({
      graph_id: 'logging',
      thread_id: thread.thread_id,
      langgraph_node: 'speak',
      fixture_marker: 'in-node',
      note: 'hello',
    });
    expect(inNode.executor_thread).toBe(threads ? 0 : undefined);
  });

  it('new Client() without arguments inside a node calls this server', async () => {
    const thread = await client.threads.create();
    const result = (await client.runs.wait(thread.thread_id, 'caller', { input: {} })) as Record<string, unknown>;
    expect(result.__error__).toBeUndefined();
    expect(result.ran_on).toBe(threads ? 'executor thread' : 'main thread');
    expect(result.graph_ids).toEqual(['caller', 'logging', 'settings']);
    const made = await client.threads.get(result.made_thread as string);
    expect(made.metadata).toMatchObject({ made_by: 'caller graph' });
    expect(result.nested_events).toEqual(['metadata', 'values', 'values']);
    expect(result.nested_values).toEqual({ note: 'logged nested' });
    expect((await client.threads.getState(made.thread_id)).values).toEqual({ note: 'logged nested' });
  });

  it('LANGGRAPH_CONFIG sets the system assistant config and context, which runs receive', async () => {
    const assistant = await client.assistants.get(systemAssistantId('settings'));
    expect(assistant.config).toEqual({ configurable: { model_name: 'openai' }, recursion_limit: 7 });
    expect(assistant.context).toEqual({ tone: 'dry' });
    const thread = await client.threads.create();
    expect(await client.runs.wait(thread.thread_id, 'settings', { input: {} })).toEqual({
      model_name: 'openai',
      context: { tone: 'dry' },
      store: 'object',
    });
    // The run's own context and configurable win over the assistant's.
    expect(
      await client.runs.wait(thread.thread_id, 'settings', {
        input: {},
        context: { tone: 'warm' },
        config: { configurable: { model_name: 'anthropic' } },
      }),
    ).toEqual({ model_name: 'anthropic', context: { tone: 'warm' }, store: 'object' });
  });

  it('GET /metrics counts finished runs and shows the queue; GET /docs serves the API explorer', async () => {
    const thread = await client.threads.create();
    await client.runs.wait(thread.thread_id, 'logging', { input: { note: 'metrics' } });
    // The waiter can be woken (a Postgres NOTIFY on another connection) a moment before the engine handles the
    // reply to its own finish statement and drops the run from its running set: scrape until that has happened.
    let text = '';
    for (let i = 0; i < 100; i++) {
      const res = await fetch(`${server.url}/metrics`, withKey);
      expect(res.status).toBe(200);
      expect(res.headers.get('content-type')).toMatch(/^text\/plain/);
      text = await res.text();
      if (/^agentplane_runs_running 0$/m.test(text)) break;
      await new Promise((r) => setTimeout(r, 50));
    }
    const success = Number(/^agentplane_runs_finished_total\{status="success"\} (\d+)$/m.exec(text)?.[1]);
    expect(success).toBeGreaterThanOrEqual(1);
    expect(text).toMatch(/^agentplane_run_duration_seconds_count\{status="success"\} [1-9]/m);
    expect(text).toMatch(/^agentplane_runs_pending 0$/m);
    expect(text).toMatch(/^agentplane_runs_oldest_pending_age_seconds 0$/m);
    expect(text).toMatch(/^agentplane_active_streams 0$/m);
    expect(text).toMatch(/^agentplane_runs_running 0$/m);
    expect(text).toMatch(/^nodejs_eventloop_lag_seconds /m);

    // A delayed run waits in the queue; a client streams it meanwhile.
    const waiting = await client.threads.create();
    const delayed = await client.runs.create(waiting.thread_id, 'logging', {
      input: { note: 'later' },
      afterSeconds: 600,
    });
    const abort = new AbortController();
    const stream = client.runs.joinStream(waiting.thread_id, delayed.run_id, { signal: abort.signal });
    const reading = (async () => {
      for await (const _ of stream) void _;
    })().catch(() => undefined);
    await new Promise((r) => setTimeout(r, 1_200));
    const busy = await (await fetch(`${server.url}/metrics`, withKey)).text();
    expect(busy).toMatch(/^agentplane_runs_pending 1$/m);
    const age = Number(/^agentplane_runs_oldest_pending_age_seconds (\S+)$/m.exec(busy)?.[1]);
    expect(age).toBeGreaterThanOrEqual(1);
    expect(age).toBeLessThan(60);
    expect(busy).toMatch(/^agentplane_active_streams 1$/m);
    abort.abort();
    await reading;
    await client.runs.cancel(waiting.thread_id, delayed.run_id);
    await new Promise((r) => setTimeout(r, 200));
    const after = await (await fetch(`${server.url}/metrics`, withKey)).text();
    expect(after).toMatch(/^agentplane_runs_pending 0$/m);
    expect(after).toMatch(/^agentplane_active_streams 0$/m);

    const docs = await fetch(`${server.url}/docs`, withKey);
    expect(docs.status).toBe(200);
    expect(await docs.text()).toMatch(/swagger/i);
    const spec = (await (await fetch(`${server.url}/openapi.json`, withKey)).json()) as {
      paths: Record<string, unknown>;
    };
    expect(Object.keys(spec.paths)).not.toContain('/metrics');
    expect(Object.keys(spec.paths).some((p) => p.startsWith('/docs'))).toBe(false);
  });
});

// MCP at POST /mcp, driven by the official TypeScript SDK's Streamable HTTP client against the server on a real
// port, on both stores: tools are the assistants, a call is a run on a real thread (inspected and continued with the
// LangGraph SDK, resumed after an interrupt), tasks survive the connection that created them, and protocol errors
// keep the request's id. Raw requests check what the SDK does not send (batches, bad JSON, GET, notifications).
import { Client as LangGraph } from '@langchain/langgraph-sdk';
import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { StreamableHTTPClientTransport } from '@modelcontextprotocol/sdk/client/streamableHttp.js';
import { CallToolResultSchema, McpError } from '@modelcontextprotocol/sdk/types.js';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startHarness, type Harness } from '../helpers/harness.ts';

async function connect(url: string, headers: Record<string, string> = {}): Promise<Client> {
  const client = new Client({ name: 'agentplane-test', version: '1.0.0' });
  await client.connect(new StreamableHTTPClientTransport(new URL(`${url}/mcp`), { requestInit: { headers } }));
  return client;
}

const rpc = (url: string, body: unknown, headers: Record<string, string> = {}) =>
  fetch(`${url}/mcp`, {
    method: 'POST',
    headers: { 'content-type': 'application/json', accept: 'application/json, text/event-stream', ...headers },
    body: typeof body === 'string' ? body : JSON.stringify(body),
  });

describe.each(['embedded', 'postgres'] as const)('MCP with the official SDK client, %s store', (store) => {
  let h: Harness;
  let url: string;
  let mcp: Client;
  let lg: LangGraph;

  beforeAll(async () => {
    h = await startHarness({ store });
    url = await h.app.listen({ port: 0, host: '127.0.0.1' });
    mcp = await connect(url);
    lg = new LangGraph({ apiUrl: url, apiKey: null });
  });
  afterAll(async () => {
    await mcp?.close();
    await h?.close();
  });

  it('initializes at 2025-11-25 with tools and tasks, and lists one tool per assistant with object input schemas', async () => {
    expect(mcp.getServerVersion()?.name).toBe('agentplane-agent-server');
    const caps = mcp.getServerCapabilities();
    expect(caps?.tools).toBeDefined();
    expect(caps?.tasks?.requests?.tools?.call).toBeDefined();
    const { tools, nextCursor } = await mcp.listTools();
    expect(nextCursor).toBeUndefined();
    expect(tools.map((t) => t.name).sort()).toEqual(['counter', 'fail', 'hitl', 'ledger', 'slow']);
    for (const t of tools) {
      expect(t.name).toMatch(/^[A-Za-z0-9_.-]{1,128}$/);
      expect(t.inputSchema.type).toBe('object');
      expect(t.description).toBeTruthy();
      expect(t.execution?.taskSupport).toBe('optional');
    }
    const counter = tools.find((t) => t.name === 'counter')!;
    expect(Object.keys(counter.inputSchema.properties ?? {})).toEqual(expect.arrayContaining(['count', 'steps']));
  });

  it('runs a tool on a real thread: structuredContent is the final values, the thread can be read and continued', async () => {
    const first = await mcp.callTool({ name: 'counter', arguments: { count: 1 } });
    expect(first.isError).toBeFalsy();
    expect(first.structuredContent).toEqual({ count: 12, steps: ['first', 'second'] });
    const text = (first.content as Array<{ type: string; text: string }>)[0]!;
    expect(JSON.parse(text.text)).toEqual({ count: 12, steps: ['first', 'second'] });
    const threadId = first._meta!.thread_id as string;
    expect(threadId).toMatch(/^[0-9a-f-]{36}$/);
    // The thread is an ordinary one: the LangGraph API shows it and the run that made it.
    const state = await lg.threads.getState(threadId);
    expect(state.values).toEqual({ count: 12, steps: ['first', 'second'] });
    const runs = await lg.runs.list(threadId);
    expect(runs.map((r) => r.run_id)).toEqual([first._meta!.run_id]);
    // A follow-up on the same thread adds to its state.
    const second = await mcp.callTool({ name: 'counter', arguments: {}, _meta: { thread_id: threadId } });
    expect(second.structuredContent).toEqual({ count: 23, steps: ['first', 'second', 'first', 'second'] });
    expect(second._meta!.thread_id).toBe(threadId);
  });

  it('reports each finished node through onprogress before the result, on a thread that can be followed up', async () => {
    const seen: Array<{ progress: number; message?: string }> = [];
    const result = await mcp.callTool({ name: 'counter', arguments: { count: 1 } }, CallToolResultSchema, {
      onprogress: (p) => void seen.push({ progress: p.progress, ...(p.message ? { message: p.message } : {}) }),
    });
    expect(result.structuredContent).toEqual({ count: 12, steps: ['first', 'second'] });
    // The counter's two nodes, in order, each once, counted up.
    expect(seen).toEqual([
      { progress: 1, message: 'first finished' },
      { progress: 2, message: 'second finished' },
    ]);
    expect(result._meta).toMatchObject({ status: 'success', run_id: expect.any(String) });
    const followUp = await mcp.callTool(
      { name: 'counter', arguments: {}, _meta: { thread_id: result._meta!.thread_id } },
      CallToolResultSchema,
      { onprogress: () => undefined },
    );
    expect(followUp.structuredContent).toMatchObject({ count: 23 });

    // Without a progress token the answer carries no notifications (one frame: the result).
    const plain = await rpc(url, {
      jsonrpc: '2.0',
      id: 7,
      method: 'tools/call',
      params: { name: 'counter', arguments: {} },
    });
    const frames = (await plain.text()).split('\n').filter((l) => l.startsWith('data: '));
    expect(frames.map((f) => Object.keys(JSON.parse(f.slice(6)) as object).sort())).toEqual([
      ['id', 'jsonrpc', 'result'],
    ]);
  });

  it('answers an interrupt as a result naming it, and resumes the thread with _meta.resume', async () => {
    const asked = await mcp.callTool({ name: 'hitl', arguments: { question: 'which colour?' } });
    expect(asked.isError).toBeFalsy();
    expect(asked._meta!.status).toBe('interrupted');
    const interrupts = asked._meta!.interrupts as Array<{ value: unknown }>;
    expect(interrupts.map((i) => i.value)).toEqual([{ question: 'which colour?' }]);
    const text = JSON.parse((asked.content as Array<{ text: string }>)[0]!.text) as Record<string, unknown>;
    expect(text.status).toBe('interrupted');
    expect(String(text.how_to_resume)).toContain(String(asked._meta!.thread_id));
    const threadId = asked._meta!.thread_id as string;
    expect((await lg.threads.get(threadId)).status).toBe('interrupted');

    const answered = await mcp.callTool({
      name: 'hitl',
      arguments: {},
      _meta: { thread_id: threadId, resume: 'teal' },
    });
    expect(answered._meta!.status).toBe('success');
    expect(answered.structuredContent).toMatchObject({ question: 'which colour?', answer: 'teal', prepared: true });
    expect((await lg.threads.get(threadId)).status).toBe('idle');
  });

  it('reports a failing agent as a tool error, and an unknown tool or bad _meta as protocol errors', async () => {
    const failed = await mcp.callTool({ name: 'fail', arguments: {} });
    expect(failed.isError).toBe(true);
    expect((failed.content as Array<{ text: string }>)[0]!.text).toContain('the fixture graph failed on purpose');

    const unknown = await mcp.callTool({ name: 'no-such-agent', arguments: {} }).catch((e: unknown) => e);
    expect(unknown).toBeInstanceOf(McpError);
    expect((unknown as McpError).code).toBe(-32602);
    expect((unknown as McpError).message).toContain('Unknown tool: no-such-agent');

    const bad = await mcp
      .callTool({ name: 'counter', arguments: {}, _meta: { thread_id: 'not-a-thread' } })
      .catch((e: unknown) => e);
    expect((bad as McpError).code).toBe(-32602);
    expect((bad as McpError).message).toContain('thread_id');

    // The error carries the request's own id, a string one too.
    const res = await rpc(
      url,
      { jsonrpc: '2.0', id: 'req-7', method: 'tools/call', params: { name: 'nope' } },
      { accept: 'application/json' },
    );
    expect(res.status).toBe(200);
    const body = (await res.json()) as { id: unknown; error: { code: number } };
    expect(body).toMatchObject({ id: 'req-7', error: { code: -32602 } });
  });

  it('runs a task in the background; another connection follows it to its result, and a cancelled one says so', async () => {
    const created: string[] = [];
    let final: unknown;
    for await (const m of mcp.experimental.tasks.callToolStream(
      { name: 'counter', arguments: { count: 100 } },
      undefined,
      { task: {} },
    )) {
      if (m.type === 'taskCreated') created.push(m.task.taskId);
      if (m.type === 'result') final = m.result;
      if (m.type === 'error') throw m.error;
    }
    expect(created).toHaveLength(1);
    expect((final as { structuredContent: unknown }).structuredContent).toEqual({
      count: 111,
      steps: ['first', 'second'],
    });
    // A follow-up on the task's thread changes the thread's values; the task's result stays what its run left.
    const followUp = await mcp.callTool({
      name: 'counter',
      arguments: {},
      _meta: { thread_id: created[0]!.split(':')[0] },
    });
    expect(followUp.structuredContent).toMatchObject({ count: 122 });
    const kept = await mcp.experimental.tasks.getTaskResult(created[0]!, CallToolResultSchema);
    expect(kept.structuredContent).toEqual({ count: 111, steps: ['first', 'second'] });

    // A task created and then left: a new client (another connection, no session) finds it and its result.
    const started = (await rpc(url, {
      jsonrpc: '2.0',
      id: 1,
      method: 'tools/call',
      params: { name: 'slow', arguments: { delay_ms: 300, mark: 'left' }, task: { ttl: 60_000 } },
    }).then((r) => r.json())) as { result: { task: { taskId: string; status: string } } };
    expect(started.result.task.status).toBe('working');
    const taskId = started.result.task.taskId;
    const other = await connect(url);
    try {
      const result = await other.experimental.tasks.getTaskResult(taskId, CallToolResultSchema);
      expect(result.structuredContent).toMatchObject({ marks: ['start:left', 'done:left'] });
      expect((result._meta as Record<string, unknown>)['io.modelcontextprotocol/related-task']).toEqual({ taskId });
      expect((await other.experimental.tasks.getTask(taskId)).status).toBe('completed');

      const long = (await rpc(url, {
        jsonrpc: '2.0',
        id: 2,
        method: 'tools/call',
        params: { name: 'slow', arguments: { delay_ms: 60_000 }, task: {} },
      }).then((r) => r.json())) as { result: { task: { taskId: string } } };
      const cancelled = await other.experimental.tasks.cancelTask(long.result.task.taskId);
      expect(cancelled.status).toBe('cancelled');
      expect((await other.experimental.tasks.getTask(long.result.task.taskId)).status).toBe('cancelled');
      // Cancelling it again is an error: it has ended.
      const again = await other.experimental.tasks.cancelTask(long.result.task.taskId).catch((e: unknown) => e);
      expect((again as McpError).code).toBe(-32602);
      // A task id this server never gave out.
      const unknown = await other.experimental.tasks.getTask('00000000-0000-4000-8000-000000000000:x').catch((e) => e);
      expect((unknown as McpError).code).toBe(-32602);
    } finally {
      await other.close();
    }
  });

  it('speaks plain JSON-RPC over HTTP: ping, notifications 202, GET 405, batches and bad JSON 400, old protocols', async () => {
    const ping = await rpc(url, { jsonrpc: '2.0', id: 3, method: 'ping' }, { accept: 'application/json' });
    expect(ping.headers.get('content-type')).toContain('application/json');
    expect(await ping.json()).toEqual({ jsonrpc: '2.0', id: 3, result: {} });

    const note = await rpc(url, { jsonrpc: '2.0', method: 'notifications/initialized' });
    expect(note.status).toBe(202);
    expect(await note.text()).toBe('');

    const get = await fetch(`${url}/mcp`, { headers: { accept: 'text/event-stream' } });
    expect(get.status).toBe(405);
    expect(get.headers.get('allow')).toBe('POST');

    const batch = await rpc(url, [{ jsonrpc: '2.0', id: 1, method: 'ping' }]);
    expect(batch.status).toBe(400);
    expect(((await batch.json()) as { error: { code: number } }).error.code).toBe(-32600);

    const broken = await rpc(url, '{"jsonrpc": "2.0", "id": 1,');
    expect(broken.status).toBe(400);
    expect(((await broken.json()) as { error: { code: number } }).error.code).toBe(-32700);

    const noVersion = await rpc(url, { id: 9, method: 'ping' });
    expect(noVersion.status).toBe(400);
    expect(await noVersion.json()).toMatchObject({ id: 9, error: { code: -32600 } });

    const unknownMethod = await rpc(url, { jsonrpc: '2.0', id: 4, method: 'resources/list' });
    expect(await unknownMethod.json()).toMatchObject({ id: 4, error: { code: -32601 } });

    const badHeader = await rpc(
      url,
      { jsonrpc: '2.0', id: 5, method: 'ping' },
      { 'mcp-protocol-version': '1999-01-01' },
    );
    expect(badHeader.status).toBe(400);

    for (const [asked, got] of [
      ['2024-11-05', '2024-11-05'],
      ['2025-03-26', '2025-03-26'],
      ['2031-01-01', '2025-11-25'],
    ]) {
      const init = await rpc(url, {
        jsonrpc: '2.0',
        id: 6,
        method: 'initialize',
        params: { protocolVersion: asked, capabilities: {}, clientInfo: { name: 'raw', version: '0' } },
      });
      expect(((await init.json()) as { result: { protocolVersion: string } }).result.protocolVersion).toBe(got);
    }

    // A client that takes event streams gets a tool call's answer as one: headers at once, the answer as a message.
    const streamed = await rpc(url, { jsonrpc: '2.0', id: 'c1', method: 'tools/call', params: { name: 'counter' } });
    expect(streamed.headers.get('content-type')).toContain('text/event-stream');
    const frames = (await streamed.text()).split('\n').filter((l) => l.startsWith('data: '));
    expect(frames).toHaveLength(1);
    expect(JSON.parse(frames[0]!.slice(6))).toMatchObject({ id: 'c1', result: { structuredContent: { count: 11 } } });

    // Bad input is the caller's error, never a 500, and names what is wrong.
    for (const [body, words] of [
      [{ jsonrpc: '2.0', id: 1, method: 'tools/call', params: [] }, 'params'],
      [{ jsonrpc: '2.0', id: 1, method: 'x'.repeat(5000) }, 'method'],
      [{ jsonrpc: '2.0', id: 1, method: 'tools/call', params: { name: 'counter', arguments: [] } }, 'params.arguments'],
      [{ jsonrpc: '2.0', id: 1, method: 'tools/call', params: { name: 'hitl', _meta: { resume: 'x' } } }, 'thread_id'],
      [{ jsonrpc: '2.0', id: 1, method: 'tasks/get', params: { taskId: ':::' } }, 'Unknown task'],
      [{ jsonrpc: '2.0', id: 1, method: 'tools/list', params: { cursor: 12 } }, 'params.cursor'],
      [null, '(message)'],
    ] as const) {
      const res = await rpc(url, body, { accept: 'application/json' });
      expect(res.status, JSON.stringify(body)).toBeLessThan(500);
      expect(((await res.json()) as { error: { message: string } }).error.message).toContain(words);
    }

    // Cursors are strings; one the server never gave out is refused.
    const badCursor = await rpc(url, { jsonrpc: '2.0', id: 8, method: 'tools/list', params: { cursor: '42' } });
    expect(await badCursor.json()).toMatchObject({ id: 8, error: { code: -32602 } });
  });

  it('calls a tool renamed since the last call under its new name once tools/list shows it, not its old one', async () => {
    // Calls reuse the caller's tool table for a moment (no assistants search per call); a listing reads it afresh.
    expect((await mcp.callTool({ name: 'counter', arguments: {} })).isError).toBeFalsy();
    const made = await lg.assistants.create({ graphId: 'counter', name: 'tally' });
    try {
      expect((await mcp.listTools()).tools.map((t) => t.name)).toContain('tally');
      expect((await mcp.callTool({ name: 'tally', arguments: { count: 1 } })).structuredContent).toMatchObject({
        count: 12,
      });
      await lg.assistants.update(made.assistant_id, { name: 'tally2' });
      expect((await mcp.listTools()).tools.map((t) => t.name)).toEqual(expect.arrayContaining(['tally2']));
      expect((await mcp.callTool({ name: 'tally2', arguments: {} }))._meta).toMatchObject({ status: 'success' });
      const old = await mcp.callTool({ name: 'tally', arguments: {} }).catch((e: unknown) => e);
      expect(old).toBeInstanceOf(McpError);
      expect((old as McpError).message).toContain('Unknown tool: tally');
    } finally {
      await lg.assistants.delete(made.assistant_id);
    }
  });
});

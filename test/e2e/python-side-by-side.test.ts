// Side by side with the Python Agent Server from PyPI (`langgraph dev` of langgraph-cli[inmem], pinned in
// support/langgraph-cli.ts) on fixtures/a2a-python/echo.py, the Python twin of fixtures/a2a/echo.ts that this server
// runs: the same MCP and A2A requests go to both, and each pair of answers is reduced to its shape (every key path
// with its type, and the value of the keys that carry meaning: states, kinds, roles, codes, versions; never ids or
// timestamps). What differs is asserted as the list docs/agent-server.md gives, so a change on either side (a new
// field here, a fix upstream) fails here until that list is brought up to date.
import { spawn, type ChildProcess } from 'node:child_process';
import { cpSync, mkdtempSync, rmSync } from 'node:fs';
import { createServer } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, beforeEach, expect, it } from 'vitest';
import { langgraphCli } from '../support/langgraph-cli.ts';
import { startHarness, type Harness } from '../agent-server/helpers/harness.ts';

const OURS = new URL('../agent-server/fixtures/a2a/echo-only.json', import.meta.url).pathname;
const PYTHON = new URL('../agent-server/fixtures/a2a-python', import.meta.url).pathname;

interface Answer {
  status: number;
  body: unknown;
}

/** Keys whose values are compared, not only their types: what a client branches on. */
const VALUE_KEYS = new Set([
  'jsonrpc',
  'kind',
  'role',
  'state',
  'status',
  'code',
  'protocolVersion',
  'protocolBinding',
  'preferredTransport',
  'isError',
  'type',
]);
/** Deeper than this, an object is only an object (the graphs' JSON schemas are the libraries' own business). */
const MAX_DEPTH = 6;

/** An answer as a set of lines "path: type" (or "path: value" for VALUE_KEYS), arrays' elements merged. */
function shape(answer: Answer): Set<string> {
  const out = new Set<string>();
  const walk = (v: unknown, path: string, depth: number) => {
    if (v === null) out.add(`${path}: null`);
    else if (Array.isArray(v)) {
      if (!v.length) out.add(`${path}: []`);
      for (const x of v) walk(x, `${path}[]`, depth);
    } else if (typeof v === 'object') {
      const keys = Object.keys(v);
      // A schema's shared definitions (the message types) are the libraries' business too: present or not.
      if (depth >= MAX_DEPTH || /\.(definitions|\$defs)$/.test(path)) out.add(`${path}: object`);
      else if (!keys.length) out.add(`${path}: {}`);
      else for (const k of keys) walk((v as Record<string, unknown>)[k], `${path}.${k}`, depth + 1);
    } else {
      const key = path.slice(path.lastIndexOf('.') + 1);
      out.add(`${path}: ${VALUE_KEYS.has(key) && typeof v !== 'object' ? JSON.stringify(v) : typeof v}`);
    }
  };
  walk(answer.status, 'status', 0);
  walk(answer.body, 'body', 0);
  return out;
}

/** What only the Python server's answer has, and what only ours has. */
function difference(python: Answer, ours: Answer) {
  const p = shape(python);
  const o = shape(ours);
  return { python: [...p].filter((l) => !o.has(l)).sort(), ours: [...o].filter((l) => !p.has(l)).sort() };
}

async function freePort(): Promise<number> {
  const server = createServer();
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const { port } = server.address() as { port: number };
  await new Promise((resolve) => server.close(resolve));
  return port;
}

async function post(url: string, body: unknown): Promise<Answer> {
  const res = await fetch(url, {
    method: 'POST',
    headers: { 'content-type': 'application/json', accept: 'application/json' },
    body: JSON.stringify(body),
  });
  return { status: res.status, body: parse(await res.text()) };
}

async function get(url: string): Promise<Answer> {
  const res = await fetch(url);
  return { status: res.status, body: parse(await res.text()) };
}

function parse(text: string): unknown {
  try {
    return JSON.parse(text) as unknown;
  } catch {
    return text;
  }
}

const rpc = (id: number | string, method: string, params?: unknown) => ({ jsonrpc: '2.0', id, method, params });
const text03 = (text: string, more: Record<string, unknown> = {}) => ({
  message: { kind: 'message', messageId: `m-${text}`, role: 'user', parts: [{ kind: 'text', text }], ...more },
});

/** The requests, in order, each to one server at `base` whose echo assistant is `assistantId`. */
async function exchange(base: string): Promise<Record<string, Answer>> {
  const found = (await post(`${base}/assistants/search`, { graph_id: 'echo' })).body as Array<{
    assistant_id: string;
  }>;
  const assistantId = found[0]!.assistant_id;
  const a2a = `${base}/a2a/${assistantId}`;
  const mcp = `${base}/mcp`;
  const chat = (content: string) => ({ messages: [{ role: 'user', content }] });
  const out: Record<string, Answer> = {};
  out.initialize = await post(
    mcp,
    rpc(1, 'initialize', {
      protocolVersion: '2025-06-18',
      capabilities: {},
      clientInfo: { name: 'cmp', version: '1' },
    }),
  );
  out['tools/list'] = await post(mcp, rpc(2, 'tools/list', {}));
  out['tools/call'] = await post(mcp, rpc(3, 'tools/call', { name: 'echo', arguments: chat('hi') }));
  out['tools/call interrupted'] = await post(
    mcp,
    rpc(4, 'tools/call', { name: 'echo', arguments: chat('ask: colour?') }),
  );
  out['tools/call unknown tool'] = await post(mcp, rpc('x5', 'tools/call', { name: 'nope', arguments: {} }));
  out['GET /mcp'] = await get(mcp);
  out['card by query'] = await get(`${base}/.well-known/agent-card.json?assistant_id=${assistantId}`);
  out['card under the agent'] = await get(`${a2a}/.well-known/agent-card.json`);
  const sent = await post(a2a, rpc(6, 'message/send', text03('hello')));
  out['message/send'] = sent;
  const taskId = (sent.body as { result?: { id?: string } }).result?.id;
  out['tasks/get'] = await post(a2a, rpc(7, 'tasks/get', { id: taskId }));
  out['message/send non-UUID contextId'] = await post(
    a2a,
    rpc(8, 'message/send', text03('hello', { contextId: 'my-chat' })),
  );
  out.SendMessage = await post(
    a2a,
    rpc(9, 'SendMessage', { message: { messageId: 'm9', role: 'ROLE_USER', parts: [{ text: 'hello' }] } }),
  );
  out['message/send interrupted'] = await post(a2a, rpc(10, 'message/send', text03('ask: colour?')));
  out['message/send without a message'] = await post(a2a, rpc(11, 'message/send', {}));
  return out;
}

/**
 * What only one side's answer has, request by request: the deliberate differences of docs/agent-server.md (MCP and
 * A2A, "Side by side with the Python Agent Server"), as shapes. An empty list: that side has nothing the other lacks.
 */
const DELIBERATE: Record<string, { python: string[]; ours: string[] }> = {
  initialize: {
    python: [],
    ours: [
      'body.result.capabilities.tasks.cancel: {}',
      'body.result.capabilities.tasks.requests.tools.call: object',
      'body.result.instructions: string',
      'body.result.serverInfo.title: string',
    ],
  },
  'tools/list': {
    python: [
      'body.result.tools[].annotations.destructiveHint: boolean',
      'body.result.tools[].annotations.idempotentHint: boolean',
      'body.result.tools[].annotations.openWorldHint: boolean',
      'body.result.tools[].annotations.readOnlyHint: boolean',
      'body.result.tools[].inputSchema.properties.messages.title: string',
      'body.result.tools[].inputSchema.properties.messages.type: "string"',
      'body.result.tools[].inputSchema.properties.topic.anyOf[]: object',
      'body.result.tools[].inputSchema.properties.topic.title: string',
      'body.result.tools[].inputSchema.required[]: string',
    ],
    ours: [
      'body.result.tools[]._meta.assistant_id: string',
      'body.result.tools[]._meta.graph_id: string',
      'body.result.tools[].execution.taskSupport: string',
      // Typed from the graph's TypeScript source: the message types as shared definitions, `topic` a string.
      'body.result.tools[].inputSchema.definitions: object',
      'body.result.tools[].inputSchema.properties.messages.anyOf[]: object',
      'body.result.tools[].inputSchema.properties.messages.langgraph_type: string',
      'body.result.tools[].inputSchema.properties.topic.type: "string"',
      'body.result.tools[].outputSchema.definitions: object',
      'body.result.tools[].outputSchema.properties.messages.description: string',
      'body.result.tools[].outputSchema.properties.messages.items: object',
      'body.result.tools[].outputSchema.properties.messages.langgraph_type: string',
      'body.result.tools[].outputSchema.properties.messages.type: "array"',
      'body.result.tools[].outputSchema.properties.topic.type: "string"',
      'body.result.tools[].outputSchema.title: string',
      'body.result.tools[].outputSchema.type: "object"',
    ],
  },
  'tools/call': {
    python: [],
    ours: [
      'body.result._meta.run_id: string',
      'body.result._meta.status: "success"',
      'body.result._meta.thread_id: string',
      'body.result.structuredContent.messages[].additional_kwargs: {}',
      'body.result.structuredContent.messages[].content: string',
      'body.result.structuredContent.messages[].example: boolean',
      'body.result.structuredContent.messages[].id: string',
      'body.result.structuredContent.messages[].invalid_tool_calls: []',
      'body.result.structuredContent.messages[].name: null',
      'body.result.structuredContent.messages[].response_metadata: {}',
      'body.result.structuredContent.messages[].tool_calls: []',
      'body.result.structuredContent.messages[].type: "ai"',
      'body.result.structuredContent.messages[].type: "human"',
    ],
  },
  'tools/call interrupted': {
    python: [],
    ours: [
      'body.result._meta.interrupts[].id: string',
      'body.result._meta.interrupts[].value.question: string',
      'body.result._meta.run_id: string',
      'body.result._meta.status: "interrupted"',
      'body.result._meta.thread_id: string',
      'body.result.structuredContent.messages[].additional_kwargs: {}',
      'body.result.structuredContent.messages[].content: string',
      'body.result.structuredContent.messages[].example: boolean',
      'body.result.structuredContent.messages[].id: string',
      'body.result.structuredContent.messages[].name: null',
      'body.result.structuredContent.messages[].response_metadata: {}',
      'body.result.structuredContent.messages[].type: "human"',
    ],
  },
  'tools/call unknown tool': {
    python: [],
    ours: [],
  },
  'GET /mcp': {
    python: ['body: string'],
    ours: ['body.error.code: -32600', 'body.error.message: string', 'body.id: null', 'body.jsonrpc: "2.0"'],
  },
  'card by query': {
    python: [
      'body.capabilities.extensions[].description: string',
      'body.capabilities.extensions[].params.default: string',
      'body.capabilities.extensions[].params.header: string',
      'body.capabilities.extensions[].params.methods[]: string',
      'body.capabilities.extensions[].params.values[]: string',
      'body.capabilities.extensions[].required: boolean',
      'body.capabilities.extensions[].uri: string',
      'body.skills[].metadata.inputSchema.properties[]: string',
      'body.skills[].metadata.inputSchema.required[]: string',
      'body.skills[].metadata.inputSchema.supportsA2A: boolean',
    ],
    ours: [
      'body.preferredTransport: "JSONRPC"',
      'body.protocolVersion: "0.3.0"',
      'body.supportedInterfaces[].protocolVersion: "0.3"',
    ],
  },
  'card under the agent': {
    python: [
      'body.capabilities.extensions[].description: string',
      'body.capabilities.extensions[].params.default: string',
      'body.capabilities.extensions[].params.header: string',
      'body.capabilities.extensions[].params.methods[]: string',
      'body.capabilities.extensions[].params.values[]: string',
      'body.capabilities.extensions[].required: boolean',
      'body.capabilities.extensions[].uri: string',
      'body.skills[].metadata.inputSchema.properties[]: string',
      'body.skills[].metadata.inputSchema.required[]: string',
      'body.skills[].metadata.inputSchema.supportsA2A: boolean',
    ],
    ours: [
      'body.preferredTransport: "JSONRPC"',
      'body.protocolVersion: "0.3.0"',
      'body.supportedInterfaces[].protocolVersion: "0.3"',
    ],
  },
  'message/send': {
    python: ['body.result.artifacts[].description: string'],
    ours: [
      'body.result.status.message.contextId: string',
      'body.result.status.message.kind: "message"',
      'body.result.status.message.messageId: string',
      'body.result.status.message.parts[].kind: "text"',
      'body.result.status.message.parts[].text: string',
      'body.result.status.message.role: "agent"',
      'body.result.status.message.taskId: string',
    ],
  },
  'tasks/get': {
    python: [],
    ours: [
      'body.result.artifacts[].artifactId: string',
      'body.result.artifacts[].name: string',
      'body.result.artifacts[].parts[].kind: "text"',
      'body.result.artifacts[].parts[].text: string',
      'body.result.status.message.contextId: string',
    ],
  },
  'message/send non-UUID contextId': {
    python: ['body.error.code: -32602', 'body.error.message: string'],
    ours: [
      'body.result.artifacts[].artifactId: string',
      'body.result.artifacts[].name: string',
      'body.result.artifacts[].parts[].kind: "text"',
      'body.result.artifacts[].parts[].text: string',
      'body.result.contextId: string',
      'body.result.history[].contextId: string',
      'body.result.history[].kind: "message"',
      'body.result.history[].messageId: string',
      'body.result.history[].parts[].kind: "text"',
      'body.result.history[].parts[].text: string',
      'body.result.history[].role: "agent"',
      'body.result.history[].role: "user"',
      'body.result.history[].taskId: string',
      'body.result.id: string',
      'body.result.kind: "task"',
      'body.result.status.message.contextId: string',
      'body.result.status.message.kind: "message"',
      'body.result.status.message.messageId: string',
      'body.result.status.message.parts[].kind: "text"',
      'body.result.status.message.parts[].text: string',
      'body.result.status.message.role: "agent"',
      'body.result.status.message.taskId: string',
      'body.result.status.state: "completed"',
      'body.result.status.timestamp: string',
    ],
  },
  SendMessage: {
    python: [
      'body.result.task.artifacts[].description: string',
      'body.result.task.artifacts[].parts[].kind: "text"',
      'body.result.task.history[].kind: "message"',
      'body.result.task.history[].parts[].kind: "text"',
      'body.result.task.kind: "task"',
    ],
    ours: [
      'body.result.task.status.message.contextId: string',
      'body.result.task.status.message.messageId: string',
      'body.result.task.status.message.parts[].text: string',
      'body.result.task.status.message.role: "ROLE_AGENT"',
      'body.result.task.status.message.taskId: string',
    ],
  },
  'message/send interrupted': {
    python: [
      'body.result.artifacts[].artifactId: string',
      'body.result.artifacts[].description: string',
      'body.result.artifacts[].name: string',
      'body.result.artifacts[].parts[].data.id: string',
      'body.result.artifacts[].parts[].data.value.question: string',
      'body.result.artifacts[].parts[].kind: "data"',
    ],
    ours: [
      'body.result.artifacts: []',
      'body.result.history[].parts[].data.interrupt_id: string',
      'body.result.history[].parts[].data.value.question: string',
      'body.result.history[].parts[].kind: "data"',
      'body.result.history[].role: "agent"',
      'body.result.status.message.contextId: string',
      'body.result.status.message.kind: "message"',
      'body.result.status.message.messageId: string',
      'body.result.status.message.parts[].data.interrupt_id: string',
      'body.result.status.message.parts[].data.value: object',
      'body.result.status.message.parts[].kind: "data"',
      'body.result.status.message.role: "agent"',
      'body.result.status.message.taskId: string',
    ],
  },
  'message/send without a message': {
    python: [],
    ours: [],
  },
};

let skip: string | undefined;
let python: ChildProcess | undefined;
let work: string | undefined;
let ours: Harness | undefined;
const answers: { python: Record<string, Answer>; ours: Record<string, Answer> } = { python: {}, ours: {} };

beforeAll(async () => {
  const cli = await langgraphCli();
  if ('skip' in cli) {
    skip = cli.skip;
    process.stderr.write(`skipped the side by side with the Python Agent Server: ${skip}\n`);
    return;
  }
  // The Python server writes its state (.langgraph_api/) into its folder: a copy in a temporary one.
  work = mkdtempSync(join(tmpdir(), 'ap-pyside-'));
  cpSync(PYTHON, work, { recursive: true });
  const port = await freePort();
  const base = `http://127.0.0.1:${port}`;
  let log = '';
  python = spawn(cli.bin, ['dev', '--no-browser', '--no-reload', '--host', '127.0.0.1', '--port', String(port)], {
    cwd: work,
    // Its own process group, so its workers end with it.
    detached: true,
    stdio: ['ignore', 'pipe', 'pipe'],
    env: { ...process.env, LANGGRAPH_CLI_NO_ANALYTICS: '1', LANGSMITH_TRACING: 'false', LANGCHAIN_TRACING_V2: 'false' },
  });
  python.stdout!.on('data', (d: Buffer) => (log = (log + d.toString()).slice(-4000)));
  python.stderr!.on('data', (d: Buffer) => (log = (log + d.toString()).slice(-4000)));
  const exited = new Promise<never>((_, reject) =>
    python!.once('exit', (code) => reject(new Error(`langgraph dev exited (${code}): ${log}`))),
  );
  const ready = (async () => {
    for (;;) {
      const ok = await fetch(`${base}/ok`).then(
        (r) => r.ok,
        () => false,
      );
      if (ok) return;
      await new Promise((r) => setTimeout(r, 250));
    }
  })();
  await Promise.race([ready, exited]);
  ours = await startHarness({ store: 'embedded', configPath: OURS });
  const url = await ours.app.listen({ port: 0, host: '127.0.0.1' });
  answers.python = await exchange(base);
  answers.ours = await exchange(url);
}, 900_000);

beforeEach((ctx) => {
  if (skip) ctx.skip(skip);
});

afterAll(async () => {
  if (python?.pid && python.exitCode === null) {
    const gone = new Promise((r) => python!.once('exit', r));
    process.kill(-python.pid, 'SIGTERM');
    await gone;
  }
  await ours?.close();
  if (work) rmSync(work, { recursive: true, force: true });
});

it('answers every request with the same HTTP status, and otherwise differs only as documented', () => {
  expect(Object.keys(answers.ours)).toEqual(Object.keys(DELIBERATE));
  for (const [name, expected] of Object.entries(DELIBERATE)) {
    const p = answers.python[name]!;
    const o = answers.ours[name]!;
    expect([name, o.status]).toEqual([name, p.status]);
    expect({ name, ...difference(p, o) }).toEqual({ name, ...expected });
  }
});

it('differs in these values on purpose, and agrees on the rest', () => {
  type Rpc = { id: unknown; result?: any; error?: { code: number; message: string } };
  const p = (name: string) => answers.python[name]!.body as Rpc;
  const o = (name: string) => answers.ours[name]!.body as Rpc;
  // tools/call: the Python server's text is a Python repr of the values; here it is their JSON, and the same values
  // are structuredContent.
  const pyText = p('tools/call').result.content[0].text as string;
  expect(() => JSON.parse(pyText) as unknown).toThrow();
  expect(pyText).toContain("'content': 'echo: hi'");
  expect(JSON.parse(o('tools/call').result.content[0].text as string)).toEqual(
    o('tools/call').result.structuredContent,
  );
  // An interrupt: only a repr with __interrupt__ there; here the interrupt and how to resume it.
  expect(p('tools/call interrupted').result.content[0].text).toContain("'__interrupt__'");
  expect(JSON.parse(o('tools/call interrupted').result.content[0].text as string)).toMatchObject({
    status: 'interrupted',
    how_to_resume: expect.stringContaining('resume'),
  });
  // Both: the unknown tool's error with the request's own id and the same words.
  expect(o('tools/call unknown tool')).toEqual(p('tools/call unknown tool'));
  // tasks/get: a fixed status text there, the reply here; the reply is the last history entry on both.
  expect(p('tasks/get').result.status.message.parts[0].text).toBe('Task completed successfully');
  expect(o('tasks/get').result.status.message.parts[0].text).toBe('echo: hello');
  for (const r of [p('tasks/get'), o('tasks/get')]) expect(r.result.history.at(-1).parts[0].text).toBe('echo: hello');
  // A non-UUID contextId: refused there, a stable thread here, the client's string echoed back.
  expect(p('message/send non-UUID contextId').error?.message).toContain('Invalid thread ID');
  expect(o('message/send non-UUID contextId').result.contextId).toBe('my-chat');
  // A send without a message: -32602 on both; here the words name the field.
  expect(o('message/send without a message').error?.message).toContain('params.message');
  // The interrupt's question: an "Interrupt" artifact there, the status message here.
  expect(p('message/send interrupted').result.artifacts[0].parts[0].data.value).toEqual({ question: 'colour?' });
  expect(o('message/send interrupted').result.status.message.parts[0].data.value).toEqual({ question: 'colour?' });
  // Task ids name the thread and the run on both: "<thread_id>:<run_id>".
  for (const r of [p('message/send'), o('message/send')]) expect(r.result.id).toMatch(/^[0-9a-f-]{36}:[0-9a-f-]{36}$/);
});

// The seed's flow (service-interface.md part 3/4.1) through the real JS SDK against a real `agentplane
// agent-server` process serving examples/agent, on both stores; every field of part 2 checked with its type.
import { spawn, type ChildProcess } from 'node:child_process';
import { mkdtemp, rm } from 'node:fs/promises';
import { createServer } from 'node:net';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { Client } from '@langchain/langgraph-sdk';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createTestDatabase, type TestDatabase } from '../support/postgres.ts';

const root = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '../..');
const AGENT_ASSISTANT_ID = 'fe096781-5601-53d2-b2f6-0d3403f7e9ca';
const INPUT = { messages: [{ role: 'human', content: 'Ada' }] };
const UUID = /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/;
// ISO 8601 with a UTC offset (Z or +hh:mm).
const ISO = /^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}(\.\d+)?(Z|[+-]\d{2}:\d{2})$/;

type Json = Record<string, any>;

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

interface ServerProcess {
  url: string;
  proc: ChildProcess;
  output: () => string;
}

async function startServer(extraArgs: string[]): Promise<ServerProcess> {
  const port = await freePort();
  const proc = spawn(
    process.execPath,
    [
      path.join(root, 'bin/agentplane.mjs'),
      'agent-server',
      '--config',
      path.join(root, 'examples/agent/langgraph.json'),
      '--host',
      '127.0.0.1',
      '--port',
      String(port),
      ...extraArgs,
    ],
    { cwd: root, env: { ...process.env, LOG_LEVEL: 'warn' }, stdio: ['ignore', 'pipe', 'pipe'] },
  );
  let out = '';
  proc.stdout!.on('data', (d: Buffer) => (out += d.toString()));
  proc.stderr!.on('data', (d: Buffer) => (out += d.toString()));
  const url = `http://127.0.0.1:${port}`;
  const deadline = Date.now() + 60_000;
  while (Date.now() < deadline) {
    if (proc.exitCode !== null) throw new Error(`agent-server exited with ${proc.exitCode}:\n${out}`);
    const ok = await fetch(`${url}/ok`).then(
      (r) => r.ok,
      () => false,
    );
    if (ok) return { url, proc, output: () => out };
    await new Promise((r) => setTimeout(r, 100));
  }
  proc.kill('SIGKILL');
  throw new Error(`agent-server did not answer /ok within 60 s:\n${out}`);
}

async function stopServer(server: ServerProcess | undefined): Promise<void> {
  if (!server || server.proc.exitCode !== null) return;
  const exited = new Promise((r) => server.proc.once('exit', r));
  server.proc.kill('SIGTERM');
  const timer = setTimeout(() => server.proc.kill('SIGKILL'), 10_000);
  await exited;
  clearTimeout(timer);
}

function expectIso(value: unknown): void {
  expect(value).toEqual(expect.stringMatching(ISO));
  expect(Number.isNaN(Date.parse(value as string))).toBe(false);
}

function expectPlainObject(value: unknown): void {
  expect(typeof value).toBe('object');
  expect(value).not.toBeNull();
  expect(Array.isArray(value)).toBe(false);
}

/** Seed 2.1 on a new thread. */
function expectNewThread(thread: Json): void {
  expect(thread.thread_id).toMatch(UUID);
  expectIso(thread.created_at);
  expectIso(thread.updated_at);
  expect(thread.updated_at).toBe(thread.created_at);
  expect(thread.metadata).toEqual({});
  expect(thread.status).toBe('idle');
  expect(thread.config).toEqual({});
  expect(thread.values).toBeNull();
}

/** Seed 2.2, with the kwargs the server records for `assistant_id: "agent"` and INPUT. */
function expectRun(run: Json, threadId: string): void {
  expect(run.run_id).toMatch(UUID);
  expect(run.thread_id).toBe(threadId);
  expect(run.assistant_id).toBe(AGENT_ASSISTANT_ID);
  expectIso(run.created_at);
  expectIso(run.updated_at);
  expectPlainObject(run.metadata);
  expect(run.multitask_strategy).toBe('reject');
  const kwargs = run.kwargs as Json;
  expectPlainObject(kwargs);
  expect(kwargs.input).toEqual(INPUT);
  expect(kwargs.input.messages.every((m: Json) => typeof m.role === 'string' && 'content' in m)).toBe(true);
  expectPlainObject(kwargs.config);
  expectPlainObject(kwargs.config.metadata);
  expect(typeof kwargs.config.metadata.created_by).toBe('string');
  expect(kwargs.config.configurable).toMatchObject({
    run_id: run.run_id,
    user_id: '',
    graph_id: 'agent',
    thread_id: threadId,
    assistant_id: AGENT_ASSISTANT_ID,
    checkpoint_id: null,
  });
  expect(kwargs.webhook).toBeNull();
  expect(kwargs.temporary).toBe(false);
  expect(kwargs.stream_mode).toEqual(expect.arrayContaining(['values']));
  expect(kwargs.stream_mode.every((m: unknown) => typeof m === 'string')).toBe(true);
  expect(kwargs.feedback_keys).toBeNull();
  expect(kwargs.interrupt_after).toBeNull();
  expect(kwargs.interrupt_before).toBeNull();
}

/** Fields every message carries (seed 2.3, message objects). */
function expectMessageBase(m: Json, type: string): void {
  expect(m.type).toBe(type);
  expect(typeof m.content === 'string' || Array.isArray(m.content)).toBe(true);
  expectPlainObject(m.additional_kwargs);
  expectPlainObject(m.response_metadata);
  expect('name' in m).toBe(true);
  expect(m.name === null || typeof m.name === 'string').toBe(true);
  expect(typeof m.id).toBe('string');
  expect(typeof m.example).toBe('boolean');
}

function expectAiMessage(m: Json): void {
  expectMessageBase(m, 'ai');
  expect(Array.isArray(m.tool_calls)).toBe(true);
  expect(Array.isArray(m.invalid_tool_calls)).toBe(true);
  expectPlainObject(m.usage_metadata);
  for (const k of ['input_tokens', 'output_tokens', 'total_tokens'])
    expect(Number.isInteger(m.usage_metadata[k])).toBe(true);
}

function expectFinishedState(state: Json, run: Json, threadId: string): void {
  expectPlainObject(state.values);
  const messages = state.values.messages as Json[];
  expect(messages.map((m) => m.type)).toEqual(['human', 'ai', 'tool', 'ai']);
  const [human, call, tool, final] = messages as [Json, Json, Json, Json];

  expectMessageBase(human, 'human');
  expect(human.content).toBe('Ada');

  expectAiMessage(call);
  expect(call.content).toEqual([
    expect.objectContaining({ type: 'text', text: expect.any(String), index: 0 }),
    expect.objectContaining({
      type: 'tool_use',
      id: expect.any(String),
      name: 'lookup_greeting',
      input: { name: 'Ada' },
      index: 1,
    }),
  ]);
  expect(call.tool_calls).toEqual([
    { name: 'lookup_greeting', args: { name: 'Ada' }, id: call.content[1].id, type: 'tool_call' },
  ]);
  expect(call.response_metadata.stop_reason).toBe('tool_use');
  expect('stop_sequence' in call.response_metadata).toBe(true);

  expectMessageBase(tool, 'tool');
  expect(tool.tool_call_id).toBe(call.tool_calls[0].id);
  expectPlainObject(tool.artifact);
  expect(tool.status).toBe('success');
  expect(tool.content).toBe('Hello, Ada!');

  // Rule 3: the last message is the final assistant reply.
  expectAiMessage(final);
  expect(final.content).toBe('The greeting tool says: Hello, Ada!');
  expect(final.response_metadata.stop_reason).toBe('end_turn');
  expect(final.tool_calls).toEqual([]);

  expect(state.next).toEqual([]);
  expect(state.tasks).toEqual([]);

  const md = state.metadata as Json;
  expectPlainObject(md);
  expect(Number.isInteger(md.step)).toBe(true);
  expect(md.run_id).toBe(run.run_id);
  expect(md.source).toBe('loop');
  expectPlainObject(md.writes);
  // The last step was the model's final answer.
  expect(Object.keys(md.writes)).toEqual(['agent']);
  expect(md.writes.agent.messages.at(-1)).toMatchObject({ type: 'ai', content: final.content });
  expect(md.user_id).toBe('');
  expect(md.graph_id).toBe('agent');
  expect(md.thread_id).toBe(threadId);
  expect(typeof md.created_by).toBe('string');
  expect(md.assistant_id).toBe(AGENT_ASSISTANT_ID);

  expectIso(state.created_at);
  expect(typeof state.checkpoint_id).toBe('string');
  expect(typeof state.parent_checkpoint_id).toBe('string');
  expect(state.parent_checkpoint_id).not.toBe(state.checkpoint_id);
  // What today's SDK reads besides the seed's flat ids.
  expect(state.checkpoint).toMatchObject({
    thread_id: threadId,
    checkpoint_ns: '',
    checkpoint_id: state.checkpoint_id,
  });
  expect(state.parent_checkpoint).toMatchObject({ thread_id: threadId, checkpoint_id: state.parent_checkpoint_id });
}

async function seedFlow(client: Client, baseUrl: string): Promise<void> {
  const thread = (await client.threads.create()) as unknown as Json;
  expectNewThread(thread);
  const threadId = thread.thread_id as string;

  expect(await client.runs.list(threadId)).toEqual([]);

  const created = (await client.runs.create(threadId, 'agent', { input: INPUT })) as unknown as Json;
  expect(created.status).toBe('pending');
  expectRun(created, threadId);

  // Rule 1: the run can be polled by its id.
  const polled = (await client.runs.get(threadId, created.run_id)) as unknown as Json;
  expect(polled.run_id).toBe(created.run_id);
  expect(['pending', 'running', 'success']).toContain(polled.status);

  const joined = (await client.runs.join(threadId, created.run_id)) as unknown as Json;
  expect(joined.messages.at(-1).content).toBe('The greeting tool says: Hello, Ada!');

  // Rule 2: after join the run shows success; assistant_id is the resolved UUID, not the graph name.
  const finished = (await client.runs.get(threadId, created.run_id)) as unknown as Json;
  expect(finished.status).toBe('success');
  expectRun(finished, threadId);
  expect(finished.created_at).toBe(created.created_at);

  const runs = (await client.runs.list(threadId)) as unknown as Json[];
  expect(runs.map((r) => [r.run_id, r.status])).toEqual([[created.run_id, 'success']]);

  const state = (await client.threads.getState(threadId)) as unknown as Json;
  expectFinishedState(state, created, threadId);

  const after = (await client.threads.get(threadId)) as unknown as Json;
  expect(after.status).toBe('idle');
  expect(after.values.messages).toHaveLength(4);

  // Plain HTTP sees the same record; the state endpoint is the seed's GET /threads/{id}/state.
  const res = await fetch(`${baseUrl}/threads/${threadId}/state`);
  expect(res.status).toBe(200);
  expect(((await res.json()) as Json).checkpoint_id).toBe(state.checkpoint_id);

  // assistant_id may also be the assistant's UUID (seed part 1).
  const other = (await client.threads.create()) as unknown as Json;
  const byUuid = (await client.runs.create(other.thread_id, AGENT_ASSISTANT_ID, { input: INPUT })) as unknown as Json;
  expect(byUuid.assistant_id).toBe(AGENT_ASSISTANT_ID);
  await client.runs.join(other.thread_id, byUuid.run_id);
  expect(((await client.runs.get(other.thread_id, byUuid.run_id)) as unknown as Json).status).toBe('success');
}

describe('seed flow on the embedded store', () => {
  let server: ServerProcess | undefined;
  let dataDir: string;
  beforeAll(async () => {
    dataDir = await mkdtemp(path.join(tmpdir(), 'ap-e2e-'));
    server = await startServer(['--data-dir', dataDir]);
  });
  afterAll(async () => {
    await stopServer(server);
    await rm(dataDir, { recursive: true, force: true });
  });

  it('create thread -> run -> join -> run success -> final state, every field typed', async () => {
    await seedFlow(new Client({ apiUrl: server!.url }), server!.url);
  });
});

describe('seed flow on Postgres', () => {
  let server: ServerProcess | undefined;
  let db: TestDatabase | undefined;
  beforeAll(async () => {
    db = await createTestDatabase('ap_e2e_');
    server = await startServer(['--database-url', db.url]);
  });
  afterAll(async () => {
    await stopServer(server);
    await db?.drop();
  });

  it('create thread -> run -> join -> run success -> final state, every field typed', async () => {
    await seedFlow(new Client({ apiUrl: server!.url }), server!.url);
  });
});

// The MCP methods this server answers (protocol 2025-11-25, down to 2024-11-05), each turned into requests of the
// REST API made as the caller (http/as-caller.ts). A tool call is a run on a real thread: its id comes back in
// _meta.thread_id, and a later call with that id in its own _meta continues the thread, or answers an interrupt
// with _meta.resume. A run that stops on an interrupt is answered as a result naming the interrupt and how to resume.
// Tasks (tools/call with params.task) are runs in the background: taskId "<thread_id>:<run_id>", so any replica
// answers tasks/get, tasks/result and tasks/cancel from the stored run, and a dropped connection loses nothing.
import { randomUUID } from 'node:crypto';
import { z } from 'zod';
import { detailOf, runOwnValues, sseEvents, type ApiAnswer, type CallerApi } from '../http/as-caller.ts';
import { CallerMemo } from '../http/caller-memo.ts';
import { INTERNAL_ERROR, INVALID_PARAMS, METHOD_NOT_FOUND, RpcError, parseParams } from '../http/jsonrpc.ts';
import { describeTool, namedAssistants, type GraphSchemas, type NamedAssistant } from './tools.ts';

export const LATEST_PROTOCOL = '2025-11-25';
export const SUPPORTED_PROTOCOLS = [LATEST_PROTOCOL, '2025-06-18', '2025-03-26', '2024-11-05'];

const TOOLS_PAGE = 100;
const POLL_INTERVAL_MS = 500;
const RELATED_TASK = 'io.modelcontextprotocol/related-task';

const uuid = z.uuid({ message: 'must be a UUID (a thread id this server gave out)' });

const Meta = z
  .looseObject({
    progressToken: z.union([z.string(), z.number()]).optional(),
    thread_id: uuid.optional(),
    resume: z.unknown().optional(),
  })
  .optional();

const CallParams = z.object({
  name: z.string().min(1),
  arguments: z.record(z.string(), z.unknown()).optional(),
  _meta: Meta,
  task: z.looseObject({ ttl: z.number().int().nonnegative().nullish() }).optional(),
});

const ListParams = z.object({ cursor: z.string().optional() }).passthrough();
const TaskParams = z.object({ taskId: z.string().min(1) }).passthrough();

export interface McpContext {
  api: CallerApi;
  version: string;
  /**
   * The app's memo of callers' tool tables (namedAssistants, key ''): a tools/call resolves its tool name without
   * searching the assistants when the caller's table is recent; tools/list always reads afresh and keeps that.
   */
  tools: CallerMemo<NamedAssistant[]>;
  /**
   * Set when the client asked for progress (_meta.progressToken) on a stream it reads: tools/call then reports
   * each step of the run (a node that finished) through it before the result.
   */
  progress?: (progress: number, message: string) => Promise<void>;
}

export function negotiateProtocol(requested: unknown): string {
  return typeof requested === 'string' && SUPPORTED_PROTOCOLS.includes(requested) ? requested : LATEST_PROTOCOL;
}

/** Runs one request's method; the value is the JSON-RPC result. */
export async function handleMcp(ctx: McpContext, method: string, params: unknown): Promise<unknown> {
  switch (method) {
    case 'initialize': {
      const p = (params ?? {}) as { protocolVersion?: unknown };
      return {
        protocolVersion: negotiateProtocol(p.protocolVersion),
        capabilities: {
          tools: { listChanged: false },
          tasks: { cancel: {}, requests: { tools: { call: {} } } },
        },
        serverInfo: { name: 'agentplane-agent-server', title: 'agentplane agent server', version: ctx.version },
        instructions:
          'Each tool is an agent (an assistant of this deployment). A call runs it on a thread whose id comes back ' +
          'in _meta.thread_id; pass that id in _meta of the next call to continue the conversation, and ' +
          '_meta.resume to answer an interrupt the agent raised.',
      };
    }
    case 'ping':
      return {};
    case 'tools/list':
      return listTools(ctx, parseParams(ListParams, method, params));
    case 'tools/call':
      return callTool(ctx, parseParams(CallParams, method, params));
    case 'tasks/get':
      return taskOf(ctx, parseTaskId(parseParams(TaskParams, method, params).taskId));
    case 'tasks/result':
      return taskResult(ctx, parseTaskId(parseParams(TaskParams, method, params).taskId));
    case 'tasks/cancel':
      return cancelTask(ctx, parseTaskId(parseParams(TaskParams, method, params).taskId));
    default:
      throw new RpcError(METHOD_NOT_FOUND, `Method not found: ${method}`);
  }
}

/** Cursors are opaque strings to clients: the offset of the next page, so any replica can continue a listing. */
function decodeCursor(cursor: string | undefined): number {
  if (cursor === undefined) return 0;
  const m = /^o(\d{1,9})$/.exec(Buffer.from(cursor, 'base64url').toString('utf8'));
  if (!m) throw new RpcError(INVALID_PARAMS, `tools/list: params.cursor: not a cursor this server gave out`);
  return Number(m[1]);
}
const encodeCursor = (offset: number) => Buffer.from(`o${offset}`, 'utf8').toString('base64url');

async function listTools(ctx: McpContext, p: z.infer<typeof ListParams>) {
  const offset = decodeCursor(p.cursor);
  const all = await ctx.tools.get(ctx.api, '', () => namedAssistants(ctx.api), true);
  const page = all.slice(offset, offset + TOOLS_PAGE);
  const tools = await Promise.all(
    page.map(async (named) => {
      const res = await ctx.api.assistantSchemas(named.assistant.assistant_id);
      return describeTool(named, res.status === 200 ? (res.body as GraphSchemas) : null, true);
    }),
  );
  return {
    tools,
    ...(offset + TOOLS_PAGE < all.length ? { nextCursor: encodeCursor(offset + TOOLS_PAGE) } : {}),
  };
}

async function resolveTool(ctx: McpContext, name: string): Promise<NamedAssistant> {
  const found = (await ctx.tools.get(ctx.api, '', () => namedAssistants(ctx.api))).find((n) => n.tool === name);
  if (!found) throw new RpcError(INVALID_PARAMS, `Unknown tool: ${name}`);
  return found;
}

/** An API error answer of a run request, in MCP's terms: bad input is the caller's error, the rest the server's. */
function runRefused(answer: ApiAnswer, what: string): never {
  const detail = detailOf(answer);
  if (answer.status === 422 || answer.status === 400 || answer.status === 404)
    throw new RpcError(INVALID_PARAMS, `${what}: ${detail}`, { status: answer.status });
  if (answer.status < 500) throw new RpcError(-32001, `${what}: ${detail}`, { status: answer.status });
  throw new RpcError(INTERNAL_ERROR, `${what}: the server failed (status ${answer.status})`);
}

/** The run body of a call: new input, or the answer to the thread's interrupt (_meta.resume). */
function runBody(named: NamedAssistant, p: z.infer<typeof CallParams>) {
  const resume = p._meta?.resume;
  if (resume !== undefined) {
    if (!p._meta?.thread_id) throw new RpcError(INVALID_PARAMS, 'tools/call: _meta.resume needs _meta.thread_id');
    return { assistant_id: named.assistant.assistant_id, command: { resume }, if_not_exists: 'reject' as const };
  }
  return {
    assistant_id: named.assistant.assistant_id,
    input: p.arguments ?? {},
    if_not_exists: 'create' as const,
  };
}

/** A tool call's outcome, or a conflict (thread busy, thread unknown) worded as a failed call the caller can read. */
async function callTool(ctx: McpContext, p: z.infer<typeof CallParams>) {
  const named = await resolveTool(ctx, p.name);
  const threadId = p._meta?.thread_id ?? randomUUID();
  const body = runBody(named, p);
  if (p.task) {
    const res = await ctx.api.call('POST', `/threads/${threadId}/runs`, body);
    if (res.status === 409) return failedCall(detailOf(res), threadId);
    if (res.status !== 200) runRefused(res, 'tools/call');
    const run = res.body as RunRow;
    return { task: taskBody(run, 'working') };
  }
  if (ctx.progress) return callWithProgress(ctx, ctx.progress, threadId, body);
  const res = await ctx.api.waitRun(threadId, body);
  if (res.status === 409) return failedCall(detailOf(res), threadId);
  if (res.status !== 200) runRefused(res, 'tools/call');
  const runId = String(res.headers['content-location'] ?? '').split('/runs/')[1] ?? null;
  return outcome(ctx, threadId, runId, res.body, res.run?.status, res.json);
}

/**
 * A tool call that reports progress: the run is started with its node updates logged, each update read back from
 * the run's event log is a progress notification ("<node> finished"), and the result follows once it has ended.
 */
async function callWithProgress(
  ctx: McpContext,
  progress: NonNullable<McpContext['progress']>,
  threadId: string,
  body: ReturnType<typeof runBody>,
) {
  const res = await ctx.api.call('POST', `/threads/${threadId}/runs`, { ...body, stream_mode: ['values', 'updates'] });
  if (res.status === 409) return failedCall(detailOf(res), threadId);
  if (res.status !== 200) runRefused(res, 'tools/call');
  const run = res.body as RunRow;
  const path = `/threads/${threadId}/runs/${run.run_id}`;
  const done = new AbortController();
  try {
    const stream = await ctx.api.stream('GET', `${path}/stream?stream_mode=updates`, undefined, done.signal);
    let step = 0;
    if (stream.status === 200) {
      for await (const e of sseEvents(stream.body)) {
        // Root updates only ("updates|<ns>" are a subgraph's inner steps): {"<node>": <its writes>}.
        if (e.event !== 'updates') continue;
        let update: unknown;
        try {
          update = JSON.parse(e.data);
        } catch {
          continue;
        }
        const nodes = update && typeof update === 'object' ? Object.keys(update) : [];
        await progress(++step, nodes.length ? `${nodes.join(', ')} finished` : `step ${step} finished`);
      }
    } else stream.body.destroy();
  } finally {
    done.abort();
  }
  const joined = await ctx.api.call('GET', `${path}/join`);
  if (joined.status !== 200) runRefused(joined, 'tools/call');
  return outcome(ctx, threadId, run.run_id, joined.body);
}

function failedCall(detail: string, threadId: string) {
  return { isError: true, content: [{ type: 'text', text: detail }], _meta: { thread_id: threadId } };
}

interface ThreadRow {
  status?: string;
  interrupts?: Record<string, Array<{ id?: string; value?: unknown }>>;
}

interface RunRow {
  run_id: string;
  thread_id: string;
  status: string;
  created_at: string;
  updated_at: string;
}

function pendingInterrupts(thread: ThreadRow | undefined): Array<{ id?: string; value?: unknown }> {
  return Object.values(thread?.interrupts ?? {}).flat();
}

/**
 * What a run left, as a tool result: its values (text and structuredContent), its error, or its interrupt.
 * `runStatus`: the run's final status when known; only a run that stopped ("interrupted") can leave an interrupt
 * waiting, so the thread is read for it only then (or when the status is unknown). `json`: the values as JSON text
 * when at hand (the text content is that, not written again).
 */
async function outcome(
  ctx: McpContext,
  threadId: string,
  runId: string | null,
  values: unknown,
  runStatus?: string,
  json?: string,
) {
  const meta = { thread_id: threadId, ...(runId ? { run_id: runId } : {}) };
  const error = (values as { __error__?: { error?: string; message?: string } } | null)?.__error__;
  if (error) {
    const text = `The agent failed: ${error.error ?? 'Error'}${error.message ? `: ${error.message}` : ''}`;
    return { isError: true, content: [{ type: 'text', text }], _meta: { ...meta, status: 'error' } };
  }
  const structured = values && typeof values === 'object' && !Array.isArray(values) ? values : { value: values };
  const thread = runStatus === 'success' ? undefined : await ctx.api.call('GET', `/threads/${threadId}`);
  const interrupts = thread?.status === 200 ? pendingInterrupts(thread.body as ThreadRow) : [];
  if (interrupts.length) {
    const text = JSON.stringify({
      status: 'interrupted',
      thread_id: threadId,
      interrupts,
      how_to_resume: `call this tool again with _meta: {"thread_id": "${threadId}", "resume": <your answer>}`,
    });
    return {
      content: [{ type: 'text', text }],
      structuredContent: structured,
      _meta: { ...meta, status: 'interrupted', interrupts },
    };
  }
  return {
    content: [{ type: 'text', text: values == null ? '{}' : (json ?? JSON.stringify(values)) }],
    structuredContent: structured,
    _meta: { ...meta, status: 'success' },
  };
}

type TaskStatus = 'working' | 'input_required' | 'completed' | 'failed' | 'cancelled';

function taskBody(run: RunRow, status: TaskStatus, statusMessage?: string) {
  return {
    taskId: `${run.thread_id}:${run.run_id}`,
    status,
    ...(statusMessage ? { statusMessage } : {}),
    createdAt: run.created_at,
    lastUpdatedAt: run.updated_at,
    // Runs are kept as long as their thread: no expiry of its own.
    ttl: null,
    pollInterval: POLL_INTERVAL_MS,
  };
}

function parseTaskId(taskId: string): { threadId: string; runId: string } {
  const [threadId, runId, extra] = taskId.split(':');
  if (extra !== undefined || !uuid.safeParse(threadId).success || !uuid.safeParse(runId).success)
    throw new RpcError(INVALID_PARAMS, `Unknown task: ${taskId}`);
  return { threadId: threadId!, runId: runId! };
}

async function readRun(ctx: McpContext, t: { threadId: string; runId: string }): Promise<RunRow> {
  const res = await ctx.api.call('GET', `/threads/${t.threadId}/runs/${t.runId}`);
  // Another caller's run is "not found" as on the API: the task is unknown to this caller.
  if (res.status === 404) throw new RpcError(INVALID_PARAMS, `Unknown task: ${t.threadId}:${t.runId}`);
  if (res.status !== 200) runRefused(res, 'tasks');
  return res.body as RunRow;
}

/**
 * The task of a run: pending and running runs are working; a run that ended is completed (also when it stopped on
 * an interrupt: resuming is a new call, and its result says how), failed on error or timeout, and cancelled when it
 * was cancelled (status "interrupted" with no interrupt pending on its thread).
 */
async function taskOf(ctx: McpContext, t: { threadId: string; runId: string }) {
  const run = await readRun(ctx, t);
  switch (run.status) {
    case 'pending':
    case 'running':
      return taskBody(run, 'working');
    case 'success':
      return taskBody(run, 'completed');
    case 'error':
    case 'timeout':
      return taskBody(run, 'failed', `the run ended with status ${run.status}`);
    default: {
      const thread = await ctx.api.call('GET', `/threads/${t.threadId}`);
      const waiting = thread.status === 200 && pendingInterrupts(thread.body as ThreadRow).length > 0;
      return waiting
        ? taskBody(run, 'completed', 'the agent waits for input: see the result for how to resume')
        : taskBody(run, 'cancelled');
    }
  }
}

async function taskResult(ctx: McpContext, t: { threadId: string; runId: string }) {
  await readRun(ctx, t);
  const res = await ctx.api.call('GET', `/threads/${t.threadId}/runs/${t.runId}/join`);
  if (res.status !== 200) runRefused(res, 'tasks/result');
  // Join answers the thread's values, which a later call on the same thread has replaced: the task's result is
  // what its own run left (its error, when it failed).
  const failed = (res.body as { __error__?: unknown } | null)?.__error__ !== undefined;
  const values = failed
    ? res.body
    : ((await runOwnValues(ctx.api, { thread_id: t.threadId, run_id: t.runId })) ?? res.body);
  const result = await outcome(ctx, t.threadId, t.runId, values);
  return { ...result, _meta: { ...result._meta, [RELATED_TASK]: { taskId: `${t.threadId}:${t.runId}` } } };
}

async function cancelTask(ctx: McpContext, t: { threadId: string; runId: string }) {
  const before = await taskOf(ctx, t);
  if (before.status !== 'working')
    throw new RpcError(INVALID_PARAMS, `Cannot cancel task ${before.taskId}: it is already ${before.status}`);
  const res = await ctx.api.call('POST', `/threads/${t.threadId}/runs/${t.runId}/cancel?action=interrupt&wait=1`);
  if (res.status >= 300) runRefused(res, 'tasks/cancel');
  return taskOf(ctx, t);
}

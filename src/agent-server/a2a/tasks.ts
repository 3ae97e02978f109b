// A2A on runs, through the REST API as the caller (http/as-caller.ts). A context is a thread: a contextId that is a
// UUID is the thread id itself, any other string maps to the same thread id every time (a name-based UUID), so
// clients may choose their own context names. A task is the run a message started, with the runs that answered its
// interrupts: its id "<thread_id>:<run_id>" names the thread and first run, so any replica finds it; the runs that
// resume it carry the id in their metadata (a2a_task_id). A run stopped on an interrupt is input-required; a message
// with that task id resumes it. Cancel is the run's cancel. What a task looks like is a2a/view.ts; ListTasks is
// a2a/list.ts.
import { randomUUID } from 'node:crypto';
import { v5 as uuidv5 } from 'uuid';
import { detailOf, runOwnValues, sseEvents, type ApiAnswer, type CallerApi } from '../http/as-caller.ts';
import { INTERNAL_ERROR, INVALID_PARAMS, RpcError } from '../http/jsonrpc.ts';
import type { Message, Task } from './dialects.ts';
import { isAiMessage, taskOfRun, textOfMessage, type RunRow, type ThreadRow } from './view.ts';

export const TASK_NOT_FOUND = -32001;
export const TASK_NOT_CANCELABLE = -32002;
export const UNSUPPORTED_OPERATION = -32004;
export const CONTENT_TYPE_NOT_SUPPORTED = -32005;

/** The namespace of the thread ids made from contextIds that are not UUIDs. */
const CONTEXT_NAMESPACE = '4c9f5a7e-2b1d-5e08-9a43-6d2f8c1b0e57';
const UUID_RE = /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/i;

export function threadOfContext(contextId: string): string {
  return UUID_RE.test(contextId) ? contextId.toLowerCase() : uuidv5(contextId, CONTEXT_NAMESPACE);
}

export interface AgentContext {
  api: CallerApi;
  /** The assistant (or graph id) of the URL, as the runs name it: the API resolves it and says when it is missing. */
  assistantId: string;
  /** Whether the graph's input has `messages` (text parts go there); asked only when a message has text. */
  takesMessages(): Promise<boolean>;
}

/** Whether an assistant's graph takes `messages` in its input, read as the caller; its absence is not found. */
export async function takesMessages(api: CallerApi, assistantId: string): Promise<boolean> {
  const res = await api.assistantSchemas(assistantId);
  if (res.status === 404 || res.status === 422)
    throw new RpcError(INVALID_PARAMS, `Assistant not found: ${assistantId}`);
  if (res.status !== 200) refused(res, 'reading the agent');
  const input = (res.body as { input_schema?: { properties?: Record<string, unknown> } }).input_schema;
  return !!input?.properties?.messages;
}

/** An API error answer in A2A's terms: `notFound` is the code a 404 becomes (a task, or what a message named). */
export function refused(answer: ApiAnswer, what: string, notFound = TASK_NOT_FOUND): never {
  const detail = detailOf(answer);
  if (answer.status === 404) throw new RpcError(notFound, `${what}: ${detail}`);
  if (answer.status < 500) throw new RpcError(INVALID_PARAMS, `${what}: ${detail}`, { status: answer.status });
  throw new RpcError(INTERNAL_ERROR, `${what}: the server failed (status ${answer.status})`);
}

export function parseTaskId(id: string): { threadId: string; runId: string } {
  const [threadId, runId, extra] = id.split(':');
  if (extra !== undefined || !UUID_RE.test(threadId ?? '') || !UUID_RE.test(runId ?? ''))
    throw new RpcError(TASK_NOT_FOUND, `Task not found: ${id}`);
  return { threadId: threadId!, runId: runId! };
}

/** The graph input of a user message: text parts become a user message, data parts (objects) merge in. */
async function inputOf(ctx: AgentContext, m: Message): Promise<Record<string, unknown>> {
  const input: Record<string, unknown> = {};
  const texts: string[] = [];
  for (const p of m.parts) {
    if (p.file) throw new RpcError(CONTENT_TYPE_NOT_SUPPORTED, 'File parts are not supported: send text or data parts');
    if (p.text !== undefined) texts.push(p.text);
    else if (p.data && typeof p.data === 'object' && !Array.isArray(p.data)) Object.assign(input, p.data);
    else throw new RpcError(CONTENT_TYPE_NOT_SUPPORTED, 'A data part must hold a JSON object (merged into the input)');
  }
  if (texts.length) {
    if (!(await ctx.takesMessages()))
      throw new RpcError(
        CONTENT_TYPE_NOT_SUPPORTED,
        "This agent's input has no messages: send its input as a data part (a JSON object)",
      );
    input.messages = [
      ...(Array.isArray(input.messages) ? input.messages : []),
      { type: 'human', content: texts.join('\n'), id: m.messageId },
    ];
  }
  return input;
}

/** What a resume carries: the text when there is only text, else the data part's value. */
function resumeOf(m: Message): unknown {
  const data = m.parts.find((p) => p.data !== undefined);
  if (data) return data.data;
  return m.parts.map((p) => p.text ?? '').join('\n');
}

/**
 * The task a run is, from its record, its own final values and its thread as it is now. Its history is the run's
 * turn: what the user sent (or answered) and, once the run has ended, the agent's reply.
 */
export async function viewTask(ctx: AgentContext, taskId: string, run: RunRow, values?: unknown): Promise<Task> {
  const readThread = () =>
    ctx.api
      .call('GET', `/threads/${run.thread_id}`)
      .then((t) => (t.status === 200 ? (t.body as ThreadRow) : undefined));
  return taskOfRun(taskId, run, values, readThread, () => runOwnValues(ctx.api, run));
}

/** The runs of a task on its thread, newest first: its first run and those that resumed it. */
async function latestRun(ctx: AgentContext, taskId: string): Promise<RunRow> {
  const { threadId, runId } = parseTaskId(taskId);
  const res = await ctx.api.call('GET', `/threads/${threadId}/runs?limit=100`);
  if (res.status === 404) throw new RpcError(TASK_NOT_FOUND, `Task not found: ${taskId}`);
  if (res.status !== 200) refused(res, 'tasks');
  const runs = (res.body as RunRow[]).filter((r) => r.run_id === runId || r.metadata?.a2a_task_id === taskId);
  if (!runs.length) throw new RpcError(TASK_NOT_FOUND, `Task not found: ${taskId}`);
  return runs[0]!;
}

export async function getTask(ctx: AgentContext, taskId: string): Promise<Task> {
  return viewTask(ctx, taskId, await latestRun(ctx, taskId));
}

/** Starts the run a message asks for (a new task, or the resume of an input-required one); answers its task id. */
async function startRun(
  ctx: AgentContext,
  m: Message,
  wait: boolean,
  push?: object,
): Promise<{ taskId: string; run: RunRow; values?: unknown }> {
  let threadId: string;
  let contextId: string;
  let body: Record<string, unknown>;
  let taskId: string | undefined;
  if (m.taskId) {
    const current = await getTask(ctx, m.taskId);
    if (current.state !== 'input-required')
      throw new RpcError(INVALID_PARAMS, `Task ${m.taskId} is ${current.state}, not waiting for input`);
    threadId = parseTaskId(m.taskId).threadId;
    if (m.contextId && threadOfContext(m.contextId) !== threadId)
      throw new RpcError(
        INVALID_PARAMS,
        `Task ${m.taskId} belongs to context ${current.contextId}, not ${m.contextId}`,
      );
    contextId = current.contextId;
    taskId = m.taskId;
    body = {
      assistant_id: ctx.assistantId,
      command: { resume: resumeOf(m) },
      if_not_exists: 'reject',
      metadata: { a2a_context_id: contextId, a2a_task_id: taskId },
    };
  } else {
    contextId = m.contextId ?? randomUUID();
    threadId = threadOfContext(contextId);
    body = {
      assistant_id: ctx.assistantId,
      input: await inputOf(ctx, m),
      if_not_exists: 'create',
      metadata: { a2a_context_id: contextId },
    };
  }
  // A run the client does not wait on (a stream, a task in the background) logs its messages token by token
  // (messages-tuple), which the stream and any resubscribe read back. One waited on does not pay for that.
  if (!wait) body.stream_mode = ['values', 'messages-tuple'];
  // The send's push config rides in the run's metadata: stored with the run, before it can start (a2a/push.ts).
  if (push) body.metadata = { ...(body.metadata as object), a2a_push: push };
  if (!wait) {
    const res = await ctx.api.call('POST', `/threads/${threadId}/runs`, body);
    if (res.status !== 200) refused(res, 'message', INVALID_PARAMS);
    const run = res.body as RunRow;
    return { taskId: taskId ?? `${threadId}:${run.run_id}`, run };
  }
  const res = await ctx.api.waitRun(threadId, body);
  if (res.status !== 200) refused(res, 'message', INVALID_PARAMS);
  const runId = String(res.headers['content-location'] ?? '').split('/runs/')[1] ?? '';
  if (res.run) return { taskId: taskId ?? `${threadId}:${runId}`, run: res.run as RunRow, values: res.body };
  const read = await ctx.api.call('GET', `/threads/${threadId}/runs/${runId}`);
  if (read.status !== 200) refused(read, 'message');
  return { taskId: taskId ?? `${threadId}:${runId}`, run: read.body as RunRow, values: res.body };
}

export async function sendMessage(ctx: AgentContext, m: Message, blocking: boolean, push?: object): Promise<Task> {
  if (m.role !== 'user') throw new RpcError(INVALID_PARAMS, 'message.role: the client sends user messages');
  const started = await startRun(ctx, m, blocking, push);
  return viewTask(ctx, started.taskId, started.run, started.values);
}

/**
 * What a stream sends: the task as it is, or a piece of the reply being written (the text of one token or more of
 * the AI message `messageId`; a new message replaces what the artifact held, the next pieces of it append).
 */
export type TaskEvent =
  { task: Task } | { chunk: { taskId: string; contextId: string; artifactId: string; text: string; append: boolean } };

/** The run's token stream from its durable event log (as the caller): the text of each AI message chunk, in order. */
async function* replyChunks(
  ctx: AgentContext,
  run: RunRow,
  signal: AbortSignal,
): AsyncGenerator<{ messageId: string; text: string }> {
  const res = await ctx.api.stream(
    'GET',
    `/threads/${run.thread_id}/runs/${run.run_id}/stream?stream_mode=messages-tuple`,
    undefined,
    signal,
  );
  if (res.status !== 200) {
    res.body.destroy();
    return;
  }
  for await (const e of sseEvents(res.body)) {
    // Root messages only: a subgraph's ("messages|<ns>") are steps inside the agent, not its reply.
    if (e.event !== 'messages') continue;
    let tuple: unknown;
    try {
      tuple = JSON.parse(e.data);
    } catch {
      continue;
    }
    const chunk = Array.isArray(tuple) ? (tuple[0] as { id?: unknown } | undefined) : undefined;
    if (!chunk || !isAiMessage(chunk)) continue;
    const text = textOfMessage(chunk);
    if (text) yield { messageId: typeof chunk.id === 'string' ? chunk.id : '', text };
  }
}

/**
 * The task as it is, then (unless it has stopped already) the reply as the agent writes it, token by token, from
 * the run's durable event log (so a resubscribe, on any replica, replays it from the start), and the task once its
 * run has ended. `signal`: the client went away; the stream is let go.
 */
export async function* followTask(
  ctx: AgentContext,
  taskId: string,
  run: RunRow,
  signal: AbortSignal,
): AsyncGenerator<TaskEvent> {
  const first = await viewTask(ctx, taskId, run);
  yield { task: first };
  if (first.state !== 'submitted' && first.state !== 'working') return;
  let current: string | null = null;
  for await (const c of replyChunks(ctx, run, signal)) {
    const append = c.messageId === current;
    current = c.messageId;
    yield {
      chunk: { taskId, contextId: first.contextId, artifactId: run.run_id, text: c.text, append },
    };
  }
  if (signal.aborted) return;
  const joined = await ctx.api.call('GET', `/threads/${run.thread_id}/runs/${run.run_id}/join`);
  if (joined.status !== 200) refused(joined, 'stream');
  const ended = await ctx.api.call('GET', `/threads/${run.thread_id}/runs/${run.run_id}`);
  if (ended.status !== 200) refused(ended, 'stream');
  yield { task: await viewTask(ctx, taskId, ended.body as RunRow, joined.body) };
}

export async function streamMessage(
  ctx: AgentContext,
  m: Message,
  signal: AbortSignal,
  push?: object,
): Promise<AsyncGenerator<TaskEvent>> {
  if (m.role !== 'user') throw new RpcError(INVALID_PARAMS, 'message.role: the client sends user messages');
  const started = await startRun(ctx, m, false, push);
  return followTask(ctx, started.taskId, started.run, signal);
}

export async function subscribe(
  ctx: AgentContext,
  taskId: string,
  signal: AbortSignal,
): Promise<AsyncGenerator<TaskEvent>> {
  return followTask(ctx, taskId, await latestRun(ctx, taskId), signal);
}

export async function cancelTask(ctx: AgentContext, taskId: string): Promise<Task> {
  const run = await latestRun(ctx, taskId);
  const before = await viewTask(ctx, taskId, run);
  if (before.state !== 'submitted' && before.state !== 'working')
    throw new RpcError(TASK_NOT_CANCELABLE, `Task ${taskId} cannot be canceled: it is ${before.state}`);
  const res = await ctx.api.call('POST', `/threads/${run.thread_id}/runs/${run.run_id}/cancel?action=interrupt&wait=1`);
  if (res.status >= 300) refused(res, 'cancel');
  return getTask(ctx, taskId);
}

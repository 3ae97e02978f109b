// The two A2A dialects one URL speaks, chosen per request by its method: 0.3 (message/send, lowercase states, `kind`
// on every object, parts {kind:"text",text}) and 1.0 (SendMessage, TASK_STATE_* and ROLE_* enums, parts as oneof
// fields {text} / {data}, results wrapped as {task} / {statusUpdate}). Everything inside works on one neutral
// model; this file reads a dialect's message into it and writes tasks and events back out.
import { z } from 'zod';
import { parseParams } from '../http/jsonrpc.ts';

export type Dialect = '0.3' | '1.0';

export type TaskState = 'submitted' | 'working' | 'completed' | 'failed' | 'canceled' | 'input-required';

export interface Part {
  text?: string;
  data?: unknown;
  /** A file by reference or inline (base64): taken apart only to refuse it by name. */
  file?: { url?: string; mediaType?: string };
  metadata?: Record<string, unknown>;
}

export interface Message {
  messageId: string;
  role: 'user' | 'agent';
  parts: Part[];
  contextId?: string;
  taskId?: string;
  metadata?: Record<string, unknown>;
}

export interface Artifact {
  artifactId: string;
  name: string;
  parts: Part[];
}

export interface Task {
  id: string;
  contextId: string;
  state: TaskState;
  message?: Message;
  timestamp: string;
  artifacts: Artifact[];
  /** The latest turn: the user's message (or answer to an interrupt) and, once there is one, the agent's reply. */
  history: Message[];
  metadata?: Record<string, unknown>;
}

/** The dialect of a method name, or null for one neither knows. */
export function dialectOf(method: string): Dialect | null {
  if (METHODS_03.has(method)) return '0.3';
  if (METHODS_10.has(method)) return '1.0';
  return null;
}

const METHODS_03 = new Set([
  'message/send',
  'message/stream',
  'tasks/get',
  'tasks/cancel',
  'tasks/resubscribe',
  'tasks/pushNotificationConfig/set',
  'tasks/pushNotificationConfig/get',
  'tasks/pushNotificationConfig/list',
  'tasks/pushNotificationConfig/delete',
  'agent/getAuthenticatedExtendedCard',
]);
const METHODS_10 = new Set([
  'SendMessage',
  'SendStreamingMessage',
  'GetTask',
  'CancelTask',
  'SubscribeToTask',
  'ListTasks',
  'CreateTaskPushNotificationConfig',
  'GetTaskPushNotificationConfig',
  'ListTaskPushNotificationConfigs',
  'DeleteTaskPushNotificationConfig',
  'GetExtendedAgentCard',
]);

/** What each method does, whichever dialect named it. */
export type Operation = 'send' | 'stream' | 'get' | 'cancel' | 'subscribe' | 'list' | 'push' | 'unsupported';

export function operationOf(method: string): Operation {
  switch (method) {
    case 'message/send':
    case 'SendMessage':
      return 'send';
    case 'message/stream':
    case 'SendStreamingMessage':
      return 'stream';
    case 'tasks/get':
    case 'GetTask':
      return 'get';
    case 'tasks/cancel':
    case 'CancelTask':
      return 'cancel';
    case 'tasks/resubscribe':
    case 'SubscribeToTask':
      return 'subscribe';
    case 'ListTasks':
      return 'list';
    default:
      return method.toLowerCase().includes('push') ? 'push' : 'unsupported';
  }
}

const obj = z.record(z.string(), z.unknown());

const Part03 = z.union([
  z.looseObject({ kind: z.literal('text'), text: z.string(), metadata: obj.optional() }),
  z.looseObject({ kind: z.literal('data'), data: z.unknown(), metadata: obj.optional() }),
  z.looseObject({
    kind: z.literal('file'),
    file: z.looseObject({ uri: z.string().optional(), bytes: z.string().optional(), mimeType: z.string().optional() }),
  }),
]);
const Part10 = z.union([
  z.looseObject({ text: z.string(), metadata: obj.optional() }),
  z.looseObject({ data: z.unknown().refine((d) => d !== undefined, 'required'), metadata: obj.optional() }),
  z.looseObject({ url: z.string(), mediaType: z.string().optional() }),
  z.looseObject({ raw: z.string(), mediaType: z.string().optional() }),
]);

const Message03 = z.looseObject({
  kind: z.literal('message').optional(),
  messageId: z.string().min(1),
  role: z.enum(['user', 'agent']),
  parts: z.array(Part03).min(1, 'a message needs at least one part'),
  contextId: z.string().min(1).max(1000).optional(),
  taskId: z.string().min(1).max(200).optional(),
  metadata: obj.nullish(),
});
const Message10 = z.looseObject({
  messageId: z.string().min(1),
  role: z.enum(['ROLE_USER', 'ROLE_AGENT']),
  parts: z.array(Part10).min(1, 'a message needs at least one part'),
  contextId: z.string().min(1).max(1000).optional(),
  taskId: z.string().min(1).max(200).optional(),
  metadata: obj.nullish(),
});

const SendParams = {
  '0.3': z.looseObject({
    message: Message03,
    configuration: z.looseObject({ blocking: z.boolean().nullish() }).nullish(),
    metadata: obj.nullish(),
  }),
  '1.0': z.looseObject({
    message: Message10,
    configuration: z.looseObject({ returnImmediately: z.boolean().nullish() }).nullish(),
    metadata: obj.nullish(),
  }),
};
export const TaskIdParams = z.looseObject({ id: z.string().min(1).max(200) });

const STATES_BY_NAME = new Map<string, TaskState>(
  (['submitted', 'working', 'completed', 'failed', 'canceled', 'input-required'] as const).map((s) => [
    `TASK_STATE_${s.toUpperCase().replace('-', '_')}`,
    s,
  ]),
);

/** ListTasks (1.0): its filters and page; empty strings and TASK_STATE_UNSPECIFIED are "not given", as protobuf JSON has them. */
const ListParams = z.looseObject({
  contextId: z.string().max(1000).optional(),
  status: z
    .string()
    .refine((s) => s === '' || s === 'TASK_STATE_UNSPECIFIED' || STATES_BY_NAME.has(s), 'not a task state')
    .optional(),
  pageSize: z.number().int().min(1).max(100).optional(),
  pageToken: z.string().max(100).optional(),
  historyLength: z.number().int().min(0).optional(),
  statusTimestampAfter: z.iso.datetime({ offset: true }).optional(),
  includeArtifacts: z.boolean().optional(),
});

export function readList(method: string, params: unknown) {
  const p = parseParams(ListParams, method, params);
  return {
    ...(p.contextId ? { contextId: p.contextId } : {}),
    ...(p.status && STATES_BY_NAME.has(p.status) ? { state: STATES_BY_NAME.get(p.status)! } : {}),
    pageSize: p.pageSize ?? 50,
    ...(p.pageToken ? { pageToken: p.pageToken } : {}),
    ...(p.historyLength !== undefined ? { historyLength: p.historyLength } : {}),
    ...(p.statusTimestampAfter ? { statusTimestampAfter: new Date(p.statusTimestampAfter).toISOString() } : {}),
    includeArtifacts: p.includeArtifacts === true,
  };
}

/**
 * The params of a send or stream in either dialect: the message in the neutral model, and whether the client waits
 * for the run (0.3: configuration.blocking, default true; 1.0: not configuration.returnImmediately).
 */
export function readSend(dialect: Dialect, method: string, params: unknown): { message: Message; blocking: boolean } {
  if (dialect === '0.3') {
    const p = parseParams(SendParams['0.3'], method, params);
    return { message: readMessage(p.message), blocking: p.configuration?.blocking !== false };
  }
  const p = parseParams(SendParams['1.0'], method, params);
  return { message: readMessage(p.message), blocking: p.configuration?.returnImmediately !== true };
}

function readMessage(raw: z.infer<typeof Message03> | z.infer<typeof Message10>): Message {
  const parts: Part[] = (raw.parts as Array<Record<string, unknown>>).map((p) => {
    const metadata = p.metadata as Record<string, unknown> | undefined;
    if (typeof p.text === 'string') return { text: p.text, ...(metadata ? { metadata } : {}) };
    if ('data' in p) return { data: p.data, ...(metadata ? { metadata } : {}) };
    const file = (p.file ?? p) as { uri?: string; url?: string; mimeType?: string; mediaType?: string };
    return { file: { url: file.uri ?? file.url, mediaType: file.mimeType ?? file.mediaType } };
  });
  return {
    messageId: raw.messageId,
    role: raw.role === 'agent' || raw.role === 'ROLE_AGENT' ? 'agent' : 'user',
    parts,
    ...(raw.contextId ? { contextId: raw.contextId } : {}),
    ...(raw.taskId ? { taskId: raw.taskId } : {}),
    ...(raw.metadata ? { metadata: raw.metadata } : {}),
  };
}

const STATE_10: Record<TaskState, string> = {
  submitted: 'TASK_STATE_SUBMITTED',
  working: 'TASK_STATE_WORKING',
  completed: 'TASK_STATE_COMPLETED',
  failed: 'TASK_STATE_FAILED',
  canceled: 'TASK_STATE_CANCELED',
  'input-required': 'TASK_STATE_INPUT_REQUIRED',
};

function writePart(d: Dialect, p: Part): Record<string, unknown> {
  const meta = p.metadata ? { metadata: p.metadata } : {};
  if (d === '0.3') {
    if (p.text !== undefined) return { kind: 'text', text: p.text, ...meta };
    return { kind: 'data', data: p.data ?? null, ...meta };
  }
  if (p.text !== undefined) return { text: p.text, ...meta };
  return { data: p.data ?? null, mediaType: 'application/json', ...meta };
}

export function writeMessage(d: Dialect, m: Message): Record<string, unknown> {
  return {
    ...(d === '0.3' ? { kind: 'message' } : {}),
    messageId: m.messageId,
    role: d === '0.3' ? m.role : m.role === 'agent' ? 'ROLE_AGENT' : 'ROLE_USER',
    parts: m.parts.map((p) => writePart(d, p)),
    ...(m.contextId ? { contextId: m.contextId } : {}),
    ...(m.taskId ? { taskId: m.taskId } : {}),
    ...(m.metadata ? { metadata: m.metadata } : {}),
  };
}

function writeStatus(d: Dialect, t: Task): Record<string, unknown> {
  return {
    state: d === '0.3' ? t.state : STATE_10[t.state],
    ...(t.message ? { message: writeMessage(d, t.message) } : {}),
    timestamp: t.timestamp,
  };
}

function writeArtifact(d: Dialect, a: Artifact): Record<string, unknown> {
  return { artifactId: a.artifactId, name: a.name, parts: a.parts.map((p) => writePart(d, p)) };
}

export function writeTask(d: Dialect, t: Task): Record<string, unknown> {
  return {
    ...(d === '0.3' ? { kind: 'task' } : {}),
    id: t.id,
    contextId: t.contextId,
    status: writeStatus(d, t),
    artifacts: t.artifacts.map((a) => writeArtifact(d, a)),
    history: t.history.map((m) => writeMessage(d, m)),
    ...(t.metadata ? { metadata: t.metadata } : {}),
  };
}

export const isFinal = (s: TaskState) =>
  s === 'completed' || s === 'failed' || s === 'canceled' || s === 'input-required';

/** The result of message/send or SendMessage. */
export const sendResult = (d: Dialect, t: Task) => (d === '0.3' ? writeTask(d, t) : { task: writeTask(d, t) });

/** A piece of the reply being written, as an artifact update (appended to the artifact, or replacing it). */
export function chunkEvent(
  d: Dialect,
  c: { taskId: string; contextId: string; artifactId: string; text: string; append: boolean },
): Record<string, unknown> {
  const update = {
    taskId: c.taskId,
    contextId: c.contextId,
    artifact: writeArtifact(d, { artifactId: c.artifactId, name: 'result', parts: [{ text: c.text }] }),
    append: c.append,
    lastChunk: false,
  };
  return d === '0.3' ? { kind: 'artifact-update', ...update } : { artifactUpdate: update };
}

/** The stream events of a task's state: the task itself first, its artifacts and a status update at the end. */
export function streamEvents(d: Dialect, t: Task, first: boolean): Array<Record<string, unknown>> {
  if (first) return [d === '0.3' ? writeTask(d, t) : { task: writeTask(d, t) }];
  const out: Array<Record<string, unknown>> = [];
  for (const a of t.artifacts) {
    // append false: the whole result replaces what the streamed pieces built up.
    const update = {
      taskId: t.id,
      contextId: t.contextId,
      artifact: writeArtifact(d, a),
      append: false,
      lastChunk: true,
    };
    out.push(d === '0.3' ? { kind: 'artifact-update', ...update } : { artifactUpdate: update });
  }
  const status = { taskId: t.id, contextId: t.contextId, status: writeStatus(d, t) };
  out.push(d === '0.3' ? { kind: 'status-update', ...status, final: isFinal(t.state) } : { statusUpdate: status });
  return out;
}

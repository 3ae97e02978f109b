// The thread protocol's commands (@langchain/protocol Command), the same over POST /threads/{id}/commands and a
// WebSocket: run.start, input.respond and state.fork (a run from an earlier checkpoint) create ordinary runs
// (through the service, so multitask strategies, custom auth and the run queue apply), flagged to stream in the
// protocol-native form; input.inject queues a user's message as the next run's input; state.get reads the thread's
// state. Subscriptions are the transports' business
// (routes/protocol.ts). A command the server does not serve is answered not_supported, naming it; bad params
// invalid_argument, naming the field.
import { z } from 'zod';
import { AppError, NotFoundError } from '../../lib/errors.ts';
import type { RunAuth } from '../services/context.ts';
import type { AgentService } from '../services/index.ts';
import type { RunCreateBody } from '../schemas/runs.ts';
import { runTree } from './tree.ts';

export type ErrorCode =
  | 'invalid_argument'
  | 'unknown_command'
  | 'no_such_run'
  | 'no_such_interrupt'
  | 'no_such_checkpoint'
  | 'no_such_subscription'
  | 'permission_denied'
  | 'not_supported'
  | 'unknown_error';

export class CommandError extends Error {
  constructor(
    readonly code: ErrorCode,
    message: string,
    /** The HTTP status of the answer over POST /commands. */
    readonly status: number,
  ) {
    super(message);
  }
}

export const CommandEnvelope = z.object({
  id: z.number().int().nonnegative(),
  method: z.string().min(1).max(100),
  params: z.record(z.string(), z.unknown()).nullish(),
});
export type CommandEnvelope = z.infer<typeof CommandEnvelope>;

const obj = z.record(z.string(), z.unknown());
const Strategy = z.enum(['reject', 'rollback', 'interrupt', 'enqueue']);
const RunStart = z.object({
  assistant_id: z.string().min(1),
  input: z.unknown().optional(),
  config: obj.nullish(),
  metadata: obj.nullish(),
  multitask_strategy: Strategy.nullish(),
  multitaskStrategy: Strategy.nullish(),
});
const Response = z.object({ interrupt_id: z.string().min(1), response: z.unknown() });
const InputRespond = z.object({
  interrupt_id: z.string().min(1).optional(),
  response: z.unknown().optional(),
  responses: z.array(Response).min(1).optional(),
  strict_resume: z.boolean().optional(),
  config: obj.nullish(),
  metadata: obj.nullish(),
  update: z.unknown().optional(),
  goto: z.unknown().optional(),
});
const StateGet = z.object({ keys: z.array(z.string()).optional() });
const GetTree = z.object({ run_id: z.string().max(100).optional() });
const ListCheckpoints = z.object({
  namespace: z.array(z.string().max(1000)).max(50).optional(),
  limit: z.number().int().min(1).max(1000).default(10),
  before: z.string().max(200).optional(),
});

const StateFork = z.object({
  checkpoint_id: z.string().min(1).max(200),
  input: z.unknown().optional(),
  config: obj.nullish(),
  metadata: obj.nullish(),
});

const InputInject = z.object({
  namespace: z.array(z.string().max(1000)).max(50).default([]),
  message: z.object({
    role: z.enum(['user', 'system']),
    content: z.string().max(1_000_000),
    name: z.string().min(1).max(200).optional(),
  }),
});

export interface CommandDeps {
  service: AgentService;
}

function parseParams<T>(schema: z.ZodType<T>, method: string, params: unknown): T {
  const r = schema.safeParse(params ?? {});
  if (r.success) return r.data;
  const issue = r.error.issues[0]!;
  throw new CommandError(
    'invalid_argument',
    `${method}: params.${issue.path.join('.') || '(params)'}: ${issue.message}`,
    422,
  );
}

/** A domain error of the service (assistant missing, thread busy, ...) as a command error. */
function asCommandError(err: unknown): never {
  if (err instanceof AppError) {
    const code: ErrorCode = err.status === 403 ? 'permission_denied' : 'invalid_argument';
    throw new CommandError(code, err.message, err.status);
  }
  throw err;
}

/** Interrupt ids the thread's latest checkpoint waits on (none for a thread that does not exist yet). */
async function pendingInterrupts(deps: CommandDeps, threadId: string): Promise<Set<string>> {
  if (!(await deps.service.threads.get(threadId))) return new Set();
  const state = await deps.service.state.get(threadId, undefined, true);
  const ids = new Set<string>();
  const collect = (list: unknown) => {
    for (const i of Array.isArray(list) ? list : []) {
      const id = (i as { id?: unknown } | null)?.id;
      if (typeof id === 'string') ids.add(id);
    }
  };
  collect(state.interrupts);
  for (const t of state.tasks) collect(t.interrupts);
  return ids;
}

/** Runs one command on the thread; the result is the success response's `result`. */
export async function runCommand(
  deps: CommandDeps,
  threadId: string,
  cmd: CommandEnvelope,
  caller: RunAuth,
): Promise<Record<string, unknown>> {
  switch (cmd.method) {
    case 'run.start':
      return runStart(deps, threadId, parseParams(RunStart, cmd.method, cmd.params), caller);
    case 'input.respond':
      return inputRespond(deps, threadId, parseParams(InputRespond, cmd.method, cmd.params), caller);
    case 'state.get': {
      const p = parseParams(StateGet, cmd.method, cmd.params);
      const state = await deps.service.state.get(threadId);
      const values = state.values as Record<string, unknown> | null;
      const picked =
        p.keys && values && typeof values === 'object'
          ? Object.fromEntries(Object.entries(values).filter(([k]) => p.keys!.includes(k)))
          : values;
      return {
        values: picked,
        ...(state.checkpoint_id
          ? { checkpoint: { id: state.checkpoint_id, ns: state.checkpoint?.checkpoint_ns ?? '' } }
          : {}),
      };
    }
    case 'agent.getTree':
      return agentTree(deps, threadId, parseParams(GetTree, cmd.method, cmd.params));
    case 'state.listCheckpoints':
      return listCheckpoints(deps, threadId, parseParams(ListCheckpoints, cmd.method, cmd.params));
    case 'state.fork':
      return stateFork(deps, threadId, parseParams(StateFork, cmd.method, cmd.params), caller);
    case 'input.inject':
      return inputInject(deps, threadId, parseParams(InputInject, cmd.method, cmd.params), caller);
    default:
      if (cmd.method.startsWith('subscription.'))
        throw new CommandError(
          'not_supported',
          `${cmd.method} is a WebSocket command; over HTTP, POST /threads/{thread_id}/stream/events subscribes (its since resumes after an event)`,
          400,
        );
      throw new CommandError('unknown_command', `unknown command: ${cmd.method}`, 400);
  }
}

/**
 * The run's graph and the subgraphs it entered, each with its latest lifecycle status, as the run's stored events
 * map to protocol lifecycle events (the same on every replica). The thread's latest run unless run_id names one.
 */
async function agentTree(
  deps: CommandDeps,
  threadId: string,
  p: z.infer<typeof GetTree>,
): Promise<Record<string, unknown>> {
  const { runs } = deps.service;
  const run = p.run_id
    ? await runs.get(threadId, p.run_id)
    : ((await runs.list(threadId, { limit: 1, offset: 0 }))[0] ?? null);
  if (!run) throw new CommandError('no_such_run', `agent.getTree: no run ${p.run_id ?? 'on this thread'}`, 404);
  return { tree: await runTree(deps, threadId, run) };
}

/**
 * The thread's checkpoints, newest first (a subgraph's with its namespace), as the history lists them: `before` is
 * the id of the last one a client has, for the next page.
 */
async function listCheckpoints(
  deps: CommandDeps,
  threadId: string,
  p: z.infer<typeof ListCheckpoints>,
): Promise<Record<string, unknown>> {
  const ns = (p.namespace ?? []).join('|');
  const states = await deps.service.state.history(threadId, {
    limit: p.limit,
    ...(p.before ? { before: p.before } : {}),
    ...(ns ? { checkpoint: { checkpoint_ns: ns } } : {}),
  });
  return {
    checkpoints: states.map((s) => {
      const metadata = s.metadata ?? {};
      const writes = metadata.writes;
      const nodes = writes && typeof writes === 'object' ? Object.keys(writes) : [];
      return {
        id: s.checkpoint_id,
        timestamp: s.created_at,
        step: typeof metadata.step === 'number' ? metadata.step : -1,
        ...(nodes.length === 1 ? { node_name: nodes[0] } : {}),
        metadata,
      };
    }),
  };
}

async function runStart(
  deps: CommandDeps,
  threadId: string,
  p: z.infer<typeof RunStart>,
  caller: RunAuth,
): Promise<Record<string, unknown>> {
  const configurable = (p.config?.configurable ?? {}) as Record<string, unknown>;
  const checkpointId = typeof configurable.checkpoint_id === 'string' ? configurable.checkpoint_id : undefined;
  // Input for a thread that waits on an interrupt resumes it, as on the reference server.
  const resume = p.input != null && !checkpointId && (await pendingInterrupts(deps, threadId)).size > 0;
  const body: RunCreateBody = {
    assistant_id: p.assistant_id,
    ...(resume ? { command: { resume: p.input } } : { input: p.input ?? null }),
    ...(p.config ? { config: p.config as RunCreateBody['config'] } : {}),
    ...(p.metadata ? { metadata: p.metadata } : {}),
    ...(checkpointId ? { checkpoint_id: checkpointId } : {}),
    multitask_strategy: p.multitask_strategy ?? p.multitaskStrategy ?? 'enqueue',
    if_not_exists: 'create',
  };
  const run = await deps.service.runs.create(threadId, body, caller, { protocol: true }).catch(asCommandError);
  return { run_id: run.run_id };
}

/**
 * A run from an earlier checkpoint of the thread (time travel): the graph goes on from there with `input` (none: it
 * runs what was next at that checkpoint), on the same thread, whose history then branches. The assistant is the one
 * that ran last on the thread, as for input.respond. The checkpoint must be one of this thread's root checkpoints.
 */
async function stateFork(
  deps: CommandDeps,
  threadId: string,
  p: z.infer<typeof StateFork>,
  caller: RunAuth,
): Promise<Record<string, unknown>> {
  const [last] = await deps.service.runs.list(threadId, { limit: 1, offset: 0 });
  if (!last) throw new CommandError('no_such_run', 'state.fork: the thread has no run to fork from', 404);
  // A checkpoint the thread does not have reads as an empty state (no creation time), not as an error.
  const found = await deps.service.state.get(threadId, p.checkpoint_id).then(
    (s) => s.created_at !== null,
    (err: unknown) => {
      if (err instanceof NotFoundError) return false;
      throw err;
    },
  );
  if (!found)
    throw new CommandError('no_such_checkpoint', `state.fork: no checkpoint ${p.checkpoint_id} on this thread`, 404);
  const body: RunCreateBody = {
    assistant_id: last.assistant_id,
    input: p.input ?? null,
    ...(p.config ? { config: p.config as RunCreateBody['config'] } : {}),
    ...(p.metadata ? { metadata: p.metadata } : {}),
    checkpoint_id: p.checkpoint_id,
    multitask_strategy: 'enqueue',
    if_not_exists: 'reject',
  };
  const run = await deps.service.runs.create(threadId, body, caller, { protocol: true }).catch(asCommandError);
  return { run_id: run.run_id, thread_id: threadId };
}

async function inputRespond(
  deps: CommandDeps,
  threadId: string,
  p: z.infer<typeof InputRespond>,
  caller: RunAuth,
): Promise<Record<string, unknown>> {
  const answers = p.responses ?? (p.interrupt_id ? [{ interrupt_id: p.interrupt_id, response: p.response }] : []);
  if (!answers.length)
    throw new CommandError(
      'invalid_argument',
      'input.respond: params.interrupt_id or params.responses is required',
      422,
    );
  const pending = await pendingInterrupts(deps, threadId);
  for (const a of answers) {
    if (!pending.has(a.interrupt_id))
      throw new CommandError(
        'no_such_interrupt',
        `input.respond: the thread does not wait on interrupt ${a.interrupt_id}`,
        404,
      );
  }
  // The run resumes with the assistant that ran last on the thread.
  const [last] = await deps.service.runs.list(threadId, { limit: 1, offset: 0 });
  if (!last) throw new CommandError('no_such_run', 'input.respond: the thread has no run to resume', 404);
  const resume = Object.fromEntries(answers.map((a) => [a.interrupt_id, a.response]));
  const body: RunCreateBody = {
    assistant_id: last.assistant_id,
    command: {
      resume,
      ...(p.update !== undefined ? { update: p.update as never } : {}),
      ...(p.goto !== undefined ? { goto: p.goto as never } : {}),
    },
    ...(p.config ? { config: p.config as RunCreateBody['config'] } : {}),
    ...(p.metadata ? { metadata: p.metadata } : {}),
    multitask_strategy: 'enqueue',
    if_not_exists: 'reject',
    // Checked again when the run starts: an answer queued behind another that takes the same interrupt fails.
    ...(p.strict_resume ? { strict_resume: true } : {}),
  };
  await deps.service.runs.create(threadId, body, caller, { protocol: true }).catch(asCommandError);
  return {};
}

/**
 * A message a user sends while the agent works (or after): LangGraph cannot add input to a step that is running, so
 * the message becomes the input of a run queued behind the thread's active one (started at once when none is), on
 * the graph's `messages` channel, with the assistant that ran last. Only the root graph takes input: a subgraph's
 * namespace is refused.
 */
async function inputInject(
  deps: CommandDeps,
  threadId: string,
  p: z.infer<typeof InputInject>,
  caller: RunAuth,
): Promise<Record<string, unknown>> {
  if (p.namespace.length)
    throw new CommandError(
      'not_supported',
      `input.inject: params.namespace: only the root graph ([]) takes injected messages, not [${p.namespace.join(', ')}]`,
      400,
    );
  const [last] = await deps.service.runs.list(threadId, { limit: 1, offset: 0 });
  if (!last) throw new CommandError('no_such_run', 'input.inject: the thread has no run to send the message to', 404);
  const body: RunCreateBody = {
    assistant_id: last.assistant_id,
    input: { messages: [p.message] },
    multitask_strategy: 'enqueue',
    if_not_exists: 'reject',
  };
  const run = await deps.service.runs.create(threadId, body, caller, { protocol: true }).catch(asCommandError);
  return { run_id: run.run_id };
}

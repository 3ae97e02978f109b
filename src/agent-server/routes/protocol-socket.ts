// The WebSocket of the thread-centric streaming protocol (GET /threads/{id}/stream/events upgraded; the routes are in
// protocol.ts): commands in, their answers and the subscriptions' events out, one pump per connection over the
// durable event log. Each command is authorized as the POST /commands request it stands for, frames pass the input
// guard, subscriptions are bounded, and subscription.reconnect restores a lost socket's subscriptions by their ids.
import { matchesSubscription, SUPPORTED_CHANNELS } from '@langchain/langgraph/stream';
import type { FastifyRequest } from 'fastify';
import type { WebSocket } from 'ws';
import { z } from 'zod';
import { AppError, NotFoundError } from '../../lib/errors.ts';
import { AuthHttpError, matchesFilters } from '../auth/custom.ts';
import { CommandEnvelope, CommandError, runCommand } from '../protocol/commands.ts';
import { followSession, runStart, type EventFilter } from '../protocol/session.ts';
import { filterOfSubscriptionId, subscriptionIdOf } from '../protocol/subscription-ids.ts';
import { runTree } from '../protocol/tree.ts';
import { forgetCredentials } from '../protocol/ws-credentials.ts';
import { SubscriptionFilter } from '../schemas/streams.ts';
import type { RunAuth } from '../services/context.ts';
import type { RouteDeps } from './deps.ts';
import { findInputProblem } from './input-guard.ts';
import { runCaller } from './runs.ts';

const PING_MS = 20_000;
/** Subscriptions one socket may hold at once: each is matched against every event of the session. */
export const MAX_SUBSCRIPTIONS = 32;
const EVERYTHING: EventFilter = { channels: [...SUPPORTED_CHANNELS] };
/** The route a WebSocket command stands for: it is authorized as this request would be. */
export const COMMANDS_ROUTE = '/threads/:thread_id/commands';

const Reconnect = z.object({
  run_id: z.string().min(1).max(100),
  last_event_id: z
    .string()
    .regex(/^\d{1,15}$/, 'an event id this server sent (a number)')
    .optional(),
  subscriptions: z.array(z.string().min(1).max(200_000)).max(MAX_SUBSCRIPTIONS).optional(),
});

function parseReconnect(params: unknown): z.infer<typeof Reconnect> {
  const r = Reconnect.safeParse(params ?? {});
  if (r.success) return r.data;
  const issue = r.error.issues[0]!;
  const message = `subscription.reconnect: params.${issue.path.join('.') || '(params)'}: ${issue.message}`;
  throw new CommandError('invalid_argument', message, 422);
}

export const errorBody = (id: number | null, err: CommandError) => ({
  type: 'error' as const,
  id,
  error: err.code,
  message: err.message,
});

/** Under custom auth: whether the thread (once it exists) is one the caller's threads:read filter lets them see. */
export function threadVisibility(deps: RouteDeps, req: FastifyRequest, threadId: string) {
  const filters = req.authz?.filters;
  if (!filters) return undefined;
  return async () => {
    const thread = await deps.service.threads.get(threadId);
    return !!thread && matchesFilters(thread.metadata, filters);
  };
}

/** One WebSocket: commands in, their answers and the subscriptions' events out. */
export function serveProtocolSocket(
  deps: RouteDeps,
  stallMs: number,
  socket: WebSocket,
  req: FastifyRequest<{ Params: { thread_id: string } }>,
): void {
  const { service, engine } = deps;
  const threadId = req.params.thread_id;
  // Authorized: the credential is no longer needed, and the runs this socket starts copy the request's headers.
  forgetCredentials(req);
  // The upgrade checked the thread as it was then; it may be created later, by someone else.
  const visible = threadVisibility(deps, req, threadId);
  const closed = new AbortController();
  // A ping every 20 s: proxies that close idle connections (ingress-nginx: 60 s) keep an idle socket.
  const ping = setInterval(() => socket.ping(), PING_MS);
  ping.unref();
  socket.on('close', () => {
    clearInterval(ping);
    closed.abort();
  });

  /** Sends messages; resolves once the socket took them (false: gone, or dropped for not reading). */
  const send = (messages: unknown[]): Promise<boolean> =>
    new Promise((resolve) => {
      if (closed.signal.aborted || socket.readyState !== socket.OPEN || !messages.length)
        return resolve(!closed.signal.aborted);
      const timer = setTimeout(() => {
        req.log.warn({ stall_ms: stallMs }, 'protocol WebSocket client stopped reading; closing it');
        socket.terminate();
        resolve(false);
      }, stallMs);
      messages.forEach((m, i) =>
        socket.send(JSON.stringify(m), (err) => {
          if (i < messages.length - 1) return;
          clearTimeout(timer);
          resolve(!err);
        }),
      );
    });

  // One pump per connection, so every subscription sees its events in the session's order (the client fans
  // events out to its subscriptions by their filters). A new or restored subscription restarts it from the
  // session's start (from `origin` once a reconnect named an earlier run): each subscription has had every event
  // it matches up to its `served` seq, and an event goes out only to catch up one that has not had it.
  const filters = new Map<string, EventFilter>();
  const served = new Map<string, number>();
  let origin: number | undefined;
  let pump: AbortController | null = null;

  function restartPump(): void {
    pump?.abort();
    const ac = new AbortController();
    pump = ac;
    closed.signal.addEventListener('abort', () => ac.abort(), { once: true });
    void (async () => {
      try {
        for await (const page of followSession(service, engine, threadId, EVERYTHING, ac.signal, visible, origin)) {
          const subs = [...filters];
          const out = page.filter((e) =>
            subs.some(([id, f]) => e.seq > (served.get(id) ?? -1) && matchesSubscription(e as never, f as never)),
          );
          if (ac.signal.aborted || !(await send(out))) break;
          const last = page[page.length - 1]?.seq;
          if (last === undefined) continue;
          for (const [id] of subs) if (filters.has(id)) served.set(id, Math.max(served.get(id) ?? -1, last));
        }
      } catch (err) {
        if (ac.signal.aborted) return;
        // 4000 + the HTTP status, as the SDK reads close codes: 4404 ends its stream without retrying.
        if (err instanceof NotFoundError) return socket.close(4404, 'Thread not found');
        req.log.error({ err }, 'protocol WebSocket stream failed');
        socket.close(1011, 'stream failed');
      }
    })();
  }

  async function subscribe(id: number, params: unknown): Promise<void> {
    const parsed = SubscriptionFilter.omit({ since: true }).safeParse(params ?? {});
    if (!parsed.success) {
      const issue = parsed.error.issues[0]!;
      const message = `subscription.subscribe: params.${issue.path.join('.')}: ${issue.message}`;
      await send([errorBody(id, new CommandError('invalid_argument', message, 422))]);
      return;
    }
    if (filters.size >= MAX_SUBSCRIPTIONS) {
      const message = `subscription.subscribe: this connection holds ${MAX_SUBSCRIPTIONS} subscriptions, the most it may; unsubscribe one first`;
      await send([errorBody(id, new CommandError('invalid_argument', message, 429))]);
      return;
    }
    const subscriptionId = subscriptionIdOf(parsed.data);
    filters.set(subscriptionId, parsed.data);
    // The answer goes first: the client files the subscription before its (replayed) events arrive.
    await send([{ type: 'success', id, result: { subscription_id: subscriptionId } }]);
    restartPump();
  }

  /**
   * subscription.reconnect: a client back on a new socket (this replica or another) names the run it followed,
   * the last event it processed and its subscriptions; they are restored under the same ids and get what they
   * miss after that event, from the start of that run on (the thread's later runs follow).
   */
  async function reconnect(cmd: CommandEnvelope): Promise<Record<string, unknown>> {
    const p = parseReconnect(cmd.params);
    const run = await service.runs.get(threadId, p.run_id);
    if (!run) throw new CommandError('no_such_run', `subscription.reconnect: no run ${p.run_id} on this thread`, 404);
    const restored = new Map<string, EventFilter>();
    for (const id of p.subscriptions ?? []) {
      const filter = filterOfSubscriptionId(id);
      if (!filter)
        throw new CommandError(
          'no_such_subscription',
          `subscription.reconnect: ${id.slice(0, 80)} is no subscription id this server gave out`,
          404,
        );
      restored.set(id, filter);
    }
    const total = new Set([...filters.keys(), ...restored.keys()]).size;
    if (total > MAX_SUBSCRIPTIONS)
      throw new CommandError(
        'invalid_argument',
        `subscription.reconnect: this connection would hold ${total} subscriptions; it may hold ${MAX_SUBSCRIPTIONS}`,
        429,
      );
    const start = await runStart(service, run.run_id);
    if (start !== null) origin = Math.min(origin ?? Infinity, start);
    const after = p.last_event_id === undefined ? -1 : Number(p.last_event_id);
    for (const [id, filter] of restored) {
      filters.set(id, filter);
      served.set(id, after);
    }
    const tree = await runTree({ service }, threadId, run);
    const current: Array<{ namespace: string[]; status: string }> = [];
    for (const queue = [tree]; queue.length;) {
      const node = queue.shift()!;
      current.push({ namespace: node.namespace, status: node.status });
      queue.push(...(node.children ?? []));
    }
    // The answer goes out before the pump restarts: the client has its subscriptions back before their events.
    setImmediate(() => {
      if (restored.size && !closed.signal.aborted) restartPump();
    });
    return { restored: restored.size > 0, current_namespaces: current };
  }

  /**
   * The caller of a command, authorized exactly as `POST /threads/{id}/commands` with the command as its body
   * (the same route event, handler filters, thread check and assistants:read filter of the assistant it runs).
   */
  async function callerOf(cmd: CommandEnvelope): Promise<RunAuth> {
    const base = runCaller(req);
    if (!deps.authorize) return base;
    try {
      const parts = { params: { thread_id: threadId }, body: cmd, query: {} };
      const authz = await deps.authorize(req.auth, 'POST', COMMANDS_ROUTE, parts);
      return { ...base, filters: authz?.filters, runId: authz?.runId, assistantFilter: authz?.assistantFilter };
    } catch (err) {
      // A thread the caller may not see: the command's own not-found, as a missing run's.
      if (err instanceof NotFoundError) throw new CommandError('no_such_run', err.message, 404);
      throw err;
    }
  }

  async function onMessage(raw: Buffer): Promise<void> {
    let json: unknown;
    try {
      json = JSON.parse(raw.toString('utf8'));
    } catch {
      await send([errorBody(null, new CommandError('invalid_argument', 'a command must be JSON', 400))]);
      return;
    }
    // The guard every HTTP body passes (routes/input-guard.ts): no NUL or lone surrogate, bounded nesting.
    const problem = findInputProblem(json, 'command');
    if (problem) {
      const id = (json as { id?: unknown } | null)?.id;
      const err = new CommandError('invalid_argument', `invalid command: ${problem}`, 422);
      await send([errorBody(typeof id === 'number' ? id : null, err)]);
      return;
    }
    const env = CommandEnvelope.safeParse(json);
    if (!env.success) {
      const issue = env.error.issues[0]!;
      const message = `invalid command: ${issue.path.join('.') || '(command)'}: ${issue.message}`;
      const id = (json as { id?: unknown } | null)?.id;
      await send([errorBody(typeof id === 'number' ? id : null, new CommandError('invalid_argument', message, 422))]);
      return;
    }
    const cmd = env.data;
    if (cmd.method === 'subscription.subscribe') return subscribe(cmd.id, cmd.params);
    if (cmd.method === 'subscription.unsubscribe') {
      const sid = (cmd.params as { subscription_id?: unknown } | null | undefined)?.subscription_id;
      if (typeof sid !== 'string' || !filters.delete(sid)) {
        const message = `subscription.unsubscribe: no subscription ${String(sid)} on this connection`;
        await send([errorBody(cmd.id, new CommandError('invalid_argument', message, 404))]);
        return;
      }
      served.delete(sid);
      if (!filters.size) pump?.abort();
      await send([{ type: 'success', id: cmd.id, result: {} }]);
      return;
    }
    try {
      const caller = await callerOf(cmd);
      const result =
        cmd.method === 'subscription.reconnect'
          ? await reconnect(cmd)
          : await runCommand({ service }, threadId, cmd, caller);
      await send([{ type: 'success', id: cmd.id, result, meta: { thread_id: threadId } }]);
    } catch (err) {
      if (err instanceof CommandError) await send([errorBody(cmd.id, err)]);
      else if (err instanceof AuthHttpError)
        await send([errorBody(cmd.id, new CommandError('permission_denied', err.message, err.status))]);
      else if (err instanceof AppError)
        await send([errorBody(cmd.id, new CommandError('invalid_argument', err.message, err.status))]);
      else {
        req.log.error({ err }, `protocol command ${cmd.method} failed`);
        await send([errorBody(cmd.id, new CommandError('unknown_error', 'the command failed', 500))]);
      }
    }
  }

  socket.on('message', (data: Buffer) => {
    void onMessage(data).catch((err: unknown) => req.log.error({ err }, 'protocol WebSocket message failed'));
  });
}

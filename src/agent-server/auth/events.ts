// Which auth event each built-in route raises, and the value its handler sees (the platform's event names and
// value shapes, see AuthEventValueMap in @langchain/langgraph-sdk/auth). One table, so a new route is authorized
// by adding a row; a route without a row is only authenticated.
import { randomUUID } from 'node:crypto';
import type { Json } from '../storage/types.ts';

export interface RouteEvent {
  event: string;
  /** "thread" / "assistant": the record named in the path must match the handler's filter (else 404). */
  scope?: 'thread' | 'assistant' | 'cron';
  /** The body is an array (POST /runs/batch): the event is raised once per item, `value` sees one item as body. */
  perItem?: boolean;
  value(req: { params: unknown; body: unknown; query: unknown }): Json;
}

type Req = Parameters<RouteEvent['value']>[0];

const params = (req: Req) => (req.params ?? {}) as Record<string, string>;
/** The request body as an object whose `metadata` is an object too, so a handler's edits land in what is written. */
function bodyWithMetadata(req: Req): Json {
  if (typeof req.body !== 'object' || req.body === null) req.body = {};
  const body = req.body as Json;
  if (typeof body.metadata !== 'object' || body.metadata === null) body.metadata = {};
  return body;
}

/**
 * Store events: the handler sees `namespace` (and the other fields) and may rewrite the namespace, e.g. to put
 * every item of a user under the user's id, as the platform lets it; the rewrite lands in what the route uses.
 */
function storeEvent(event: string, where: 'body' | 'query', namespaceField: string, fields: string[]): RouteEvent {
  return {
    event,
    value: (r) => {
      if (where === 'body' && (typeof r.body !== 'object' || r.body === null)) r.body = {};
      const source = ((where === 'body' ? r.body : r.query) ?? {}) as Json;
      const value: Json = Object.fromEntries(fields.map((f) => [f, source[f] ?? null]));
      Object.defineProperty(value, 'namespace', {
        enumerable: true,
        get: () => source[namespaceField] ?? [],
        set: (ns: unknown) => {
          source[namespaceField] = ns;
        },
      });
      return value;
    },
  };
}

const threadRead: RouteEvent = {
  event: 'threads:read',
  scope: 'thread',
  value: (r) => ({ thread_id: params(r).thread_id }),
};

const threadSearch: RouteEvent = {
  event: 'threads:search',
  value: (r) => {
    const b = (r.body ?? {}) as Json;
    return { ids: b.ids, status: b.status, metadata: b.metadata, values: b.values, limit: b.limit, offset: b.offset };
  },
};

const createRun: RouteEvent = {
  event: 'threads:create_run',
  scope: 'thread',
  value: (r) => {
    const b = bodyWithMetadata(r);
    return {
      thread_id: params(r).thread_id ?? null,
      assistant_id: b.assistant_id,
      // The run's id is chosen here so the handler sees the id the run will have (passed on to createRun).
      run_id: randomUUID(),
      status: 'pending',
      metadata: b.metadata,
      multitask_strategy: b.multitask_strategy ?? 'reject',
      if_not_exists: b.if_not_exists ?? 'reject',
      after_seconds: b.after_seconds ?? null,
      prevent_insert_if_inflight: true,
      kwargs: {
        input: b.input ?? null,
        command: b.command ?? null,
        config: b.config ?? null,
        context: b.context ?? null,
        stream_mode: b.stream_mode ?? null,
        webhook: b.webhook ?? null,
      },
    };
  },
};

/**
 * A thread-protocol command that starts a run (run.start, input.respond, state.fork, input.inject; over HTTP or a
 * WebSocket): the create_run event, its value read from the command's params.
 */
const protocolRunEvent: RouteEvent = {
  event: 'threads:create_run',
  scope: 'thread',
  value: (r) => {
    const b = (r.body ?? {}) as Json;
    if (typeof b.params !== 'object' || b.params === null) b.params = {};
    const p = b.params as Json;
    if (typeof p.metadata !== 'object' || p.metadata === null) p.metadata = {};
    return {
      thread_id: params(r).thread_id ?? null,
      assistant_id: p.assistant_id ?? null,
      run_id: randomUUID(),
      status: 'pending',
      metadata: p.metadata,
      multitask_strategy: p.multitask_strategy ?? p.multitaskStrategy ?? 'enqueue',
      if_not_exists: 'create',
      after_seconds: null,
      prevent_insert_if_inflight: true,
      kwargs: {
        input:
          b.method === 'input.respond'
            ? null
            : b.method === 'input.inject'
              ? { messages: [p.message ?? null] }
              : (p.input ?? null),
        command: b.method === 'input.respond' ? { resume: p.responses ?? p.response ?? null } : null,
        config: p.config ?? null,
        context: null,
        stream_mode: null,
        webhook: null,
      },
    };
  },
};

const RUN_COMMANDS = new Set(['run.start', 'input.respond', 'state.fork', 'input.inject']);

const assistantRead: RouteEvent = {
  event: 'assistants:read',
  scope: 'assistant',
  value: (r) => ({ assistant_id: params(r).assistant_id }),
};

const assistantSearch: RouteEvent = {
  event: 'assistants:search',
  value: (r) => {
    const b = (r.body ?? {}) as Json;
    return { graph_id: b.graph_id, name: b.name, metadata: b.metadata, limit: b.limit, offset: b.offset };
  },
};

function cronCreate(threadScoped: boolean): RouteEvent {
  return {
    event: 'crons:create',
    // A thread cron runs on the thread: the thread must be one the handler's filter lets the caller see.
    ...(threadScoped ? { scope: 'thread' as const } : {}),
    value: (r) => {
      const b = bodyWithMetadata(r);
      const { schedule, end_time, ...payload } = b;
      return {
        payload,
        schedule,
        cron_id: null,
        thread_id: params(r).thread_id ?? null,
        user_id: null,
        end_time: end_time ?? null,
      };
    },
  };
}

const cronSearch: RouteEvent = {
  event: 'crons:search',
  value: (r) => {
    const b = (r.body ?? {}) as Json;
    return {
      assistant_id: b.assistant_id ?? null,
      thread_id: b.thread_id ?? null,
      limit: b.limit ?? null,
      offset: b.offset ?? null,
    };
  },
};

const TABLE: Record<string, RouteEvent | ((req: Req) => RouteEvent)> = {
  'POST /threads': {
    event: 'threads:create',
    value: (r) => {
      const b = bodyWithMetadata(r);
      return { thread_id: b.thread_id, metadata: b.metadata, if_exists: b.if_exists ?? 'raise' };
    },
  },
  'POST /threads/search': threadSearch,
  'POST /threads/count': threadSearch,
  'GET /threads/:thread_id': threadRead,
  'PATCH /threads/:thread_id': {
    event: 'threads:update',
    scope: 'thread',
    value: (r) => {
      const b = bodyWithMetadata(r);
      return { thread_id: params(r).thread_id, metadata: b.metadata };
    },
  },
  'DELETE /threads/:thread_id': {
    event: 'threads:delete',
    scope: 'thread',
    value: (r) => ({ thread_id: params(r).thread_id }),
  },
  'POST /threads/:thread_id/copy': threadRead,
  'GET /threads/:thread_id/state': threadRead,
  'GET /threads/:thread_id/state/:checkpoint_id': threadRead,
  'POST /threads/:thread_id/state/checkpoint': threadRead,
  'POST /threads/:thread_id/state': {
    event: 'threads:update',
    scope: 'thread',
    value: (r) => ({ thread_id: params(r).thread_id }),
  },
  // Same event as POST: a write to the thread's state (here its checkpoint metadata).
  'PATCH /threads/:thread_id/state': {
    event: 'threads:update',
    scope: 'thread',
    value: (r) => ({ thread_id: params(r).thread_id, metadata: ((r.body ?? {}) as Json).metadata }),
  },
  'GET /threads/:thread_id/history': threadRead,
  'POST /threads/:thread_id/history': threadRead,
  'POST /threads/:thread_id/runs': createRun,
  'POST /threads/:thread_id/runs/wait': createRun,
  'POST /threads/:thread_id/runs/stream': createRun,
  'POST /runs': createRun,
  'POST /runs/wait': createRun,
  'POST /runs/stream': createRun,
  'POST /runs/batch': { ...createRun, perItem: true },
  // No thread in the path: the route checks the run's thread against the handler's filter itself.
  'GET /runs/:run_id/stream': { event: 'threads:read', value: (r) => ({ run_id: params(r).run_id }) },
  'GET /threads/:thread_id/runs': threadRead,
  'GET /threads/:thread_id/runs/:run_id': threadRead,
  'GET /threads/:thread_id/runs/:run_id/join': threadRead,
  'GET /threads/:thread_id/runs/:run_id/stream': threadRead,
  'GET /threads/:thread_id/stream': threadRead,
  // The thread protocol: its event streams read the thread; its commands read it or start runs.
  'GET /threads/:thread_id/stream/events': threadRead,
  'POST /threads/:thread_id/stream/events': threadRead,
  'POST /threads/:thread_id/commands': (r) =>
    RUN_COMMANDS.has(String(((r.body ?? {}) as Json).method)) ? protocolRunEvent : threadRead,
  'POST /threads/:thread_id/runs/:run_id/cancel': {
    event: 'threads:update',
    scope: 'thread',
    value: (r) => {
      const q = (r.query ?? {}) as Json;
      return { thread_id: params(r).thread_id, run_id: params(r).run_id, action: q.action ?? 'interrupt' };
    },
  },
  // Bulk cancel: the single cancel's event. No thread in the path: the route keeps to runs on threads the
  // handler's filter lets the caller see (another user's thread answers 404, their runs are never touched).
  'POST /runs/cancel': {
    event: 'threads:update',
    value: (r) => {
      const b = (r.body ?? {}) as Json;
      const q = (r.query ?? {}) as Json;
      return {
        thread_id: b.thread_id ?? null,
        run_ids: b.run_ids ?? null,
        status: b.status ?? null,
        action: q.action ?? 'interrupt',
      };
    },
  },
  // Prune is a delete of the threads (of their history with keep_latest): threads:delete, raised once for the
  // request; the route prunes only threads its filter lets the caller see.
  'POST /threads/prune': {
    event: 'threads:delete',
    value: (r) => {
      const b = (r.body ?? {}) as Json;
      return { thread_ids: b.thread_ids ?? [], strategy: b.strategy ?? 'delete' };
    },
  },
  'DELETE /threads/:thread_id/runs/:run_id': {
    event: 'threads:delete',
    scope: 'thread',
    value: (r) => ({
      thread_id: params(r).thread_id,
      run_id: params(r).run_id,
    }),
  },
  'POST /assistants': { event: 'assistants:create', value: (r) => bodyWithMetadata(r) },
  'POST /assistants/search': assistantSearch,
  'POST /assistants/count': assistantSearch,
  'GET /assistants/:assistant_id': assistantRead,
  'GET /assistants/:assistant_id/schemas': assistantRead,
  'GET /assistants/:assistant_id/graph': assistantRead,
  'GET /assistants/:assistant_id/subgraphs': assistantRead,
  'GET /assistants/:assistant_id/subgraphs/:namespace': assistantRead,
  'POST /assistants/:assistant_id/versions': assistantRead,
  // The generative UI of an assistant's graph: rendering it reads the assistant (which graph it runs).
  'POST /ui/:assistant_id': assistantRead,
  'POST /assistants/:assistant_id/latest': {
    event: 'assistants:update',
    scope: 'assistant',
    value: (r) => ({
      assistant_id: params(r).assistant_id,
      version: ((r.body ?? {}) as Json).version,
    }),
  },
  'PATCH /assistants/:assistant_id': {
    event: 'assistants:update',
    scope: 'assistant',
    value: (r) => {
      const b = bodyWithMetadata(r);
      return { ...b, assistant_id: params(r).assistant_id };
    },
  },
  'DELETE /assistants/:assistant_id': {
    event: 'assistants:delete',
    scope: 'assistant',
    value: (r) => ({
      assistant_id: params(r).assistant_id,
    }),
  },
  'POST /runs/crons': cronCreate(false),
  'POST /threads/:thread_id/runs/crons': cronCreate(true),
  'POST /runs/crons/search': cronSearch,
  'POST /runs/crons/count': cronSearch,
  'PATCH /runs/crons/:cron_id': {
    event: 'crons:update',
    scope: 'cron',
    value: (r) => {
      const b = (r.body ?? {}) as Json;
      return { cron_id: params(r).cron_id, payload: b, schedule: b.schedule ?? null };
    },
  },
  'DELETE /runs/crons/:cron_id': {
    event: 'crons:delete',
    scope: 'cron',
    value: (r) => ({ cron_id: params(r).cron_id }),
  },
  'PUT /store/items': storeEvent('store:put', 'body', 'namespace', ['key', 'value', 'index']),
  'GET /store/items': storeEvent('store:get', 'query', 'namespace', ['key']),
  'DELETE /store/items': storeEvent('store:delete', 'body', 'namespace', ['key']),
  'POST /store/items/search': storeEvent('store:search', 'body', 'namespace_prefix', [
    'filter',
    'limit',
    'offset',
    'query',
  ]),
  'POST /store/namespaces': storeEvent('store:list_namespaces', 'body', 'prefix', [
    'suffix',
    'max_depth',
    'limit',
    'offset',
  ]),
};

/** The route's event; `req` picks it for routes whose event depends on the request (protocol commands). */
export function routeEvent(method: string, routeUrl: string | undefined, req?: Req): RouteEvent | undefined {
  const row = routeUrl === undefined ? undefined : TABLE[`${method} ${routeUrl}`];
  return typeof row === 'function' ? row(req ?? { params: {}, body: {}, query: {} }) : row;
}

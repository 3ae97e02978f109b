// The REST API called from inside the server on behalf of the request's caller: MCP and A2A translate their
// messages into the API's own requests and send them through app.inject with the caller's headers. Every such call
// passes the same hooks as a request from outside (API key, foreign-key refusal, custom auth's authenticate and its
// per-event handlers and filters, disabled groups), so these protocols can reach no more than the caller could
// through the API itself, and there is one authorisation path to keep right, not three.
// The calls made on every tool call and message (runs/wait, the assistants search, an assistant's schemas) skip the
// HTTP round trip when the app's own route would answer them: the same disabled groups, input guard, schemas and
// custom auth authorizer (as a WebSocket command is authorized, routes/protocol.ts) run in front of the same handler
// code, and runs/wait hands back the run's final record, which saves the reads that would otherwise follow.
import { createHash } from 'node:crypto';
import type { IncomingHttpHeaders } from 'node:http';
import type { Readable } from 'node:stream';
import type { FastifyInstance, FastifyRequest } from 'fastify';
import { z } from 'zod';
import { isAppError } from '../../lib/errors.ts';
import type { RouteAuthz } from './authorizer.ts';
import { assistantSchemas, searchAssistants } from '../routes/assistants.ts';
import type { RouteDeps } from '../routes/deps.ts';
import { findInputProblem } from '../routes/input-guard.ts';
import { publicRun, runCaller } from '../routes/runs.ts';
import { AssistantSearch } from '../schemas/assistants.ts';
import { AssistantParams, ThreadParams } from '../schemas/common.ts';
import { RunCreate } from '../schemas/runs.ts';

/** Headers that describe the outer request's own body or connection, not the caller: never passed on. */
const NOT_PASSED = new Set([
  'content-length',
  'content-type',
  'transfer-encoding',
  'content-encoding',
  'accept',
  'accept-encoding',
  'connection',
  'keep-alive',
  'upgrade',
  'expect',
  'last-event-id',
]);

export interface ApiAnswer {
  status: number;
  headers: Record<string, string | string[] | number | undefined>;
  /** The body parsed as JSON; undefined when empty. */
  body: unknown;
}

/** A run's public record (routes/runs.ts publicRun). */
export type PublicRun = ReturnType<typeof publicRun>;

/**
 * What POST /threads/{id}/runs/wait answered. When the call was made in-process: `run`, the run's final record, and
 * `json`, the body as JSON text when the run's final values came as text (what the API would send), so a protocol
 * that sends them as text need not write them again.
 */
export interface RunWaitAnswer extends ApiAnswer {
  run?: PublicRun;
  json?: string;
}

export interface CallerApi {
  /**
   * A digest of the caller's headers (everything custom auth can read of them): requests with the same key are made
   * as the same caller, so what one of them was shown may stand for the next (mcp/server.ts ToolTables).
   */
  readonly callerKey: string;
  /** One API request as the caller; the answer whatever its status (the protocols word errors their own way). */
  call(method: 'GET' | 'POST' | 'PATCH' | 'DELETE', path: string, body?: unknown): Promise<ApiAnswer>;
  /** A request whose answer is an event stream: resolves with the headers, the body follows as it is written. */
  stream(
    method: 'GET' | 'POST',
    path: string,
    body: unknown,
    signal: AbortSignal,
    headers?: Record<string, string>,
  ): Promise<{ status: number; headers: ApiAnswer['headers']; body: Readable }>;
  /** POST /threads/{threadId}/runs/wait as the caller: the values (or `__error__`) once the run has ended. */
  waitRun(threadId: string, body: unknown): Promise<RunWaitAnswer>;
  /** POST /assistants/search as the caller. */
  searchAssistants(body: unknown): Promise<ApiAnswer>;
  /** GET /assistants/{assistantId}/schemas as the caller. */
  assistantSchemas(assistantId: string): Promise<ApiAnswer>;
}

/** The headers of `req` an inner request carries: credentials and everything custom auth might read. */
function callerHeaders(headers: IncomingHttpHeaders): Record<string, string | string[]> {
  const out: Record<string, string | string[]> = {};
  for (const [name, value] of Object.entries(headers)) {
    if (value === undefined || NOT_PASSED.has(name) || name.startsWith(':')) continue;
    out[name] = value;
  }
  return out;
}

/**
 * `mountPrefix`: langgraph.json http.mount_prefix, which every request (inner ones too) passes through the URL
 * rewriter with.
 */
export function apiAsCaller(app: FastifyInstance, req: FastifyRequest, deps: RouteDeps): CallerApi {
  const headers = callerHeaders(req.headers);
  const mountPrefix = deps.mountPrefix ?? '';
  let key: string | undefined;
  const api: CallerApi = {
    get callerKey() {
      key ??= createHash('sha256')
        .update(JSON.stringify(Object.entries(headers).sort(([a], [b]) => (a < b ? -1 : 1))))
        .digest('base64url');
      return key;
    },
    async call(method, path, body) {
      const res = await app.inject({
        method,
        url: `${mountPrefix}${path}`,
        headers: body === undefined ? headers : { ...headers, 'content-type': 'application/json' },
        ...(body === undefined ? {} : { payload: JSON.stringify(body) }),
      });
      const text = res.body.trim();
      let parsed: unknown;
      try {
        parsed = text ? (JSON.parse(text) as unknown) : undefined;
      } catch {
        parsed = { detail: text };
      }
      return { status: res.statusCode, headers: res.headers, body: parsed };
    },
    async stream(method, path, body, signal, extra) {
      const res = await app.inject({
        method,
        url: `${mountPrefix}${path}`,
        headers: {
          ...headers,
          ...(extra ?? {}),
          ...(body === undefined ? {} : { 'content-type': 'application/json' }),
        },
        ...(body === undefined ? {} : { payload: JSON.stringify(body) }),
        payloadAsStream: true,
        signal,
      });
      return { status: res.statusCode, headers: res.headers, body: res.stream() };
    },
    async waitRun(threadId, body): Promise<RunWaitAnswer> {
      const path = `/threads/${threadId}/runs/wait`;
      if (!deps.innerRoutes) return api.call('POST', path, body);
      return inProcess(
        { method: 'POST', routeUrl: '/threads/:thread_id/runs/wait', url: `${mountPrefix}${path}` },
        { params: { thread_id: threadId }, body },
        { params: ThreadParams, body: RunCreate },
        async ({ params, body: run }, authz) => {
          const caller = {
            ...runCaller(req),
            headers,
            filters: authz?.filters,
            runId: authz?.runId,
            assistantFilter: authz?.assistantFilter,
          };
          const created = await deps.service.runs.create(params.thread_id, run, caller);
          const ended = await deps.engine.waitForRun(created.thread_id, created.run_id, undefined, created);
          const json = deps.engine.finalValues(ended);
          const values = await deps.service.runs.result(created.thread_id, ended, json);
          const location = `/threads/${created.thread_id}/runs/${created.run_id}`;
          // runs.result answers the final values only when the run succeeded (an error is its __error__).
          const sentAsIs = json !== undefined && ended?.status !== 'error' && ended?.status !== 'timeout';
          return {
            status: 200,
            headers: { 'content-location': location, location: `${location}/join` },
            body: values,
            ...(ended ? { run: publicRun(ended) } : {}),
            ...(sentAsIs ? { json } : {}),
          };
        },
      );
    },
    async searchAssistants(body) {
      if (!deps.innerRoutes) return api.call('POST', '/assistants/search', body);
      return inProcess(
        { method: 'POST', routeUrl: '/assistants/search', url: `${mountPrefix}/assistants/search` },
        { params: {}, body },
        { params: NoParams, body: AssistantSearch },
        async ({ body: q }, authz) => {
          const { rows, next } = await searchAssistants(deps, q, authz?.filters);
          return { status: 200, headers: next === undefined ? {} : { 'x-pagination-next': String(next) }, body: rows };
        },
      );
    },
    async assistantSchemas(assistantId) {
      const path = `/assistants/${encodeURIComponent(assistantId)}/schemas`;
      if (!deps.innerRoutes) return api.call('GET', path);
      return inProcess(
        { method: 'GET', routeUrl: '/assistants/:assistant_id/schemas', url: `${mountPrefix}${path}` },
        { params: { assistant_id: assistantId }, body: undefined },
        { params: AssistantParams, body: undefined },
        async ({ params }) => ({ status: 200, headers: {}, body: await assistantSchemas(deps, params.assistant_id) }),
      );
    },
  };

  /**
   * One of the API's routes answered in-process, its checks in the order fastify runs them: the disabled groups
   * (onRequest), the input guard (preValidation), its schemas (validation), custom auth's authorizer for the route
   * (preHandler), then the handler, whose typed errors become the status and detail the error handler would send.
   */
  async function inProcess<P, B>(
    route: { method: string; routeUrl: string; url: string },
    raw: { params: Record<string, string>; body: unknown },
    schemas: { params: z.ZodType<P>; body: z.ZodType<B> | undefined },
    handler: (parsed: { params: P; body: B }, authz: RouteAuthz | null) => Promise<ApiAnswer>,
  ): Promise<ApiAnswer> {
    if (deps.innerRoutes!.disabled(route.routeUrl)) return answer(404, `Not found: ${route.method} ${route.url}`);
    const problem =
      findInputProblem(raw.params, 'params') ?? (raw.body === undefined ? null : findInputProblem(raw.body, 'body'));
    if (problem) return answer(422, problem);
    const params = schemas.params.safeParse(raw.params);
    if (!params.success) return answer(422, invalid('params', params.error));
    const body = schemas.body ? schemas.body.safeParse(raw.body) : { success: true as const, data: undefined as B };
    if (!body.success) return answer(422, invalid('body', body.error));
    try {
      const parts = { params: params.data, body: body.data, query: {} };
      const authz = deps.authorize ? await deps.authorize(req.auth ?? null, route.method, route.routeUrl, parts) : null;
      return await handler(parts, authz);
    } catch (err) {
      if (!isAppError(err)) throw err;
      return answer(err.status, typeof err.detail === 'string' ? err.detail : err.message);
    }
  }
  return api;
}

const NoParams = z.object({});

const answer = (status: number, detail: string): ApiAnswer => ({ status, headers: {}, body: { detail } });

/** The API's wording of a schema failure (lib/http.ts installErrorAnswers): the field, then the problem. */
function invalid(where: string, error: { issues: Array<{ path: PropertyKey[]; message: string }> }): string {
  const issue = error.issues[0]!;
  return `Invalid request: ${[where, ...issue.path.map(String)].join('.')}: ${issue.message}`;
}

/** Server-sent events of a stream body: each event's name and data (data lines joined). */
export async function* sseEvents(
  body: AsyncIterable<Buffer | string>,
): AsyncGenerator<{ event: string; data: string }> {
  let buffer = '';
  for await (const piece of body) {
    buffer += typeof piece === 'string' ? piece : piece.toString('utf8');
    let end: number;
    while ((end = buffer.indexOf('\n\n')) >= 0) {
      const block = buffer.slice(0, end);
      buffer = buffer.slice(end + 2);
      let event = 'message';
      const data: string[] = [];
      for (const line of block.split('\n')) {
        if (line.startsWith('event:')) event = line.slice(6).trim();
        else if (line.startsWith('data:')) data.push(line.slice(line[5] === ' ' ? 6 : 5));
      }
      if (data.length) yield { event, data: data.join('\n') };
    }
  }
}

/**
 * The values a run left, as the caller reads them: those of the last checkpoint the run wrote (its run_id is in
 * the checkpoint's metadata), not the thread's current ones, which a later run on the same thread has replaced.
 * Undefined when none of its checkpoints is left (the thread's history was pruned).
 */
export async function runOwnValues(api: CallerApi, run: { thread_id: string; run_id: string }): Promise<unknown> {
  const res = await api.call('POST', `/threads/${run.thread_id}/history`, {
    limit: 1,
    metadata: { run_id: run.run_id },
    select: ['values'],
  });
  if (res.status !== 200) return undefined;
  const [last] = res.body as Array<{ values?: unknown }>;
  return last?.values;
}

/** The `detail` of an API error answer (every error of the API has one), else a generic text with its status. */
export function detailOf(answer: ApiAnswer): string {
  const d = (answer.body as { detail?: unknown } | undefined)?.detail;
  return typeof d === 'string' ? d : `request failed with status ${answer.status}`;
}

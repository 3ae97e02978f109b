// The REST API called from inside the server on behalf of the request's caller: MCP and A2A translate their
// messages into the API's own requests and send them through app.inject with the caller's headers. Every such call
// passes the same hooks as a request from outside (API key, foreign-key refusal, custom auth's authenticate and its
// per-event handlers and filters, disabled groups), so these protocols can reach no more than the caller could
// through the API itself, and there is one authorisation path to keep right, not three.
// The one call on every tool call and message, POST /threads/{id}/runs/wait, is also made without the HTTP round
// trip (waitRun) when the app's own route would answer it: the same input guard, body schema, disabled groups and
// custom auth's authorizer (as a WebSocket command is authorized, routes/protocol.ts) run in front of the same
// service calls, and the answer carries the run's final record, which saves the reads that would otherwise follow.
import type { IncomingHttpHeaders } from 'node:http';
import type { Readable } from 'node:stream';
import type { FastifyInstance, FastifyRequest } from 'fastify';
import { isAppError } from '../../lib/errors.ts';
import type { RouteDeps } from '../routes/deps.ts';
import { findInputProblem } from '../routes/input-guard.ts';
import { publicRun, runCaller } from '../routes/runs.ts';
import { ThreadParams } from '../schemas/common.ts';
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

/** What POST /threads/{id}/runs/wait answered; `run`: the run's final record, when the call was made in-process. */
export interface RunWaitAnswer extends ApiAnswer {
  run?: PublicRun;
}

export interface CallerApi {
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
  const api: CallerApi = {
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
    async waitRun(threadId, body) {
      const path = `/threads/${threadId}/runs/wait`;
      if (!deps.innerRoutes) {
        const res = await api.call('POST', path, body);
        return res;
      }
      return waitRunInProcess(deps, deps.innerRoutes, req, headers, threadId, body, `${mountPrefix}${path}`);
    },
  };
  return api;
}

const WAIT_ROUTE = '/threads/:thread_id/runs/wait';

const answer = (status: number, detail: string): ApiAnswer => ({ status, headers: {}, body: { detail } });

/** The route's checks in the order fastify runs them (onRequest, preValidation, validation, preHandler), then its handler. */
async function waitRunInProcess(
  deps: RouteDeps,
  inner: NonNullable<RouteDeps['innerRoutes']>,
  req: FastifyRequest,
  headers: Record<string, string | string[]>,
  threadId: string,
  rawBody: unknown,
  url: string,
): Promise<RunWaitAnswer> {
  if (inner.disabled(WAIT_ROUTE)) return answer(404, `Not found: POST ${url}`);
  const problem = findInputProblem({ thread_id: threadId }, 'params') ?? findInputProblem(rawBody, 'body');
  if (problem) return answer(422, problem);
  const params = ThreadParams.safeParse({ thread_id: threadId });
  if (!params.success) return answer(422, invalid('params', params.error));
  const parsed = RunCreate.safeParse(rawBody);
  if (!parsed.success) return answer(422, invalid('body', parsed.error));
  const body = parsed.data;
  try {
    const authz = deps.authorize
      ? await deps.authorize(req.auth ?? null, 'POST', WAIT_ROUTE, { params: params.data, body, query: {} })
      : null;
    const caller = {
      ...runCaller(req),
      headers,
      filters: authz?.filters,
      runId: authz?.runId,
      assistantFilter: authz?.assistantFilter,
    };
    const run = await deps.service.runs.create(threadId, body, caller);
    const ended = await deps.engine.waitForRun(run.thread_id, run.run_id, undefined, run);
    const values = await deps.service.runs.result(run.thread_id, ended, deps.engine.finalValues(ended));
    const location = `/threads/${run.thread_id}/runs/${run.run_id}`;
    return {
      status: 200,
      headers: { 'content-location': location, location: `${location}/join` },
      body: values,
      ...(ended ? { run: publicRun(ended) } : {}),
    };
  } catch (err) {
    if (isAppError(err)) {
      return {
        status: err.status,
        headers: {},
        body: { detail: typeof err.detail === 'string' ? err.detail : err.message },
      };
    }
    throw err;
  }
}

/** The API's wording of a schema failure (lib/http.ts installErrorAnswers): the field, then the problem. */
function invalid(where: string, error: { issues: Array<{ path: PropertyKey[]; message: string }> }): string {
  const issue = error.issues[0]!;
  return `Invalid request: ${[where, ...issue.path.map(String)].join('.')}: ${issue.message}`;
}

/** The `detail` of an API error answer (every error of the API has one), else a generic text with its status. */
export function detailOf(answer: ApiAnswer): string {
  const d = (answer.body as { detail?: unknown } | undefined)?.detail;
  return typeof d === 'string' ? d : `request failed with status ${answer.status}`;
}

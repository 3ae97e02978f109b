// The REST API called from inside the server on behalf of the request's caller: MCP and A2A translate their
// messages into the API's own requests and send them through app.inject with the caller's headers. Every such call
// passes the same hooks as a request from outside (API key, foreign-key refusal, custom auth's authenticate and its
// per-event handlers and filters, disabled groups), so these protocols can reach no more than the caller could
// through the API itself, and there is one authorisation path to keep right, not three.
import type { IncomingHttpHeaders } from 'node:http';
import type { Readable } from 'node:stream';
import type { FastifyInstance, FastifyRequest } from 'fastify';

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
export function apiAsCaller(app: FastifyInstance, req: FastifyRequest, mountPrefix = ''): CallerApi {
  const headers = callerHeaders(req.headers);
  return {
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
  };
}

/** The `detail` of an API error answer (every error of the API has one), else a generic text with its status. */
export function detailOf(answer: ApiAnswer): string {
  const d = (answer.body as { detail?: unknown } | undefined)?.detail;
  return typeof d === 'string' ? d : `request failed with status ${answer.status}`;
}

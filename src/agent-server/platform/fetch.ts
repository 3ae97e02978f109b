// The fetch that `new Client()` (no apiUrl) of @langchain/langgraph-sdk uses inside graph code. Requests for this
// server's own origin carry the internal-call token; on the main thread they are dispatched into the fastify app
// in process (app.inject, streamed), on executor threads (which have no app) they go over loopback to the
// listening URL. Requests for any other origin pass through to the global fetch unchanged.
import { Readable } from 'node:stream';
import type { FastifyInstance } from 'fastify';
import { INTERNAL_CALL_HEADER, internalCallToken } from './internal-call.ts';

const passThrough: typeof fetch = globalThis.fetch.bind(globalThis);

const NO_BODY_STATUS = new Set([101, 204, 205, 304]);

async function injectRequest(app: FastifyInstance, request: Request): Promise<Response> {
  const url = new URL(request.url);
  const headers: Record<string, string> = {};
  request.headers.forEach((value, name) => (headers[name] = value));
  headers[INTERNAL_CALL_HEADER] = internalCallToken();
  const hasBody = request.method !== 'GET' && request.method !== 'HEAD' && request.body !== null;
  const res = await app.inject({
    method: request.method as 'GET',
    url: url.pathname + url.search,
    headers,
    ...(hasBody ? { payload: Buffer.from(await request.arrayBuffer()) } : {}),
    // Resolves at the response head: server-sent events arrive as they are written.
    payloadAsStream: true,
    signal: request.signal,
  });
  const out = new Headers();
  for (const [name, value] of Object.entries(res.headers)) {
    if (value === undefined) continue;
    for (const v of Array.isArray(value) ? value : [value]) out.append(name, String(v));
  }
  const stream = res.stream();
  if (NO_BODY_STATUS.has(res.statusCode) || request.method === 'HEAD') {
    stream.resume();
    return new Response(null, { status: res.statusCode, headers: out });
  }
  return new Response(Readable.toWeb(stream) as unknown as ReadableStream<Uint8Array>, {
    status: res.statusCode,
    statusText: res.statusMessage,
    headers: out,
  });
}

export interface OwnServer {
  /** True when the URL is this server's (any origin it was known by). */
  isOwn(url: URL): boolean;
  /** The app to dispatch into, on the main thread; undefined on executor threads or before the app exists. */
  app(): FastifyInstance | undefined;
}

export function createPlatformFetch(server: OwnServer): typeof fetch {
  return async (input, init) => {
    const request = new Request(input, init);
    const url = new URL(request.url);
    if (!server.isOwn(url)) return passThrough(request);
    const app = server.app();
    if (app) return injectRequest(app, request);
    const headers = new Headers(request.headers);
    headers.set(INTERNAL_CALL_HEADER, internalCallToken());
    return passThrough(new Request(request, { headers }));
  };
}

// Request parsing and error answers shared by the two HTTP apps (agent server, control plane). Both answer every
// error as JSON `{"detail": ...}`; they differ only in how a schema failure and a malformed body are spelled, which
// each app passes in.
import {
  createServer,
  type IncomingHttpHeaders,
  type IncomingMessage,
  type Server,
  type ServerResponse,
} from 'node:http';
import type { AddressInfo } from 'node:net';
import type { FastifyError, FastifyInstance, FastifyReply, FastifyRequest, FastifyServerOptions } from 'fastify';
import { hasZodFastifySchemaValidationErrors, serializerCompiler, validatorCompiler } from 'fastify-type-provider-zod';
import { isConnectionError } from './connection-errors.ts';
import { isAppError, QuotaExceededError } from './errors.ts';

/** Seconds a client is told to wait (Retry-After) when a dependency is unreachable. */
export const RETRY_AFTER_SECS = 5;

/** One failed check of a request schema: where (body, query, path, header) and what. */
export type SchemaIssue = { where: string; path: string[]; message: string; keyword: string };

export interface ErrorAnswers {
  /** The 422 body for a request that failed its route schema. */
  invalid(issues: SchemaIssue[]): unknown;
  /** The 422 body for a body that is not JSON. */
  malformed(message: string): unknown;
  /** Runs first for every error, e.g. to copy headers an error carries onto the reply. */
  decorate?(err: FastifyError, reply: FastifyReply): void;
  /** Logs an unexpected error (the answer is a bare 500). */
  logUnexpected(err: FastifyError, req: FastifyRequest): void;
}

/**
 * fastify's `schemaController` for the two apps (and `agentplane dev`'s proxy, which has no schemas): their routes'
 * schemas are zod, compiled by fastify-type-provider-zod.
 * Named as the compilers' factories, they also spare each process start loading fastify's own (ajv and
 * fast-json-stringify with their ~100 files, ~60 ms of CPU), which it would otherwise load when the app is created
 * only to have them replaced. The apps still call setValidatorCompiler/setSerializerCompiler as before.
 */
export const zodSchemaController = {
  compilersFactory: { buildValidator: () => validatorCompiler, buildSerializer: () => serializerCompiler },
} as unknown as NonNullable<FastifyServerOptions['schemaController']>;

/**
 * A JSON body parser under which an empty body with a JSON content type is "no body" (clients send one on
 * POST .../cancel and DELETE), and a body that does not parse is a 422 the error handler words.
 */
export function installJsonBodyParser(app: FastifyInstance): void {
  app.addContentTypeParser('application/json', { parseAs: 'string' }, (_req, body, done) => {
    const text = (body as string).trim();
    if (!text) return done(null, undefined);
    try {
      done(null, JSON.parse(text));
    } catch (err) {
      done(Object.assign(err as FastifyError, { statusCode: 422, code: 'FST_ERR_CTP_INVALID_JSON_BODY' }), undefined);
    }
  });
}

/**
 * The error handler and the 404 answer: domain errors keep their status, client errors their message, a lost
 * database or Redis connection 503 with Retry-After, the rest 500.
 */
export function installErrorAnswers(app: FastifyInstance, answers: ErrorAnswers): void {
  app.setErrorHandler((err: FastifyError, req, reply) => {
    answers.decorate?.(err, reply);
    if (hasZodFastifySchemaValidationErrors(err)) {
      const where = err.validationContext ?? 'body';
      const issues = err.validation.map((v) => ({
        where,
        path: v.instancePath.split('/').filter(Boolean),
        message: v.message ?? 'invalid',
        keyword: v.keyword,
      }));
      return reply.code(422).send(answers.invalid(issues));
    }
    if (err instanceof QuotaExceededError && err.retryAfterSeconds !== undefined) {
      reply.header('retry-after', String(Math.max(1, Math.ceil(err.retryAfterSeconds))));
    }
    if (isAppError(err)) return reply.code(err.status).send({ detail: err.detail });
    if (err instanceof SyntaxError || err.code === 'FST_ERR_CTP_INVALID_JSON_BODY') {
      return reply.code(422).send(answers.malformed(err.message));
    }
    if (err.statusCode && err.statusCode >= 400 && err.statusCode < 500) {
      return reply.code(err.statusCode).send({ detail: err.message });
    }
    // The database or Redis is restarting, failing over or unreachable: the same request succeeds once it is back.
    if (isConnectionError(err)) {
      req.log.warn({ reason: err.message }, 'request failed while a dependency is unreachable (503)');
      return reply
        .code(503)
        .header('retry-after', String(RETRY_AFTER_SECS))
        .send({ detail: 'The database is unavailable right now (restarting or unreachable); retry shortly.' });
    }
    answers.logUnexpected(err, req);
    return reply.code(500).send({ detail: 'Internal server error' });
  });
  app.setNotFoundHandler((req, reply) =>
    reply.code(404).send({ detail: `Not found: ${req.method} ${req.originalUrl.split('?')[0]}` }),
  );
}

/**
 * Added to every response of tenant code (custom routes, and everything behind the local proxy): a page runs
 * sandboxed in an opaque origin of its own, so it holds no storage, cookies or service worker of any origin.
 */
export const TENANT_CSP = 'sandbox allow-scripts allow-forms allow-popups allow-modals allow-downloads';

/**
 * Values of the headers that carry credentials: every X-Api-Key, Authorization whole and without its scheme, and the
 * WebSocket subprotocols a browser passes credentials in (`x-api-key.<key>`, `bearer.<token>`).
 */
export function credentialValues(headers: IncomingHttpHeaders): string[] {
  // One X-Api-Key line may hold a list ("junk, <key>"), as Node makes of repeated lines: each item is a value.
  const keys = [headers['x-api-key'] ?? []].flat();
  const out = [...keys, ...keys.flatMap((k) => (k.includes(',') ? k.split(',').map((v) => v.trim()) : []))].filter(
    Boolean,
  );
  const auth = headers.authorization;
  if (auth) out.push(auth, auth.replace(/^\S+\s+/, ''));
  for (const protocol of String(headers['sec-websocket-protocol'] ?? '').split(',')) {
    const p = protocol.trim();
    for (const prefix of ['x-api-key.', 'bearer.'])
      if (p.toLowerCase().startsWith(prefix)) out.push(p.slice(prefix.length));
  }
  return out;
}

/**
 * The credential header a request sends more than once (X-Api-Key, Authorization), or undefined. Node joins repeated
 * X-Api-Key lines into one value ("junk, <key>") and keeps only the first Authorization, so a guard reading the
 * parsed headers could pass what the next reader sees differently: such a request is refused (400) whole.
 */
export function repeatedCredentialHeader(rawHeaders: string[]): string | undefined {
  const seen = new Set<string>();
  for (let i = 0; i < rawHeaders.length; i += 2) {
    const name = rawHeaders[i]!.toLowerCase();
    if (name !== 'x-api-key' && name !== 'authorization') continue;
    if (seen.has(name)) return name === 'x-api-key' ? 'X-Api-Key' : 'Authorization';
    seen.add(name);
  }
  return undefined;
}

export const repeatedCredentialDetail = (header: string) =>
  `The ${header} header is sent more than once: send one credential in one ${header} header.`;

/** How long a client may take to send a request's headers, and the whole request (headers and body). */
export type FrontServerTimeouts = { headersTimeoutMs: number; requestTimeoutMs: number };

export const FRONT_SERVER_TIMEOUTS: FrontServerTimeouts = { headersTimeoutMs: 30_000, requestTimeoutMs: 300_000 };

/**
 * A plain HTTP server in front of fastify apps (dev and the listener route each request to one of two apps), with
 * fastify's own socket settings: an idle keep-alive socket is kept 72 s, not Node's 5 s. Clients drop idle sockets
 * after the `Keep-Alive: timeout` the server announces, less a margin; at 5 s a client held up for that margin sent a
 * request on a socket the server was closing ("other side closed").
 * A client that sends its headers (30 s) or its whole request (5 min) too slowly gets a 408 and the socket is closed,
 * so slow senders cannot hold sockets and buffers for ever. Both count only while the request arrives: the answer
 * (a long join, an event stream) may take as long as it takes.
 */
export function createFrontServer(
  handler: (req: IncomingMessage, res: ServerResponse) => void,
  timeouts: FrontServerTimeouts = FRONT_SERVER_TIMEOUTS,
): Server {
  // Node checks the two timeouts on this interval (30 s by default, longer than a short headers timeout).
  const connectionsCheckingInterval = Math.max(100, Math.min(30_000, Math.floor(timeouts.headersTimeoutMs / 4)));
  const server = createServer({ connectionsCheckingInterval }, handler);
  server.headersTimeout = timeouts.headersTimeoutMs;
  server.requestTimeout = timeouts.requestTimeoutMs;
  server.keepAliveTimeout = 72_000;
  return server;
}

/**
 * Listens on host:port (port 0: a free one) and returns the URL this machine reaches the server at: a wildcard
 * address is reached through 127.0.0.1.
 */
export async function listenOn(server: Server, port: number, host: string): Promise<string> {
  await new Promise<void>((resolve, reject) => {
    server.once('error', reject);
    server.listen(port, host, () => resolve());
  });
  const bound = (server.address() as AddressInfo).port;
  const shown = host.includes(':') ? `[${host}]` : host;
  return `http://${shown === '0.0.0.0' || shown === '[::]' ? '127.0.0.1' : shown}:${bound}`;
}

// Forwards a deployment's traffic to whichever revision's agent server currently takes it. Two ways to say which
// deployment a request is for: its own origin (`agentplane dev`: a port per deployment, agent-origins.ts) or the
// path /deployments/<id>/... (a listener, whose origin serves one workspace's agents and never the console).
// Forwarding is @fastify/reply-from over a pooled undici agent.
//
// A request body is read whole (up to bodyLimit) before anything is sent upstream: an oversized body (413), one that
// breaks off or does not match its length (400) is answered here and never leaves a half-sent request on a pooled
// connection to the agent server, where the next caller's request would follow it. Hop-by-hop headers the client
// sent (Expect, Transfer-Encoding, Keep-Alive, Upgrade, TE, Trailer) are this hop's and are not passed on: the body
// goes upstream with its exact Content-Length, and `Expect: 100-continue` was answered by this server already.
//
// What comes back is tenant code's and is treated as hostile (proxy-headers.ts); WebSockets take another path
// (proxy-upgrades.ts). What goes in is checked too: a request carrying a platform key (or another workspace's) is
// refused here, before tenant code, which may read every header under custom auth, could see it.
import replyFrom, { type FastifyReplyFromHooks } from '@fastify/reply-from';
import type { FastifyError, FastifyInstance, FastifyReply, FastifyRequest } from 'fastify';
import { repeatedCredentialDetail, repeatedCredentialHeader } from '../../../lib/http.ts';
import { tenantResponseHeaders } from './proxy-headers.ts';
import { admit, DEPLOYMENTS_PREFIX, type ProxyOptions } from './proxy-target.ts';

/** The agent server's default body limit: a larger body would be refused there anyway. */
export const DEFAULT_PROXY_BODY_LIMIT = 10 * 1024 * 1024;

/**
 * Timeouts towards the agent servers: connecting (10 s), waiting for response headers (5 min: waits and streams
 * send theirs at once, custom routes may think longer) and silence within a response body (5 min: streams send a
 * heartbeat every few seconds). An idle pooled connection is dropped after 4 s, well before the agent server's 72 s.
 */
export const UPSTREAM_TIMEOUTS = { connectMs: 10_000, headersMs: 300_000, bodyIdleMs: 300_000, keepAliveMs: 4_000 };

const HOP_BY_HOP = ['expect', 'transfer-encoding', 'keep-alive', 'upgrade', 'te', 'trailer', 'proxy-connection'];

/** The code of what failed in a forward (reply-from wraps undici's error; its own codes start with FST_). */
const causeCode = (error: unknown): string | undefined => {
  for (let e = error as { code?: unknown; cause?: unknown } | undefined, i = 0; e && i < 4; e = e.cause as never, i++)
    if (typeof e.code === 'string' && !e.code.startsWith('FST_')) return e.code;
  return undefined;
};

const SAFE_METHODS = new Set(['GET', 'HEAD', 'OPTIONS']);

/**
 * A forward that failed because the agent server went away (it just ended and its supervisor has not noticed
 * yet): when nothing listened, or the request is safe to repeat, 503 with Retry-After. A connection cut after a
 * request that changes something went out may or may not have been handled: 502, not an invitation to retry.
 */
function answerBackendError(id: string): NonNullable<FastifyReplyFromHooks['onError']> {
  return (reply, { error }) => {
    const code = causeCode(error);
    if (code === 'ECONNREFUSED' || SAFE_METHODS.has(reply.request.method)) {
      void reply
        .code(503)
        .header('retry-after', '1')
        .send({ detail: `Deployment ${id} is not serving right now: its agent server is not answering (restarting).` });
      return;
    }
    void reply.code(502).send({
      detail: `Deployment ${id}: the agent server closed the connection (${code ?? error.message}); the request may or may not have been handled.`,
    });
  };
}
export async function deploymentProxy(app: FastifyInstance, opts: ProxyOptions): Promise<void> {
  const bodyLimit = opts.bodyLimit ?? DEFAULT_PROXY_BODY_LIMIT;
  await app.register(async (scope) => {
    scope.removeAllContentTypeParsers();
    // An empty body stays undefined: reply-from would JSON-encode an empty Buffer object.
    scope.addContentTypeParser('*', { parseAs: 'buffer', bodyLimit }, (_req, body: Buffer, done) =>
      done(null, body.length ? body : undefined),
    );
    await scope.register(replyFrom, {
      undici: {
        connect: { timeout: UPSTREAM_TIMEOUTS.connectMs },
        headersTimeout: UPSTREAM_TIMEOUTS.headersMs,
        bodyTimeout: UPSTREAM_TIMEOUTS.bodyIdleMs,
        keepAliveTimeout: UPSTREAM_TIMEOUTS.keepAliveMs,
      },
    });
    // What a client sent wrong is a 4xx (fastify's: 400 bad length, 413 too large, 415); the rest of an unread body
    // is not waited for.
    scope.setErrorHandler((err: FastifyError, req, reply) => {
      const status = err.statusCode && err.statusCode >= 400 && err.statusCode < 500 ? err.statusCode : 500;
      if (status === 500) req.log.error({ err }, 'proxy failure');
      if (!req.raw.complete) reply.header('connection', 'close');
      return reply.code(status).send({ detail: status === 500 ? 'Internal proxy error' : err.message });
    });

    const forward = async (req: FastifyRequest, reply: FastifyReply, id: string, rest: string) => {
      const repeated = repeatedCredentialHeader(req.raw.rawHeaders);
      if (repeated) return reply.code(400).send({ detail: repeatedCredentialDetail(repeated) });
      const admitted = await admit(opts, id, req.raw);
      if (admitted.kind === 'none') {
        return reply.code(404).send({ detail: `Deployment ${id} has no live revision at this address.` });
      }
      if (admitted.kind === 'unavailable') {
        const s = admitted.retryAfterSecs;
        if (admitted.cause) req.log.warn({ err: admitted.cause, deployment: id }, 'credential check failed: 503');
        return reply.code(503).header('retry-after', String(s)).send({ detail: admitted.detail });
      }
      if (admitted.kind === 'refused') return reply.code(403).send({ detail: admitted.detail });
      reply.raw.once('close', admitted.release);
      const q = req.url.indexOf('?');
      const query = q >= 0 ? req.url.slice(q) : '';
      const browserPath = q >= 0 ? req.url.slice(0, q) : req.url;
      const body = Buffer.isBuffer(req.body) ? req.body : undefined;
      return reply.from(`http://127.0.0.1:${admitted.port}/${rest}${query}`, {
        ...(body ? { body, contentType: req.headers['content-type'] ?? 'application/octet-stream' } : {}),
        rewriteRequestHeaders: (_req, headers) => {
          for (const h of HOP_BY_HOP) delete headers[h];
          // No body goes on (none came, or a GET/HEAD one fastify does not read): no length that promises one.
          if (!body) delete headers['content-length'];
          return headers;
        },
        rewriteHeaders: (headers) => tenantResponseHeaders(headers, browserPath) as typeof headers,
        onError: answerBackendError(id),
      });
    };
    const deploymentAt = opts.deploymentAt;
    if (deploymentAt) {
      const byOrigin = async (req: FastifyRequest, reply: FastifyReply) => {
        const id = deploymentAt(req.raw);
        if (!id) return reply.code(404).send({ detail: 'No deployment is served at this address.' });
        return forward(req, reply, id, req.url.split('?', 1)[0]!.slice(1));
      };
      scope.all('/', byOrigin);
      scope.all('/*', byOrigin);
      return;
    }
    const byPath = async (req: FastifyRequest, reply: FastifyReply) => {
      const { id, '*': rest = '' } = req.params as { id: string; '*'?: string };
      return forward(req, reply, id, rest);
    };
    scope.all(`${DEPLOYMENTS_PREFIX}/:id`, byPath);
    scope.all(`${DEPLOYMENTS_PREFIX}/:id/*`, byPath);
  });
}

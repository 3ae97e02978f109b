// The stable per-deployment URL: <dev server>/deployments/<id>/... is forwarded to whichever revision's agent
// server currently takes the deployment's traffic. Forwarding is @fastify/reply-from over a pooled undici agent.
//
// A request body is read whole (up to bodyLimit) before anything is sent upstream: an oversized body (413), one that
// breaks off or does not match its length (400) is answered here and never leaves a half-sent request on a pooled
// connection to the agent server, where the next caller's request would follow it. Hop-by-hop headers the client
// sent (Expect, Transfer-Encoding, Keep-Alive, Upgrade, TE, Trailer) are this hop's and are not passed on: the body
// goes upstream with its exact Content-Length, and `Expect: 100-continue` was answered by this server already.
import replyFrom from '@fastify/reply-from';
import type { FastifyError, FastifyInstance, FastifyReply, FastifyRequest } from 'fastify';

export type Backend = { port: number; acquire(): () => void };

export type ProxyOptions = {
  /** The backend of a deployment id, or undefined when it has no live revision (404). */
  resolve(deploymentId: string): Promise<Backend | undefined>;
  /** Largest request body passed on, in bytes (default: the agent server's own limit); 413 beyond it. */
  bodyLimit?: number;
};

export const DEPLOYMENTS_PREFIX = '/deployments';

/** The agent server's default body limit: a larger body would be refused there anyway. */
export const DEFAULT_PROXY_BODY_LIMIT = 10 * 1024 * 1024;

/**
 * Timeouts towards the agent servers: connecting (10 s), waiting for response headers (5 min: waits and streams
 * send theirs at once, custom routes may think longer) and silence within a response body (5 min: streams send a
 * heartbeat every few seconds). An idle pooled connection is dropped after 4 s, well before the agent server's 72 s.
 */
export const UPSTREAM_TIMEOUTS = { connectMs: 10_000, headersMs: 300_000, bodyIdleMs: 300_000, keepAliveMs: 4_000 };

const HOP_BY_HOP = ['expect', 'transfer-encoding', 'keep-alive', 'upgrade', 'te', 'trailer', 'proxy-connection'];

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

    const forward = async (req: FastifyRequest, reply: FastifyReply) => {
      const { id, '*': rest = '' } = req.params as { id: string; '*'?: string };
      const backend = await opts.resolve(id);
      if (!backend) {
        return reply.code(404).send({ detail: `Deployment ${id} has no live revision at this address.` });
      }
      const release = backend.acquire();
      reply.raw.once('close', release);
      const q = req.url.indexOf('?');
      const query = q >= 0 ? req.url.slice(q) : '';
      const body = Buffer.isBuffer(req.body) ? req.body : undefined;
      return reply.from(`http://127.0.0.1:${backend.port}/${rest}${query}`, {
        ...(body ? { body, contentType: req.headers['content-type'] ?? 'application/octet-stream' } : {}),
        rewriteRequestHeaders: (_req, headers) => {
          for (const h of HOP_BY_HOP) delete headers[h];
          // No body goes on (none came, or a GET/HEAD one fastify does not read): no length that promises one.
          if (!body) delete headers['content-length'];
          return headers;
        },
      });
    };
    scope.all(`${DEPLOYMENTS_PREFIX}/:id`, forward);
    scope.all(`${DEPLOYMENTS_PREFIX}/:id/*`, forward);
  });
}

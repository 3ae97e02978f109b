// The stable per-deployment URL: <dev server>/deployments/<id>/... is forwarded to whichever revision's agent
// server currently takes the deployment's traffic. Forwarding is @fastify/reply-from; raw bodies are passed
// through untouched so streams and every content type work.
import replyFrom, { type FastifyReplyFromHooks } from '@fastify/reply-from';
import type { FastifyInstance, FastifyReply, FastifyRequest } from 'fastify';

export type Backend = { port: number; acquire(): () => void };

/** A deployment whose serving revision is being started again: 503 with Retry-After, not 404. */
export type Unavailable = { unavailable: string; retryAfterSecs: number };

export type ProxyOptions = {
  /** The backend of a deployment id, why it is unavailable for now, or undefined when it has no live revision (404). */
  resolve(deploymentId: string): Promise<Backend | Unavailable | undefined>;
};

export const DEPLOYMENTS_PREFIX = '/deployments';

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
  await app.register(async (scope) => {
    scope.removeAllContentTypeParsers();
    scope.addContentTypeParser('*', (_req, payload, done) => done(null, payload));
    // Long joins and event streams must not be cut by client-side timeouts.
    await scope.register(replyFrom, { undici: { headersTimeout: 0, bodyTimeout: 0 } });

    const forward = async (req: FastifyRequest, reply: FastifyReply) => {
      const { id, '*': rest = '' } = req.params as { id: string; '*'?: string };
      const backend = await opts.resolve(id);
      if (!backend) {
        return reply.code(404).send({ detail: `Deployment ${id} has no live revision at this address.` });
      }
      if ('unavailable' in backend) {
        return reply
          .code(503)
          .header('retry-after', String(backend.retryAfterSecs))
          .send({ detail: `Deployment ${id} is not serving right now: ${backend.unavailable}` });
      }
      const release = backend.acquire();
      reply.raw.once('close', release);
      const q = req.url.indexOf('?');
      const query = q >= 0 ? req.url.slice(q) : '';
      return reply.from(`http://127.0.0.1:${backend.port}/${rest}${query}`, { onError: answerBackendError(id) });
    };
    scope.all(`${DEPLOYMENTS_PREFIX}/:id`, forward);
    scope.all(`${DEPLOYMENTS_PREFIX}/:id/*`, forward);
  });
}

// The stable per-deployment URL: <dev server>/deployments/<id>/... is forwarded to whichever revision's agent
// server currently takes the deployment's traffic. Forwarding is @fastify/reply-from; raw bodies are passed
// through untouched so streams and every content type work. WebSocket upgrades (the thread protocol's socket)
// are forwarded by deploymentUpgrades on the front server's 'upgrade' event: reply-from speaks HTTP only.
import { request, type IncomingMessage } from 'node:http';
import type { Duplex } from 'node:stream';
import replyFrom from '@fastify/reply-from';
import type { FastifyInstance, FastifyReply, FastifyRequest } from 'fastify';

export type Backend = { port: number; acquire(): () => void };

export type ProxyOptions = {
  /** The backend of a deployment id, or undefined when it has no live revision (404). */
  resolve(deploymentId: string): Promise<Backend | undefined>;
};

export const DEPLOYMENTS_PREFIX = '/deployments';

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
      const release = backend.acquire();
      reply.raw.once('close', release);
      const q = req.url.indexOf('?');
      const query = q >= 0 ? req.url.slice(q) : '';
      return reply.from(`http://127.0.0.1:${backend.port}/${rest}${query}`);
    };
    scope.all(`${DEPLOYMENTS_PREFIX}/:id`, forward);
    scope.all(`${DEPLOYMENTS_PREFIX}/:id/*`, forward);
  });
}

/** Answers an upgrade that goes nowhere with a plain HTTP response and closes the socket. */
function refuse(socket: Duplex, status: number, reason: string, body = ''): void {
  const text = body || JSON.stringify({ detail: reason });
  socket.end(
    `HTTP/1.1 ${status} ${reason}\r\nconnection: close\r\ncontent-type: application/json\r\n` +
      `content-length: ${Buffer.byteLength(text)}\r\n\r\n${text}`,
  );
}

const headerLines = (res: IncomingMessage) => {
  const lines: string[] = [];
  for (let i = 0; i < res.rawHeaders.length; i += 2) lines.push(`${res.rawHeaders[i]}: ${res.rawHeaders[i + 1]}`);
  return lines.join('\r\n');
};

/**
 * The front server's 'upgrade' listener: a WebSocket to <base>/deployments/<id>/... is relayed to the deployment's
 * agent server byte for byte (its handshake, auth included, is the agent server's). A refusal of the agent server
 * (401, 404, ...) reaches the client as it was sent; any other upgrade is refused.
 */
export function deploymentUpgrades(opts: ProxyOptions) {
  return (req: IncomingMessage, socket: Duplex, head: Buffer): void => {
    socket.on('error', () => socket.destroy());
    const m = /^\/deployments\/([^/?]+)(\/[^?]*)?(\?.*)?$/.exec(req.url ?? '');
    if (!m) return refuse(socket, 404, 'Not Found');
    void opts.resolve(decodeURIComponent(m[1]!)).then(
      (backend) => {
        if (!backend) return refuse(socket, 404, 'Not Found', JSON.stringify({ detail: 'no live revision' }));
        const release = backend.acquire();
        let released = false;
        const done = () => {
          if (released) return;
          released = true;
          release();
        };
        socket.once('close', done);
        const upstream = request({
          host: '127.0.0.1',
          port: backend.port,
          method: req.method,
          path: `${m[2] ?? '/'}${m[3] ?? ''}`,
          headers: req.headers,
        });
        upstream.on('upgrade', (res, up, upHead) => {
          socket.write(`HTTP/1.1 101 Switching Protocols\r\n${headerLines(res)}\r\n\r\n`);
          if (upHead.length) socket.write(upHead);
          if (head.length) up.write(head);
          up.on('error', () => socket.destroy());
          up.once('close', () => socket.destroy());
          socket.once('close', () => up.destroy());
          up.pipe(socket).pipe(up);
        });
        upstream.on('response', (res) => {
          const chunks: Buffer[] = [];
          res.on('data', (c: Buffer) => chunks.push(c));
          res.on('end', () =>
            refuse(socket, res.statusCode ?? 502, res.statusMessage ?? '', Buffer.concat(chunks).toString()),
          );
        });
        upstream.on('error', () => refuse(socket, 502, 'Bad Gateway'));
        upstream.end();
      },
      () => refuse(socket, 502, 'Bad Gateway'),
    );
  };
}

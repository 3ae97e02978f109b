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
// What comes back is tenant code's and is treated as hostile: every response carries a sandboxing CSP (a page
// served by an agent runs in an opaque origin: no storage, no cookies, no service worker), Service-Worker-Allowed
// never passes, and neither does a cookie the browser would send to the platform's paths (cookies ignore ports).
// What goes in is checked too: a request carrying a platform key (or another workspace's) is refused here, before
// tenant code, which may read every header under custom auth, could see it.
import { request, type ClientRequest, type IncomingMessage } from 'node:http';
import type { Duplex } from 'node:stream';
import replyFrom, { type FastifyReplyFromHooks } from '@fastify/reply-from';
import type { FastifyError, FastifyInstance, FastifyReply, FastifyRequest } from 'fastify';
import { repeatedCredentialDetail, repeatedCredentialHeader, TENANT_CSP } from '../../../lib/http.ts';

export type Backend = { port: number; tenant: string; acquire(): () => void };

/**
 * A deployment whose serving revision is being started again: 503 with Retry-After, not 404. `unavailable` says why,
 * for the deployment's own logs; callers are told only when to come back.
 */
export type Unavailable = { unavailable: string; retryAfterSecs: number };

export type ProxyOptions = {
  /** The backend of a deployment id, why it is unavailable for now, or undefined when it has no live revision (404). */
  resolve(deploymentId: string): Promise<Backend | Unavailable | undefined>;
  /** Largest request body passed on, in bytes (default: the agent server's own limit); 413 beyond it. */
  bodyLimit?: number;
  /** Origin mode: the deployment a request is for, from where it came in. Without it: /deployments/<id>/... */
  deploymentAt?(req: IncomingMessage): string | undefined;
  /** Why the request must not reach tenant code (it carries a credential that is not the tenant's), or undefined. */
  refuse?(tenant: string, req: IncomingMessage): Promise<string | undefined>;
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

/** Path trees the platform serves on its own origins (the console at /, the API); no tenant cookie may reach one. */
const PLATFORM_PATHS = ['/v1', '/v2', '/api-host', '/docs', '/openapi.json', '/assets', '/ok', DEPLOYMENTS_PREFIX];

/** RFC 6265 path-match: whether a cookie with `cookiePath` is sent with a request for `path`. */
function pathMatches(path: string, cookiePath: string): boolean {
  if (path === cookiePath) return true;
  return path.startsWith(cookiePath) && (cookiePath.endsWith('/') || path[cookiePath.length] === '/');
}

/** The path a Set-Cookie applies to: its Path attribute, else the request path's directory (RFC 6265 5.1.4). */
function cookiePath(setCookie: string, requestPath: string): string {
  for (const attr of setCookie.split(';').slice(1)) {
    const [name, ...value] = attr.split('=');
    if (name?.trim().toLowerCase() === 'path') {
      const p = value.join('=').trim();
      if (p.startsWith('/')) return p;
    }
  }
  const slash = requestPath.lastIndexOf('/');
  return slash <= 0 ? '/' : requestPath.slice(0, slash);
}

/** True when the browser would send this cookie to one of the platform's paths (or to others than this host). */
export function cookieReachesPlatform(setCookie: string, requestPath: string): boolean {
  if (/;\s*domain\s*=/i.test(setCookie)) return true;
  const p = cookiePath(setCookie, requestPath);
  // Sent with the console's page itself (Path=/), with requests under a platform path, or with that path itself.
  return p === '/' || PLATFORM_PATHS.some((q) => pathMatches(q, p) || pathMatches(p, q));
}

type Headers = Record<string, string | string[] | number | undefined>;

/** The response headers of tenant code as they may reach a browser. `requestPath` is the path the browser used. */
export function tenantResponseHeaders(headers: Headers, requestPath: string): Headers {
  const out: Headers = {};
  const csp: string[] = [];
  for (const [name, value] of Object.entries(headers)) {
    const lower = name.toLowerCase();
    const values = [value ?? []].flat().map(String);
    if (lower === 'service-worker-allowed') continue;
    // The tenant's own policy still applies (every policy sent is enforced); ours is added, never replaced.
    if (lower === 'content-security-policy') csp.push(...values);
    else if (lower === 'set-cookie') {
      const kept = values.filter((c) => !cookieReachesPlatform(c, requestPath));
      if (kept.length) out['set-cookie'] = [...[out['set-cookie'] ?? []].flat().map(String), ...kept];
    } else out[name] = value;
  }
  out['content-security-policy'] = [...csp, TENANT_CSP];
  return out;
}

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

/**
 * The 503 of a deployment being started again. Callers may be anonymous: why it restarts (the agent's own last
 * words) is for its workspace's deploy log, not for them.
 */
const restartingDetail = (id: string, retryAfterSecs: number) =>
  `Deployment ${id} is restarting, retry after ${retryAfterSecs} s.`;

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
      const backend = await opts.resolve(id);
      if (!backend) {
        return reply.code(404).send({ detail: `Deployment ${id} has no live revision at this address.` });
      }
      if ('unavailable' in backend) {
        const s = backend.retryAfterSecs;
        return reply
          .code(503)
          .header('retry-after', String(s))
          .send({ detail: restartingDetail(id, s) });
      }
      const refusal = await opts.refuse?.(backend.tenant, req.raw);
      if (refusal) return reply.code(403).send({ detail: refusal });
      const release = backend.acquire();
      reply.raw.once('close', release);
      const q = req.url.indexOf('?');
      const query = q >= 0 ? req.url.slice(q) : '';
      const browserPath = q >= 0 ? req.url.slice(0, q) : req.url;
      const body = Buffer.isBuffer(req.body) ? req.body : undefined;
      return reply.from(`http://127.0.0.1:${backend.port}/${rest}${query}`, {
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

const REFUSAL_LINGER_MS = 5_000;

/** Answers an upgrade that goes nowhere with a plain HTTP response and closes the socket. */
function refuse(socket: Duplex, status: number, reason: string, body = '', extra: string[] = []): void {
  const text = body || JSON.stringify({ detail: reason });
  // The socket is paused after an upgrade: read it so the client's own close is noticed (the server allows half-open
  // sockets, so that end is the socket's), and never wait long for it.
  socket.removeAllListeners('data');
  socket.resume();
  socket.once('end', () => socket.destroy());
  setTimeout(() => socket.destroy(), REFUSAL_LINGER_MS).unref();
  socket.end(
    `HTTP/1.1 ${status} ${reason}\r\nconnection: close\r\ncontent-type: application/json\r\n` +
      extra.map((h) => `${h}\r\n`).join('') +
      `content-length: ${Buffer.byteLength(text)}\r\n\r\n${text}`,
  );
}

/** The deployment an upgrade is for and the path to ask its agent server for. */
function upgradeTarget(opts: ProxyOptions, req: IncomingMessage): { id: string; path: string } | undefined {
  const url = req.url ?? '';
  if (opts.deploymentAt) {
    const id = opts.deploymentAt(req);
    return id && url.startsWith('/') ? { id, path: url } : undefined;
  }
  const m = /^\/deployments\/([^/?]+)(\/[^?]*)?(\?.*)?$/.exec(url);
  if (!m) return undefined;
  try {
    return { id: decodeURIComponent(m[1]!), path: `${m[2] ?? '/'}${m[3] ?? ''}` };
  } catch {
    return undefined;
  }
}

const headerLines = (res: IncomingMessage) => {
  const lines: string[] = [];
  for (let i = 0; i < res.rawHeaders.length; i += 2) lines.push(`${res.rawHeaders[i]}: ${res.rawHeaders[i + 1]}`);
  return lines.join('\r\n');
};

/**
 * Bounds of the WebSocket relay, each against one way tenant code or a client could pin the shared process: the whole
 * handshake (resolving the deployment, the agent server's answer) within `handshakeMs`; a refusal's body relayed up
 * to `refusalBytes` (the rest is not read); at most `perDeployment` relays open at once for one deployment (pending
 * handshakes included).
 */
export const UPGRADE_LIMITS = { handshakeMs: 15_000, refusalBytes: 64 * 1024, perDeployment: 256 };

/** The upgrade listener, with what the data plane needs at shutdown. */
export type UpgradeRelay = ((req: IncomingMessage, socket: Duplex, head: Buffer) => void) & {
  /** Relays open now (handshakes in progress included), for one deployment or all. */
  open(deploymentId?: string): number;
  /** Destroys every relay, pending or open, and refuses new upgrades (503): the process is stopping. */
  close(): void;
};

/**
 * The 'upgrade' listener of the servers agents are reached on: a WebSocket to a deployment (its own origin with
 * `deploymentAt`, else <base>/deployments/<id>/...) is relayed to the deployment's agent server byte for byte (its
 * handshake, auth included, is the agent server's). The same checks as plain requests come first: a deployment
 * restarting answers 503 with Retry-After, and a request carrying a platform key or another workspace's is refused
 * (403) before tenant code sees it. A refusal of the agent server (401, 404, ...) reaches the client with its status
 * and (up to a bound) its body; any other upgrade is refused. Whichever way a relay ends (the client leaves, the
 * handshake takes too long, the agent refuses or goes away, the process stops), both of its sockets are destroyed.
 */
export function deploymentUpgrades(opts: ProxyOptions, limits = UPGRADE_LIMITS): UpgradeRelay {
  const relays = new Map<Duplex, { deploymentId: string; end(): void }>();
  let closed = false;
  const openFor = (id: string) => [...relays.values()].filter((r) => r.deploymentId === id).length;

  const relay = (req: IncomingMessage, socket: Duplex, head: Buffer): void => {
    socket.on('error', () => socket.destroy());
    if (closed) return refuse(socket, 503, 'Service Unavailable', JSON.stringify({ detail: 'shutting down' }));
    const target = upgradeTarget(opts, req);
    if (!target) return refuse(socket, 404, 'Not Found');
    const repeated = repeatedCredentialHeader(req.rawHeaders);
    if (repeated)
      return refuse(socket, 400, 'Bad Request', JSON.stringify({ detail: repeatedCredentialDetail(repeated) }));
    if (openFor(target.id) >= limits.perDeployment) {
      const detail = `Deployment ${target.id} has ${limits.perDeployment} WebSockets open, the most it may; close one first.`;
      return refuse(socket, 429, 'Too Many Requests', JSON.stringify({ detail }), ['retry-after: 5']);
    }
    let upstream: ClientRequest | undefined;
    let upgraded = false;
    const end = () => {
      relays.delete(socket);
      clearTimeout(deadline);
      upstream?.destroy();
      socket.destroy();
    };
    relays.set(socket, { deploymentId: target.id, end });
    let releaseBackend: (() => void) | undefined;
    const release = () => {
      releaseBackend?.();
      releaseBackend = undefined;
    };
    let answered = false;
    socket.once('close', () => {
      relays.delete(socket);
      clearTimeout(deadline);
      upstream?.destroy();
      release();
    });
    /** Answers the client once, unless the relay has ended already, and lets go of the agent side. */
    const answer = (status: number, reason: string, body = '', extra: string[] = []) => {
      clearTimeout(deadline);
      upstream?.destroy();
      release();
      if (answered || socket.destroyed) return;
      answered = true;
      refuse(socket, status, reason, body, extra);
    };
    const deadline = setTimeout(() => {
      if (upgraded) return;
      const detail = `the agent server did not complete the WebSocket handshake within ${limits.handshakeMs / 1000} s`;
      answer(504, 'Gateway Timeout', JSON.stringify({ detail }));
    }, limits.handshakeMs);
    deadline.unref();
    // A paused socket never notices its client leaving: read it during the handshake (a client sends nothing before
    // the 101 but may pipeline a first frame; that much is kept) and end the relay on its end.
    const early: Buffer[] = [];
    let earlyBytes = 0;
    const onEarly = (chunk: Buffer) => {
      earlyBytes += chunk.length;
      if (earlyBytes > limits.refusalBytes) return end();
      early.push(chunk);
    };
    socket.on('data', onEarly);
    socket.once('end', end);

    void opts.resolve(target.id).then(
      async (backend) => {
        if (socket.destroyed) return;
        if (!backend) return answer(404, 'Not Found', JSON.stringify({ detail: 'no live revision' }));
        if ('unavailable' in backend) {
          const s = backend.retryAfterSecs;
          return answer(503, 'Service Unavailable', JSON.stringify({ detail: restartingDetail(target.id, s) }), [
            `retry-after: ${s}`,
          ]);
        }
        const refusal = await opts.refuse?.(backend.tenant, req);
        if (socket.destroyed) return;
        if (refusal) return answer(403, 'Forbidden', JSON.stringify({ detail: refusal }));
        releaseBackend = backend.acquire();
        // A connection of its own (agent: false): the socket becomes the WebSocket, and a pooled keep-alive socket the
        // agent server may be closing at that moment would fail the handshake with a reset.
        const up = request({
          agent: false,
          host: '127.0.0.1',
          port: backend.port,
          method: req.method,
          path: target.path,
          headers: req.headers,
        });
        upstream = up;
        up.on('upgrade', (res, upSocket, upHead) => {
          if (socket.destroyed) return void upSocket.destroy();
          upgraded = true;
          clearTimeout(deadline);
          socket.write(`HTTP/1.1 101 Switching Protocols\r\n${headerLines(res)}\r\n\r\n`);
          if (upHead.length) socket.write(upHead);
          socket.off('data', onEarly);
          socket.off('end', end);
          if (head.length) upSocket.write(head);
          for (const chunk of early) upSocket.write(chunk);
          upSocket.on('error', () => socket.destroy());
          upSocket.once('close', () => socket.destroy());
          socket.once('close', () => upSocket.destroy());
          upSocket.pipe(socket).pipe(upSocket);
        });
        up.on('response', (res) => {
          const chunks: Buffer[] = [];
          let size = 0;
          res.on('data', (c: Buffer) => {
            size += c.length;
            if (size <= limits.refusalBytes) return void chunks.push(c);
            const detail = `the agent server refused the WebSocket (${res.statusCode}) with an answer over ${limits.refusalBytes} bytes`;
            answer(502, 'Bad Gateway', JSON.stringify({ detail }));
          });
          res.on('end', () => answer(res.statusCode ?? 502, res.statusMessage ?? '', Buffer.concat(chunks).toString()));
        });
        up.on('error', () => answer(502, 'Bad Gateway'));
        up.end();
      },
      () => answer(502, 'Bad Gateway'),
    );
  };
  return Object.assign(relay, {
    open: (deploymentId?: string) => (deploymentId === undefined ? relays.size : openFor(deploymentId)),
    close: () => {
      closed = true;
      for (const r of [...relays.values()]) r.end();
    },
  });
}

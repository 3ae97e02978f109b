// WebSockets to deployments: the 'upgrade' listener of the servers agents are reached on relays each one byte for
// byte to the deployment's agent server, after the same admission as plain requests (proxy-target.ts), within
// bounds that keep tenant code or a client from pinning the shared process.
import { request, type ClientRequest, type IncomingMessage } from 'node:http';
import type { Duplex } from 'node:stream';
import { repeatedCredentialDetail, repeatedCredentialHeader } from '../../../lib/http.ts';
import { admit, type ProxyOptions } from './proxy-target.ts';

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

    void admit(opts, target.id, req).then(
      (admitted) => {
        if (socket.destroyed) {
          if (admitted.kind === 'admitted') admitted.release();
          return;
        }
        if (admitted.kind === 'none') return answer(404, 'Not Found', JSON.stringify({ detail: 'no live revision' }));
        if (admitted.kind === 'unavailable') {
          const s = admitted.retryAfterSecs;
          return answer(503, 'Service Unavailable', JSON.stringify({ detail: admitted.detail }), [`retry-after: ${s}`]);
        }
        if (admitted.kind === 'refused') return answer(403, 'Forbidden', JSON.stringify({ detail: admitted.detail }));
        releaseBackend = admitted.release;
        // A connection of its own (agent: false): the socket becomes the WebSocket, and a pooled keep-alive socket the
        // agent server may be closing at that moment would fail the handshake with a reset.
        const up = request({
          agent: false,
          host: '127.0.0.1',
          port: admitted.port,
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

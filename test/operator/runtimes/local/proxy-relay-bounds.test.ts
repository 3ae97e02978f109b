// The one-machine proxy's WebSocket relay, tried the way a tenant (whose agent answers however it likes) and an
// anonymous client would pin the shared process: an agent that never completes the handshake, a client that leaves
// mid-handshake, a refusal with a huge body, a flood of upgrades to one deployment, and the process stopping with
// relays open. The agent side is a real HTTP server playing the tenant's code (a custom route that answers slowly,
// or a real `ws` server); the client side is the real `ws` client and raw sockets.
import { createServer, request, type IncomingMessage, type Server } from 'node:http';
import { connect, type Socket } from 'node:net';
import Fastify, { type FastifyInstance } from 'fastify';
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import WebSocket, { WebSocketServer } from 'ws';
import { createFrontServer } from '../../../../src/lib/http.ts';
import {
  deploymentProxy,
  deploymentUpgrades,
  type Backend,
  type ProxyOptions,
  type Unavailable,
  type UpgradeRelay,
  UPGRADE_LIMITS,
} from '../../../../src/operator/runtimes/local/proxy.ts';

/** A short handshake for the test of the deadline; long enough elsewhere that no load on the machine reaches it. */
const SHORT = { handshakeMs: 1_000, refusalBytes: 4 * 1024, perDeployment: 5 };
const LONG = { ...SHORT, handshakeMs: 120_000 };
const AGENT_WORDS = 'Error: ECONNREFUSED postgres://agent:hunter2@db.internal/agent';

/** A tenant's agent server: `mode` decides how it answers an upgrade. */
function tenantAgent() {
  const held = new Set<IncomingMessage>();
  let mode: 'hold' | 'refuse-huge' | 'websocket' = 'hold';
  const wss = new WebSocketServer({ noServer: true });
  const server: Server = createServer((_req, res) => res.end());
  server.on('upgrade', (req, socket, head) => {
    if (mode === 'websocket') return wss.handleUpgrade(req, socket, head, (ws) => ws.on('message', (m) => ws.send(m)));
    if (mode === 'refuse-huge') {
      // A refusal with a body larger than anyone should buffer.
      const body = Buffer.alloc(8 * 1024 * 1024, 'x');
      socket.on('error', () => undefined);
      socket.end(
        Buffer.concat([Buffer.from(`HTTP/1.1 401 Unauthorized\r\ncontent-length: ${body.length}\r\n\r\n`), body]),
      );
      return;
    }
    // A custom route that thinks forever about the upgrade.
    held.add(req);
    socket.on('error', () => undefined);
    // Reading is what notices the other side hanging up (an HTTP server's sockets allow half-open: end it then).
    socket.resume();
    socket.once('end', () => socket.destroy());
    socket.once('close', () => held.delete(req));
  });
  return {
    server,
    held,
    set mode(m: typeof mode) {
      mode = m;
    },
    async connections(): Promise<number> {
      return new Promise((r) => server.getConnections((_e, n) => r(n)));
    },
  };
}

/** A raw upgrade request; resolves with what came back (status line and body) or `open` for a 101. */
function upgrade(
  port: number,
  path = '/threads/t/stream/events',
  headers: Record<string, string | string[]> = {},
): { socket: Socket; answer: Promise<string> } {
  const socket = connect(port, '127.0.0.1');
  const lines = [
    `GET ${path} HTTP/1.1`,
    'Host: 127.0.0.1',
    'Connection: Upgrade',
    'Upgrade: websocket',
    'Sec-WebSocket-Version: 13',
    'Sec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==',
    ...Object.entries(headers).flatMap(([k, v]) => [v].flat().map((x) => `${k}: ${x}`)),
  ];
  socket.write(`${lines.join('\r\n')}\r\n\r\n`);
  let text = '';
  const answer = new Promise<string>((resolve) => {
    socket.on('data', (d: Buffer) => {
      text += d.toString('latin1');
      if (text.startsWith('HTTP/1.1 101')) resolve('open');
    });
    socket.on('close', () => resolve(text));
    socket.on('error', () => undefined);
  });
  return { socket, answer };
}

const POLL = { timeout: 10_000, interval: 50 };

describe('the WebSocket relay of the one-machine proxy', { timeout: 60_000 }, () => {
  const agent = tenantAgent();
  let agentPort: number;
  let inUse = 0;
  let state: 'serving' | 'restarting' = 'serving';
  const fronts: Array<{ server: Server; proxy: FastifyInstance }> = [];

  const options = (): ProxyOptions => ({
    resolve: async (id): Promise<Backend | Unavailable | undefined> => {
      if (id !== 'dep-1') return undefined;
      if (state === 'restarting') return { unavailable: `start failed: ${AGENT_WORDS}`, retryAfterSecs: 3 };
      return {
        port: agentPort,
        tenant: 'ws-1',
        acquire: () => {
          inUse++;
          return () => void inUse--;
        },
      };
    },
  });

  /** A proxy in front of the agent, as the data plane runs it, with these relay limits. */
  async function front(limits: typeof UPGRADE_LIMITS): Promise<{ port: number; relay: UpgradeRelay }> {
    const proxy = Fastify();
    await deploymentProxy(proxy, options());
    await proxy.ready();
    const relay = deploymentUpgrades(options(), limits);
    const server = createFrontServer((req, res) => proxy.routing(req, res));
    server.on('upgrade', relay);
    await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
    fronts.push({ server, proxy });
    return { port: (server.address() as { port: number }).port, relay };
  }
  const PATH = '/deployments/dep-1/threads/t/stream/events';

  beforeAll(async () => {
    await new Promise<void>((r) => agent.server.listen(0, '127.0.0.1', r));
    agentPort = (agent.server.address() as { port: number }).port;
  });
  afterEach(async () => {
    agent.mode = 'hold';
    state = 'serving';
    await expect.poll(() => agent.connections(), POLL).toBe(0);
    await expect.poll(() => inUse, POLL).toBe(0);
  });
  afterAll(async () => {
    for (const f of fronts) {
      f.server.closeAllConnections();
      await new Promise((r) => f.server.close(r));
      await f.proxy.close();
    }
    agent.server.closeAllConnections();
    await new Promise((r) => agent.server.close(r));
  });

  it('ends a handshake the agent never completes: 504 to the client, the agent side closed, nothing held', async () => {
    const { port } = await front(SHORT);
    const { answer } = upgrade(port, PATH);
    await expect.poll(() => agent.held.size, POLL).toBe(1);
    const text = await answer;
    expect(text).toMatch(/^HTTP\/1.1 504/);
    expect(text).toContain('did not complete the WebSocket handshake within 1 s');
    await expect.poll(() => agent.held.size, POLL).toBe(0);
  });

  it('aborts the agent side when the client leaves mid-handshake', async () => {
    const { port, relay } = await front(LONG);
    const { socket } = upgrade(port, PATH);
    await expect.poll(() => agent.held.size, POLL).toBe(1);
    socket.destroy();
    await expect.poll(() => agent.held.size, POLL).toBe(0);
    await expect.poll(() => relay.open(), POLL).toBe(0);
  });

  it("relays a refusal's status, but never buffers a huge refusal body", async () => {
    const { port } = await front(LONG);
    agent.mode = 'refuse-huge';
    const text = await upgrade(port, PATH).answer;
    expect(text).toMatch(/^HTTP\/1.1 502/);
    expect(text).toContain('over 4096 bytes');
    expect(text.length).toBeLessThan(LONG.refusalBytes);
  });

  it('holds at most perDeployment relays of one deployment at once; a freed place is taken again', async () => {
    const { port, relay } = await front(LONG);
    const pending = Array.from({ length: LONG.perDeployment }, () => upgrade(port, PATH));
    await expect.poll(() => agent.held.size, POLL).toBe(LONG.perDeployment);
    const over = await upgrade(port, PATH).answer;
    expect(over).toMatch(/^HTTP\/1.1 429/);
    expect(over).toContain('5 WebSockets open');
    expect(relay.open('dep-1')).toBe(LONG.perDeployment);
    pending[0]!.socket.destroy();
    await expect.poll(() => relay.open('dep-1'), POLL).toBe(LONG.perDeployment - 1);
    const again = upgrade(port, PATH);
    await expect.poll(() => agent.held.size, POLL).toBe(LONG.perDeployment);
    for (const p of [...pending.slice(1), again]) p.socket.destroy();
  });

  it('tells anonymous callers of a restarting deployment when to come back, never what the agent said', async () => {
    const { port } = await front(LONG);
    state = 'restarting';
    const res = await fetch(`http://127.0.0.1:${port}/deployments/dep-1/threads`);
    expect(res.status).toBe(503);
    expect(res.headers.get('retry-after')).toBe('3');
    const body = await res.text();
    expect(body).toContain('is restarting, retry after 3 s');
    expect(body).not.toContain('hunter2');
    const ws = await upgrade(port, PATH).answer;
    expect(ws).toMatch(/^HTTP\/1.1 503/);
    expect(ws).toContain('is restarting, retry after 3 s');
    expect(ws).not.toContain('hunter2');
  });

  it('refuses a repeated X-Api-Key (400) on requests and upgrades, before the agent sees either', async () => {
    const { port } = await front(LONG);
    const status = await new Promise<number>((resolve, reject) => {
      const req = request(
        `http://127.0.0.1:${port}/deployments/dep-1/threads`,
        { headers: { 'x-api-key': ['junk', 'apk_someone-elses-key'] } },
        (res) => {
          res.resume();
          resolve(res.statusCode ?? 0);
        },
      );
      req.on('error', reject);
      req.end();
    });
    expect(status).toBe(400);
    const text = await upgrade(port, PATH, { 'X-Api-Key': ['junk', 'apk_someone-elses-key'] }).answer;
    expect(text).toMatch(/^HTTP\/1.1 400/);
    expect(text).toContain('more than once');
    expect(agent.held.size).toBe(0);
  });

  it('destroys every relay, pending or open, when the process stops, and takes no new one', async () => {
    const { port, relay } = await front(LONG);
    agent.mode = 'websocket';
    const ws = new WebSocket(`ws://127.0.0.1:${port}${PATH}`);
    await new Promise((r) => ws.once('open', r));
    const echoed = new Promise<string>((r) => ws.once('message', (m: Buffer) => r(m.toString())));
    ws.send('ping through the relay');
    expect(await echoed).toBe('ping through the relay');
    agent.mode = 'hold';
    const pending = upgrade(port, PATH);
    await expect.poll(() => agent.held.size, POLL).toBe(1);
    expect(relay.open()).toBe(2);
    const closed = new Promise((r) => ws.once('close', r));
    relay.close();
    await closed;
    await pending.answer;
    expect(relay.open()).toBe(0);
    const after = await upgrade(port, PATH).answer;
    expect(after).toMatch(/^HTTP\/1.1 503/);
  });
});

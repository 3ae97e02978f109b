// The protocol WebSocket, tried the way a hostile page or client would: a page of another site opening a socket with
// the signed-in user's cookie (cross-site WebSocket hijacking), a credential passed as a subprotocol turning up in a
// run's configurable, frames the HTTP input guard would refuse, and subscriptions without end. A real server on a
// port (custom auth reading a bearer token or a session cookie, http.cors from langgraph.json), the real `ws` client.
import { mkdtempSync, rmSync } from 'node:fs';
import type { AddressInfo } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import type { FastifyInstance } from 'fastify';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import WebSocket from 'ws';
import { buildApp } from '../../../src/agent-server/app.ts';
import { loadGraphs } from '../../../src/agent-server/graphs/index.ts';
import { MAX_SUBSCRIPTIONS } from '../../../src/agent-server/routes/protocol-socket.ts';
import { RunEngine } from '../../../src/agent-server/runs/engine.ts';
import { ensureSystemAssistants } from '../../../src/agent-server/server.ts';
import { openEmbeddedStorage } from '../../../src/agent-server/storage/embedded/index.ts';
import type { EngineStorage } from '../../../src/agent-server/storage/ports/run-queue.ts';
import { silentLogger } from '../../../src/lib/logger.ts';

const fixture = (name: string) => new URL(`../fixtures/ws-guards/${name}`, import.meta.url).pathname;
const ALICE = { authorization: 'Bearer token-alice' };
const COOKIE = { cookie: 'session=token-alice' };

async function serve(config: string) {
  const dir = mkdtempSync(join(tmpdir(), 'ap-ws-guards-'));
  const logger = silentLogger();
  const graphs = await loadGraphs(config, { logger });
  const storage: EngineStorage = openEmbeddedStorage({ dataDir: dir });
  await ensureSystemAssistants(storage, graphs);
  const engine = new RunEngine({ storage, graphs, logger, concurrency: 2, runTimeoutMs: 30_000 });
  const app: FastifyInstance = await buildApp({ storage, graphs, engine, logger, keepAliveMs: 200 });
  await engine.start();
  await app.listen({ port: 0, host: '127.0.0.1' });
  const url = `http://127.0.0.1:${(app.server.address() as AddressInfo).port}`;
  return {
    url,
    async close() {
      await engine.stop(2_000);
      await app.close();
      await storage.close();
      rmSync(dir, { recursive: true, force: true });
    },
  };
}

type Server = Awaited<ReturnType<typeof serve>>;

/** Opens a socket on a new thread id as a browser page would (Origin, its cookies, no other header). */
function open(server: Server, threadId: string, protocols: string[], headers: Record<string, string>) {
  const ws = new WebSocket(`${server.url.replace('http', 'ws')}/threads/${threadId}/stream/events`, protocols, {
    headers,
  });
  return new Promise<{ status: number; body: string; ws: WebSocket }>((resolve) => {
    ws.once('unexpected-response', (_req, res) => {
      let body = '';
      res.on('data', (c: Buffer) => (body += c.toString()));
      res.on('end', () => resolve({ status: res.statusCode ?? 0, body, ws }));
    });
    ws.once('open', () => resolve({ status: 101, body: '', ws }));
    ws.once('error', () => undefined);
  });
}

function command(ws: WebSocket, id: number, method: string, params: unknown): Promise<Record<string, unknown>> {
  return new Promise((resolve) => {
    const onMessage = (d: Buffer) => {
      const m = JSON.parse(d.toString()) as Record<string, unknown>;
      if (m.id !== id) return;
      ws.off('message', onMessage);
      resolve(m);
    };
    ws.on('message', onMessage);
    ws.send(typeof params === 'string' ? params : JSON.stringify({ id, method, params }));
  });
}

describe('protocol WebSockets under http.cors and custom auth', { timeout: 60_000 }, () => {
  let server: Server;
  let fallback: Server;
  beforeAll(async () => {
    server = await serve(fixture('langgraph.json'));
    fallback = await serve(fixture('langgraph.default-cors.json'));
  });
  afterAll(async () => {
    await server?.close();
    await fallback?.close();
  });

  it("refuses another site's page carrying the user's cookie (403), as CORS refuses it over HTTP", async () => {
    const evil = await open(server, crypto.randomUUID(), ['agentplane'], { origin: 'https://evil.example', ...COOKIE });
    expect(evil.status).toBe(403);
    expect(evil.body).toContain('origin https://evil.example');
    const preflight = await fetch(`${server.url}/threads`, {
      method: 'OPTIONS',
      headers: { origin: 'https://evil.example', 'access-control-request-method': 'POST' },
    });
    expect(preflight.status).toBe(400);
    // The listed origin, the server's own and a non-browser client (no Origin) open it with the cookie.
    const origins: Array<Record<string, string>> = [{ origin: 'https://app.example' }, { origin: server.url }, {}];
    for (const origin of origins) {
      const ok = await open(server, crypto.randomUUID(), ['agentplane'], { ...origin, ...COOKIE });
      expect(ok.status, JSON.stringify(origin)).toBe(101);
      expect(await command(ok.ws, 1, 'subscription.subscribe', { channels: ['values'] })).toMatchObject({
        type: 'success',
      });
      ok.ws.close();
    }
  });

  it("without allow_credentials, another site's page loses the cookie the browser added (401, no session)", async () => {
    const evil = await open(fallback, crypto.randomUUID(), ['agentplane'], {
      origin: 'https://evil.example',
      ...COOKIE,
    });
    expect(evil.status).toBe(401);
    // A credential the page itself holds and sends (as a header would be over HTTP) still opens it.
    const explicit = await open(fallback, crypto.randomUUID(), ['agentplane', 'bearer.token-alice'], {
      origin: 'https://evil.example',
    });
    expect(explicit.status).toBe(101);
    explicit.ws.close();
  });

  it("never hands a subprotocol credential to the run's configurable, even when every header is copied there", async () => {
    const threadId = crypto.randomUUID();
    const { status, ws } = await open(server, threadId, ['agentplane', 'bearer.token-alice'], {});
    expect(status).toBe(101);
    try {
      const started = await command(ws, 1, 'run.start', { assistant_id: 'headers', input: {} });
      expect(started).toMatchObject({ type: 'success' });
      const runId = (started.result as { run_id: string }).run_id;
      const joined = await fetch(`${server.url}/threads/${threadId}/runs/${runId}/join`, { headers: ALICE });
      const seen = ((await joined.json()) as { seen: Record<string, unknown> }).seen;
      expect(JSON.stringify(seen)).not.toContain('token-alice');
      // The subprotocol the client chose is still there for the graph to read; only the credential went.
      expect(seen['sec-websocket-protocol']).toBe('agentplane');
    } finally {
      ws.close();
    }
  });

  it('refuses frames the HTTP input guard refuses, naming the problem, and starts nothing', async () => {
    const threadId = crypto.randomUUID();
    const { ws } = await open(server, threadId, ['agentplane', 'bearer.token-alice'], {});
    try {
      const nul = await command(ws, 1, 'run.start', { assistant_id: 'headers', input: { text: 'a\u0000b' } });
      expect(nul).toMatchObject({ type: 'error', id: 1, error: 'invalid_argument' });
      expect(nul.message).toContain('command.params.input.text contains a NUL character');
      let deep: unknown = 'bottom';
      for (let i = 0; i < 300; i++) deep = [deep];
      const frame = JSON.stringify({ id: 2, method: 'run.start', params: { assistant_id: 'headers', input: deep } });
      const nested = await command(ws, 2, 'run.start', frame);
      expect(nested).toMatchObject({ type: 'error', id: 2, error: 'invalid_argument' });
      expect(nested.message).toContain('nested deeper than 256 levels');
      const runs = await fetch(`${server.url}/threads/${threadId}/runs`, { headers: ALICE });
      expect(runs.status === 404 || ((await runs.json()) as unknown[]).length === 0).toBe(true);
    } finally {
      ws.close();
    }
  });

  it(`holds at most ${MAX_SUBSCRIPTIONS} subscriptions per socket; an unsubscribe frees a place`, async () => {
    const { ws } = await open(server, crypto.randomUUID(), ['agentplane', 'bearer.token-alice'], {});
    try {
      const ids: string[] = [];
      for (let i = 0; i < MAX_SUBSCRIPTIONS; i++) {
        const ok = await command(ws, i, 'subscription.subscribe', { channels: ['values'] });
        expect(ok).toMatchObject({ type: 'success' });
        ids.push((ok.result as { subscription_id: string }).subscription_id);
      }
      const over = await command(ws, 100, 'subscription.subscribe', { channels: ['values'] });
      expect(over).toMatchObject({ type: 'error', error: 'invalid_argument' });
      expect(over.message).toContain(`${MAX_SUBSCRIPTIONS} subscriptions`);
      await command(ws, 101, 'subscription.unsubscribe', { subscription_id: ids[0] });
      expect(await command(ws, 102, 'subscription.subscribe', { channels: ['values'] })).toMatchObject({
        type: 'success',
      });
    } finally {
      ws.close();
    }
  });
});

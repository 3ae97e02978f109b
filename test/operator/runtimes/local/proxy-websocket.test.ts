// WebSocket upgrades through the one-machine proxy in front of deployments (<base>/deployments/<id>/...): the SDK
// 1.15 ThreadStream's WebSocket reaches a real agent server process behind the proxy and streams a run token by
// token; the agent server's own refusal (no key) reaches the client unchanged, an unknown deployment is a 404, a
// credential check that could not be made a 503, and every relayed connection is released once closed.
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import type { Server } from 'node:http';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { Client } from '@langchain/langgraph-sdk-v1';
import Fastify from 'fastify';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import WebSocket from 'ws';
import { hashApiKey } from '../../../../src/agent-server/http/api-keys.ts';
import { createFrontServer, credentialValues } from '../../../../src/lib/http.ts';
import { deploymentProxy } from '../../../../src/operator/runtimes/local/proxy.ts';
import type { Backend } from '../../../../src/operator/runtimes/local/proxy-target.ts';
import { deploymentUpgrades } from '../../../../src/operator/runtimes/local/proxy-upgrades.ts';
import { startServerProcess, type ServerProc } from '../../../agent-server/helpers/process.ts';

const CONFIG = new URL('../../../fixtures/protocol/langgraph.json', import.meta.url).pathname;
const KEY = 'ap_proxy_ws_key_0123456789';

describe('WebSocket upgrades through the deployment proxy', { timeout: 90_000 }, () => {
  let dir: string;
  let agent: ServerProc;
  let front: Server;
  let base: string;
  let inUse = 0;

  beforeAll(async () => {
    dir = mkdtempSync(join(tmpdir(), 'ap-proxy-ws-'));
    writeFileSync(join(dir, 'keys.json'), JSON.stringify({ hashes: [hashApiKey(KEY)] }));
    agent = await startServerProcess([
      '--config',
      CONFIG,
      '--data-dir',
      join(dir, 'data'),
      '--auth-keys-file',
      join(dir, 'keys.json'),
    ]);
    const port = Number(new URL(agent.url).port);
    const resolve = async (id: string): Promise<Backend | undefined> =>
      id === 'dep-1'
        ? {
            port,
            tenant: 'ws-1',
            acquire: () => {
              inUse++;
              return () => void inUse--;
            },
          }
        : undefined;
    const proxy = Fastify();
    await deploymentProxy(proxy, { resolve });
    await proxy.ready();
    front = createFrontServer((req, res) => proxy.routing(req, res));
    front.on('upgrade', deploymentUpgrades({ resolve }));
    await new Promise<void>((r) => front.listen(0, '127.0.0.1', r));
    base = `http://127.0.0.1:${(front.address() as { port: number }).port}`;
  });
  afterAll(async () => {
    front?.closeAllConnections();
    await new Promise((r) => front?.close(r));
    await agent?.stop();
    rmSync(dir, { recursive: true, force: true });
  });

  it('streams a run over the SDK WebSocket transport through the proxy', async () => {
    const client = new Client({ apiUrl: `${base}/deployments/dep-1` });
    const thread = client.threads.stream({
      assistantId: 'agent',
      transport: 'websocket',
      webSocketFactory: (url: string) => new WebSocket(url, ['agentplane', `x-api-key.${KEY}`]) as never,
    });
    try {
      const sub = await thread.subscribe({ channels: ['messages', 'lifecycle'] });
      const it = (sub as unknown as AsyncIterable<{ method: string; params: { namespace: string[]; data: any } }>)[
        Symbol.asyncIterator
      ]();
      const text = 'through the proxy';
      await thread.run.start({ input: { text, messages: [{ role: 'user', content: 'go' }] } });
      const tokens: string[] = [];
      for (;;) {
        const { value: e } = await it.next();
        if (e.method === 'messages' && e.params.data.event === 'content-block-delta')
          tokens.push(e.params.data.delta.text);
        if (e.method === 'lifecycle' && !e.params.namespace.length && e.params.data.event === 'completed') break;
      }
      expect(tokens).toEqual([...text]);
    } finally {
      await thread.close();
    }
    await expect.poll(() => inUse, { timeout: 10_000 }).toBe(0);
  });

  it("relays the agent server's refusal, and refuses an unknown deployment", async () => {
    const handshake = (path: string, protocols: string[]) =>
      new Promise<{ status?: number; body?: string; open?: boolean }>((resolve) => {
        const ws = new WebSocket(`${base.replace('http', 'ws')}${path}`, protocols);
        ws.once('unexpected-response', (_req, res) => {
          let body = '';
          res.on('data', (c: Buffer) => (body += c.toString()));
          res.on('end', () => resolve({ status: res.statusCode, body }));
        });
        ws.once('open', () => {
          resolve({ open: true });
          ws.close();
        });
        ws.once('error', () => undefined);
      });
    const noKey = await handshake('/deployments/dep-1/threads/t1/stream/events', ['agentplane']);
    expect(noKey.status).toBe(401);
    expect(noKey.body).toContain('API key');
    expect((await handshake('/deployments/dep-2/threads/t1/stream/events', [])).status).toBe(404);
    expect((await handshake('/elsewhere', [])).status).toBe(404);
    expect(
      await handshake(`/deployments/dep-1/threads/${crypto.randomUUID()}/stream/events`, [
        'agentplane',
        `x-api-key.${KEY}`,
      ]),
    ).toEqual({
      open: true,
    });
    await expect.poll(() => inUse, { timeout: 10_000 }).toBe(0);
  });

  it("on a deployment's own origin: a platform key in a subprotocol is refused before the agent, a restart is a 503", async () => {
    const ADMIN = 'the-bootstrap-key-0123456789';
    let asked = 0;
    let restarting = false;
    let checkFails = false;
    const port = Number(new URL(agent.url).port);
    const origin = createFrontServer((_req, res) => res.end());
    const options = {
      resolve: async (): Promise<Backend | { unavailable: string; retryAfterSecs: number }> => {
        asked++;
        return restarting
          ? { unavailable: 'its agent server is restarting', retryAfterSecs: 3 }
          : { port, tenant: 'ws-1', acquire: () => () => undefined };
      },
      deploymentAt: () => 'dep-1',
      refuse: async (_tenant: string, req: { headers: Record<string, unknown> }) => {
        if (checkFails) throw new Error('the key store did not answer');
        return credentialValues(req.headers as never).includes(ADMIN) ? 'platform key' : undefined;
      },
    };
    origin.on('upgrade', deploymentUpgrades(options));
    await new Promise<void>((r) => origin.listen(0, '127.0.0.1', r));
    const at = `ws://127.0.0.1:${(origin.address() as { port: number }).port}`;
    const handshake = (protocols: string[]) =>
      new Promise<{ status?: number; retryAfter?: string; open?: boolean }>((resolve) => {
        const ws = new WebSocket(`${at}/threads/${crypto.randomUUID()}/stream/events`, protocols);
        ws.once('unexpected-response', (_req, res) => {
          res.resume();
          resolve({ status: res.statusCode, retryAfter: res.headers['retry-after'] as string | undefined });
        });
        ws.once('open', () => {
          resolve({ open: true });
          ws.close();
        });
        ws.once('error', () => undefined);
      });
    try {
      // The key the agent knows opens the socket on the origin's own path (no /deployments/<id> prefix).
      expect(await handshake(['agentplane', `x-api-key.${KEY}`])).toEqual({ open: true });
      // A platform key, here in the subprotocol a browser would use, never reaches the agent server: the proxy's 403
      // (the agent server answers an unknown key with 401).
      expect((await handshake(['agentplane', `x-api-key.${ADMIN}`])).status).toBe(403);
      expect((await handshake(['agentplane', `bearer.${ADMIN}`])).status).toBe(403);
      restarting = true;
      expect(await handshake(['agentplane', `x-api-key.${KEY}`])).toEqual({ status: 503, retryAfter: '3' });
      // A credential check that could not be made is a 503 too (come back shortly), not a 502.
      restarting = false;
      checkFails = true;
      expect(await handshake(['agentplane', `x-api-key.${KEY}`])).toEqual({ status: 503, retryAfter: '2' });
      expect(asked).toBe(5);
    } finally {
      origin.closeAllConnections();
      await new Promise((r) => origin.close(r));
    }
  });
});

// langgraph.json "http" switches and auth.openapi: disable_meta (every meta route, /ok stays), disable_ui,
// disable_mcp and disable_a2a (the agent protocols' routes; the API stays),
// disable_webhooks (a real process: no delivery reaches a listening receiver), and the security schemes and
// per-route requirements /openapi.json declares.
import { mkdtempSync, rmSync } from 'node:fs';
import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { Client } from '@langchain/langgraph-sdk';
import type { FastifyInstance } from 'fastify';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { buildApp } from '../../../src/agent-server/app.ts';
import { loadGraphs } from '../../../src/agent-server/graphs/index.ts';
import { RunEngine } from '../../../src/agent-server/runs/engine.ts';
import { openEmbeddedStorage } from '../../../src/agent-server/storage/embedded/index.ts';
import { silentLogger } from '../../../src/lib/logger.ts';
import { FIXTURE_CONFIG } from '../helpers/harness.ts';
import { startServerProcess } from '../helpers/process.ts';

const fixture = (name: string) => new URL(`../fixtures/http-settings/${name}`, import.meta.url).pathname;
const dirs: string[] = [];
afterAll(() => {
  for (const d of dirs) rmSync(d, { recursive: true, force: true });
});

/** The app of a langgraph.json, not listening (app.inject). */
async function appOf(configPath: string): Promise<FastifyInstance> {
  const logger = silentLogger();
  const dir = mkdtempSync(join(tmpdir(), 'ap-http-settings-'));
  dirs.push(dir);
  const graphs = await loadGraphs(configPath, { logger });
  const storage = openEmbeddedStorage({ dataDir: dir });
  const engine = new RunEngine({ storage, graphs, logger, concurrency: 2, runTimeoutMs: 30_000 });
  const app = await buildApp({ storage, graphs, engine, logger });
  app.addHook('onClose', async () => storage.close());
  return app;
}

describe('disable_meta and disable_ui', () => {
  let off: FastifyInstance;
  let on: FastifyInstance;
  beforeAll(async () => {
    off = await appOf(fixture('langgraph.off.json'));
    on = await appOf(FIXTURE_CONFIG);
  });
  afterAll(async () => {
    await off?.close();
    await on?.close();
  });

  it('answer 404 on /info, /metrics, /openapi.json and /docs; /ok still answers', async () => {
    for (const url of ['/info', '/metrics', '/openapi.json', '/docs', '/docs/json']) {
      expect((await on.inject({ url })).statusCode, `${url} with meta on`).not.toBe(404);
      const res = await off.inject({ url });
      expect(res.statusCode, url).toBe(404);
      expect(res.json()).toEqual({ detail: `Not found: GET ${url}` });
    }
    expect((await off.inject({ url: '/ok' })).json()).toEqual({ ok: true });
  });

  it('a server given no --activity-token-file tells its activity to nobody (404), whatever credential is sent', async () => {
    for (const headers of [{}, { authorization: 'Bearer anything' }]) {
      const res = await on.inject({ url: '/ok?activity=1', headers });
      expect(res.statusCode).toBe(404);
      expect(res.json().detail).toContain('--activity-token-file');
      expect(res.body).not.toContain('open_requests');
    }
  });

  it('switch the /ui routes off', async () => {
    const served = await on.inject({ url: '/ui/counter/entry.js' });
    const disabled = await off.inject({ url: '/ui/counter/entry.js' });
    expect(disabled.statusCode).toBe(404);
    expect(disabled.json()).toEqual({ detail: 'Not found: GET /ui/counter/entry.js' });
    expect(served.json()).not.toEqual(disabled.json());
    const post = await off.inject({ method: 'POST', url: '/ui/counter', payload: { name: 'x' } });
    expect(post.json()).toEqual({ detail: 'Not found: POST /ui/counter' });
  });
});

describe('disable_mcp and disable_a2a', () => {
  let off: FastifyInstance;
  let on: FastifyInstance;
  beforeAll(async () => {
    off = await appOf(fixture('langgraph.protocols-off.json'));
    on = await appOf(FIXTURE_CONFIG);
  });
  afterAll(async () => {
    await off?.close();
    await on?.close();
  });

  it('answer 404 on /mcp while the REST API keeps working', async () => {
    const ping = { method: 'POST' as const, url: '/mcp', payload: { jsonrpc: '2.0', id: 1, method: 'ping' } };
    expect((await on.inject(ping)).json()).toEqual({ jsonrpc: '2.0', id: 1, result: {} });
    const res = await off.inject(ping);
    expect(res.statusCode).toBe(404);
    expect(res.json()).toEqual({ detail: 'Not found: POST /mcp' });
    const search = await off.inject({ method: 'POST', url: '/assistants/search', payload: {} });
    expect(search.statusCode).toBe(200);
  });

  it('answer 404 on /a2a/{assistant_id} and both agent card paths', async () => {
    const requests = [
      { method: 'GET' as const, url: '/a2a/counter/.well-known/agent-card.json' },
      { method: 'GET' as const, url: '/.well-known/agent-card.json?assistant_id=counter' },
      {
        method: 'POST' as const,
        url: '/a2a/counter',
        payload: { jsonrpc: '2.0', id: 1, method: 'tasks/get', params: {} },
      },
    ];
    for (const r of requests) {
      const res = await off.inject(r);
      expect(res.statusCode, r.url).toBe(404);
      expect(res.json()).toEqual({ detail: `Not found: ${r.method} ${r.url}` });
      // With A2A on the routes answer themselves (this app has no assistants: the agent is not found).
      expect((await on.inject(r)).json(), `${r.url} with A2A on`).not.toEqual(res.json());
    }
  });
});

it('disable_runs switches runs off for MCP and A2A too: no tool call or message starts one', async () => {
  // Their runs are made in-process, not through the routes (http/as-caller.ts): the switch must hold there too.
  const app = await appOf(fixture('langgraph.runs-off.json'));
  try {
    const made = await app.inject({
      method: 'POST',
      url: '/assistants',
      payload: { graph_id: 'counter', name: 'counter' },
    });
    const assistantId = (made.json() as { assistant_id: string }).assistant_id;
    const call = await app.inject({
      method: 'POST',
      url: '/mcp',
      payload: { jsonrpc: '2.0', id: 1, method: 'tools/call', params: { name: 'counter', arguments: {} } },
    });
    expect(call.json()).toMatchObject({ id: 1, error: { code: -32602, data: { status: 404 } } });
    expect(call.json().error.message).toContain('Not found: POST /threads/');
    const send = await app.inject({
      method: 'POST',
      url: `/a2a/${assistantId}`,
      payload: {
        jsonrpc: '2.0',
        id: 2,
        method: 'SendMessage',
        params: { message: { messageId: 'm', role: 'ROLE_USER', parts: [{ data: {} }] } },
      },
    });
    expect(send.json()).toMatchObject({ id: 2, error: { code: -32602 } });
    expect(send.json().error.message).toContain('Not found: POST /threads/');
    // Nothing was run: no thread was made for either.
    const threads = await app.inject({ method: 'POST', url: '/threads/search', payload: {} });
    expect(threads.json()).toEqual([]);
    // The rest of MCP still answers: the tools are listed.
    const list = await app.inject({
      method: 'POST',
      url: '/mcp',
      payload: { jsonrpc: '2.0', id: 3, method: 'tools/list' },
    });
    expect(list.json().result.tools.map((t: { name: string }) => t.name)).toEqual(['counter']);
  } finally {
    await app.close();
  }
});

it('auth.openapi: /openapi.json declares the security schemes, the default requirement and per-route ones', async () => {
  const app = await appOf(fixture('langgraph.openapi.json'));
  try {
    const doc = (await app.inject({ url: '/openapi.json' })).json() as {
      components: { securitySchemes: Record<string, unknown> };
      security: unknown;
      paths: Record<string, Record<string, { security?: unknown }>>;
    };
    expect(doc.components.securitySchemes).toEqual({
      bearer: { type: 'http', scheme: 'bearer', bearerFormat: 'JWT' },
      apiKey: { type: 'apiKey', in: 'header', name: 'X-Api-Key' },
    });
    expect(doc.security).toEqual([{ bearer: [] }]);
    expect(doc.paths['/threads/{thread_id}']!.get!.security).toEqual([{ apiKey: [] }]);
    expect(doc.paths['/threads/{thread_id}']!.patch!.security).toEqual([{ bearer: ['write'] }]);
    expect(doc.paths['/threads/{thread_id}']!.delete!.security).toBeUndefined();
    expect(doc.paths['/no/such/route']).toBeUndefined();
  } finally {
    await app.close();
  }
});

describe('disable_webhooks', { timeout: 60_000 }, () => {
  let receiver: Server;
  const received: string[] = [];
  beforeAll(async () => {
    receiver = createServer((req, res) => {
      received.push(req.url ?? '');
      res.writeHead(200).end();
    });
    await new Promise<void>((r) => receiver.listen(0, '127.0.0.1', r));
  });
  afterAll(() => new Promise((r) => receiver.close(r)));

  it('accepts a run with a webhook and never calls it', async () => {
    const dir = mkdtempSync(join(tmpdir(), 'ap-http-settings-'));
    dirs.push(dir);
    const hook = `http://127.0.0.1:${(receiver.address() as AddressInfo).port}/hook`;
    const server = await startServerProcess([
      '--config',
      fixture('langgraph.off.json'),
      '--data-dir',
      dir,
      '--webhook-allow',
      '127.0.0.1',
    ]);
    try {
      const client = new Client({ apiUrl: server.url, callerOptions: { maxRetries: 0 } });
      const t = await client.threads.create();
      const run = await client.runs.create(t.thread_id, 'counter', { input: {}, webhook: hook });
      await client.runs.join(t.thread_id, run.run_id);
      expect((await client.runs.get(t.thread_id, run.run_id)).status).toBe('success');
      // Deliveries start as the run ends; give one every chance to arrive.
      await new Promise((r) => setTimeout(r, 1500));
      expect(received).toEqual([]);
    } finally {
      await server.stop();
    }
  });
});

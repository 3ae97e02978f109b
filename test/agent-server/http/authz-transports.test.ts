// One authorisation path per action, whatever the transport: every route of the API and every protocol command,
// tried as another user (custom auth: Bob on Alice's records) and as another workspace (a control-plane key that is
// not this deployment's), over REST, POST /threads/{id}/commands and a protocol WebSocket. The route list is the
// server's own OpenAPI document, so a route added without a row here fails the test. A real server on a port,
// real storage, the real `ws` client; the users' side through the real SDK.
import { randomUUID } from 'node:crypto';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { request as httpRequest } from 'node:http';
import type { AddressInfo } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { Client } from '@langchain/langgraph-sdk';
import type { FastifyInstance } from 'fastify';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import WebSocket from 'ws';
import { buildApp } from '../../../src/agent-server/app.ts';
import { hashApiKey, watchKeyHashFile, type KeyVerifier } from '../../../src/agent-server/http/api-keys.ts';
import { loadGraphs } from '../../../src/agent-server/graphs/index.ts';
import { RunEngine } from '../../../src/agent-server/runs/engine.ts';
import { ensureSystemAssistants } from '../../../src/agent-server/server.ts';
import { openEmbeddedStorage } from '../../../src/agent-server/storage/embedded/index.ts';
import type { EngineStorage } from '../../../src/agent-server/storage/ports/run-queue.ts';
import { silentLogger } from '../../../src/lib/logger.ts';

const CONFIG = new URL('../fixtures/auth-transports/langgraph.json', import.meta.url).pathname;
const SECRET = 'alice-secret-5d1e';
const OWN_KEY = 'apk_this-workspace-key-0123456789';
const OTHER_KEY = 'apk_another-workspace-key-0123456789';
const ALICE = { authorization: 'Bearer token-alice' };
const BOB = { authorization: 'Bearer token-bob' };

interface Ids {
  thread: string;
  assistant: string;
  run: string;
  cron: string;
}

/**
 * How Bob must be answered on Alice's records: 404 as for an id that does not exist, 409 for a create naming her
 * id, `empty` (a list or count with none of hers), `own` (the request acts on Bob's own namespace or records and
 * Alice's stay untouched), `open` (nothing user-scoped: the server's description, health, metrics, UI assets).
 */
type Expect = 404 | 409 | 'empty' | 'own' | 'open';
type Row = [route: string, expect: Expect, probe: (ids: Ids) => { path: string; body?: unknown }];

const ROWS: Row[] = [
  ['GET /ok', 'open', () => ({ path: '/ok' })],
  ['GET /info', 'open', () => ({ path: '/info' })],
  ['GET /metrics', 'open', () => ({ path: '/metrics' })],
  ['POST /assistants', 409, (i) => ({ path: '/assistants', body: { assistant_id: i.assistant, graph_id: 'hitl' } })],
  ['POST /assistants/search', 'empty', () => ({ path: '/assistants/search', body: { metadata: { tag: SECRET } } })],
  ['POST /assistants/count', 'empty', () => ({ path: '/assistants/count', body: { metadata: { tag: SECRET } } })],
  ['GET /assistants/{assistant_id}', 404, (i) => ({ path: `/assistants/${i.assistant}` })],
  ['PATCH /assistants/{assistant_id}', 404, (i) => ({ path: `/assistants/${i.assistant}`, body: { name: 'bob' } })],
  ['DELETE /assistants/{assistant_id}', 404, (i) => ({ path: `/assistants/${i.assistant}` })],
  ['GET /assistants/{assistant_id}/graph', 404, (i) => ({ path: `/assistants/${i.assistant}/graph` })],
  ['GET /assistants/{assistant_id}/schemas', 404, (i) => ({ path: `/assistants/${i.assistant}/schemas` })],
  ['GET /assistants/{assistant_id}/subgraphs', 404, (i) => ({ path: `/assistants/${i.assistant}/subgraphs` })],
  [
    'GET /assistants/{assistant_id}/subgraphs/{namespace}',
    404,
    (i) => ({ path: `/assistants/${i.assistant}/subgraphs/ask` }),
  ],
  ['POST /assistants/{assistant_id}/versions', 404, (i) => ({ path: `/assistants/${i.assistant}/versions`, body: {} })],
  [
    'POST /assistants/{assistant_id}/latest',
    404,
    (i) => ({ path: `/assistants/${i.assistant}/latest`, body: { version: 1 } }),
  ],
  ['POST /threads', 409, (i) => ({ path: '/threads', body: { thread_id: i.thread, if_exists: 'do_nothing' } })],
  ['POST /threads/search', 'empty', () => ({ path: '/threads/search', body: { metadata: { topic: SECRET } } })],
  ['POST /threads/count', 'empty', () => ({ path: '/threads/count', body: { metadata: { topic: SECRET } } })],
  ['POST /threads/prune', 'own', (i) => ({ path: '/threads/prune', body: { thread_ids: [i.thread] } })],
  ['GET /threads/{thread_id}', 404, (i) => ({ path: `/threads/${i.thread}` })],
  ['PATCH /threads/{thread_id}', 404, (i) => ({ path: `/threads/${i.thread}`, body: { metadata: { x: 1 } } })],
  ['DELETE /threads/{thread_id}', 404, (i) => ({ path: `/threads/${i.thread}` })],
  ['POST /threads/{thread_id}/copy', 404, (i) => ({ path: `/threads/${i.thread}/copy`, body: {} })],
  ['GET /threads/{thread_id}/state', 404, (i) => ({ path: `/threads/${i.thread}/state` })],
  ['POST /threads/{thread_id}/state', 404, (i) => ({ path: `/threads/${i.thread}/state`, body: { values: {} } })],
  ['PATCH /threads/{thread_id}/state', 404, (i) => ({ path: `/threads/${i.thread}/state`, body: { metadata: {} } })],
  [
    'GET /threads/{thread_id}/state/{checkpoint_id}',
    404,
    (i) => ({ path: `/threads/${i.thread}/state/${randomUUID()}` }),
  ],
  [
    'POST /threads/{thread_id}/state/checkpoint',
    404,
    (i) => ({ path: `/threads/${i.thread}/state/checkpoint`, body: { checkpoint: {} } }),
  ],
  ['GET /threads/{thread_id}/history', 404, (i) => ({ path: `/threads/${i.thread}/history` })],
  ['POST /threads/{thread_id}/history', 404, (i) => ({ path: `/threads/${i.thread}/history`, body: {} })],
  ['GET /threads/{thread_id}/stream', 404, (i) => ({ path: `/threads/${i.thread}/stream` })],
  [
    'POST /threads/{thread_id}/stream/events',
    404,
    (i) => ({ path: `/threads/${i.thread}/stream/events`, body: { channels: ['values'] } }),
  ],
  // A plain GET of the WebSocket endpoint (its upgrade is probed below).
  ['GET /threads/{thread_id}/stream/events', 404, (i) => ({ path: `/threads/${i.thread}/stream/events` })],
  [
    'POST /threads/{thread_id}/commands',
    404,
    (i) => ({ path: `/threads/${i.thread}/commands`, body: { id: 1, method: 'state.get' } }),
  ],
  ['GET /threads/{thread_id}/runs', 404, (i) => ({ path: `/threads/${i.thread}/runs` })],
  [
    'POST /threads/{thread_id}/runs',
    404,
    (i) => ({ path: `/threads/${i.thread}/runs`, body: { assistant_id: 'counter', input: {} } }),
  ],
  [
    'POST /threads/{thread_id}/runs/wait',
    404,
    (i) => ({ path: `/threads/${i.thread}/runs/wait`, body: { assistant_id: 'counter', input: {} } }),
  ],
  [
    'POST /threads/{thread_id}/runs/stream',
    404,
    (i) => ({ path: `/threads/${i.thread}/runs/stream`, body: { assistant_id: 'counter', input: {} } }),
  ],
  [
    'POST /threads/{thread_id}/runs/crons',
    404,
    (i) => ({ path: `/threads/${i.thread}/runs/crons`, body: { assistant_id: 'counter', schedule: '0 0 1 1 *' } }),
  ],
  ['GET /threads/{thread_id}/runs/{run_id}', 404, (i) => ({ path: `/threads/${i.thread}/runs/${i.run}` })],
  ['DELETE /threads/{thread_id}/runs/{run_id}', 404, (i) => ({ path: `/threads/${i.thread}/runs/${i.run}` })],
  ['GET /threads/{thread_id}/runs/{run_id}/join', 404, (i) => ({ path: `/threads/${i.thread}/runs/${i.run}/join` })],
  [
    'GET /threads/{thread_id}/runs/{run_id}/stream',
    404,
    (i) => ({ path: `/threads/${i.thread}/runs/${i.run}/stream` }),
  ],
  [
    'POST /threads/{thread_id}/runs/{run_id}/cancel',
    404,
    (i) => ({ path: `/threads/${i.thread}/runs/${i.run}/cancel`, body: {} }),
  ],
  // Runs and crons naming Alice's assistant (on Bob's own thread where one is needed).
  ['POST /runs', 404, (i) => ({ path: '/runs', body: { assistant_id: i.assistant, input: {} } })],
  ['POST /runs/wait', 404, (i) => ({ path: '/runs/wait', body: { assistant_id: i.assistant, input: {} } })],
  ['POST /runs/stream', 404, (i) => ({ path: '/runs/stream', body: { assistant_id: i.assistant, input: {} } })],
  ['POST /runs/batch', 404, (i) => ({ path: '/runs/batch', body: [{ assistant_id: i.assistant, input: {} }] })],
  ['GET /runs/{run_id}/stream', 404, (i) => ({ path: `/runs/${i.run}/stream` })],
  ['POST /runs/cancel', 404, (i) => ({ path: '/runs/cancel', body: { thread_id: i.thread, run_ids: [i.run] } })],
  [
    'POST /runs/crons',
    404,
    (i) => ({ path: '/runs/crons', body: { assistant_id: i.assistant, schedule: '0 0 1 1 *' } }),
  ],
  ['POST /runs/crons/search', 'empty', (i) => ({ path: '/runs/crons/search', body: { thread_id: i.thread } })],
  ['POST /runs/crons/count', 'empty', (i) => ({ path: '/runs/crons/count', body: { thread_id: i.thread } })],
  ['PATCH /runs/crons/{cron_id}', 404, (i) => ({ path: `/runs/crons/${i.cron}`, body: { enabled: false } })],
  ['DELETE /runs/crons/{cron_id}', 404, (i) => ({ path: `/runs/crons/${i.cron}` })],
  // The store: Bob's requests land in his own namespace, whatever namespace he names.
  ['GET /store/items', 'own', () => ({ path: '/store/items?namespace=notes&key=plan' })],
  [
    'PUT /store/items',
    'own',
    () => ({ path: '/store/items', body: { namespace: ['notes'], key: 'plan', value: { by: 'bob' } } }),
  ],
  ['DELETE /store/items', 'own', () => ({ path: '/store/items', body: { namespace: ['notes'], key: 'plan' } })],
  ['POST /store/items/search', 'own', () => ({ path: '/store/items/search', body: { namespace_prefix: ['notes'] } })],
  ['POST /store/namespaces', 'own', () => ({ path: '/store/namespaces', body: {} })],
  ['POST /ui/{assistant_id}', 404, (i) => ({ path: `/ui/${i.assistant}`, body: { name: 'card' } })],
  ['GET /ui/{graph_id}/{file}', 'open', () => ({ path: '/ui/hitl/entry.js' })],
];

/** Protocol commands: all of @langchain/protocol's, and one nobody knows. */
const COMMANDS = [
  { method: 'run.start', params: { assistant_id: 'hitl', input: { question: 'mine now?' } } },
  { method: 'input.respond', params: { interrupt_id: 'x', response: 'yes' } },
  { method: 'state.get', params: {} },
  { method: 'state.listCheckpoints', params: {} },
  { method: 'state.fork', params: {} },
  { method: 'agent.getTree', params: {} },
  { method: 'input.inject', params: {} },
  { method: 'subscription.subscribe', params: { channels: ['values'] } },
  { method: 'subscription.unsubscribe', params: { subscription_id: 'x' } },
  { method: 'subscription.reconnect', params: {} },
  { method: 'no.such.command', params: {} },
];

describe('one authorisation path per action, whatever the transport', { timeout: 120_000 }, () => {
  let dir: string;
  let storage: EngineStorage;
  let engine: RunEngine;
  let app: FastifyInstance;
  let keys: KeyVerifier;
  let url: string;
  let alice: Ids;
  let bobThread: string;

  const sdk = (token: string) =>
    new Client({
      apiUrl: url,
      apiKey: null,
      defaultHeaders: { Authorization: `Bearer ${token}` },
      callerOptions: { maxRetries: 0 },
    });

  async function call(
    headers: Record<string, string>,
    method: string,
    path: string,
    body?: unknown,
  ): Promise<{ status: number; text: string }> {
    const res = await fetch(`${url}${path}`, {
      method,
      headers: { ...headers, ...(body === undefined ? {} : { 'content-type': 'application/json' }) },
      ...(body === undefined ? {} : { body: JSON.stringify(body) }),
      signal: AbortSignal.timeout(20_000),
    });
    // Streams of Alice's records would not end: what matters is the status and the first bytes.
    const text =
      res.status === 200 && res.headers.get('content-type')?.includes('event-stream') ? '' : await res.text();
    if (!text) await res.body?.cancel();
    return { status: res.status, text };
  }

  /** Opens a protocol WebSocket; resolves with the upgrade's status (101 when it opened) and the socket. */
  function openSocket(threadId: string, protocols: string[], headers: Record<string, string> = {}) {
    const ws = new WebSocket(`${url.replace('http', 'ws')}/threads/${threadId}/stream/events`, protocols, { headers });
    return new Promise<{ status: number; ws: WebSocket }>((resolve) => {
      ws.once('unexpected-response', (_req, res) => {
        resolve({ status: res.statusCode ?? 0, ws });
        res.resume();
        ws.terminate();
      });
      ws.once('open', () => resolve({ status: 101, ws }));
      ws.once('error', () => undefined);
    });
  }

  /** Sends one command on an open socket and waits for its answer. */
  function command(ws: WebSocket, id: number, method: string, params: unknown): Promise<Record<string, unknown>> {
    return new Promise((resolve) => {
      const onMessage = (d: Buffer) => {
        const m = JSON.parse(d.toString()) as Record<string, unknown>;
        if (m.id !== id) return;
        ws.off('message', onMessage);
        resolve(m);
      };
      ws.on('message', onMessage);
      ws.send(JSON.stringify({ id, method, params }));
    });
  }

  beforeAll(async () => {
    dir = mkdtempSync(join(tmpdir(), 'ap-authz-transports-'));
    const keysFile = join(dir, 'keys.json');
    writeFileSync(keysFile, JSON.stringify({ hashes: [hashApiKey(OWN_KEY)] }));
    const logger = silentLogger();
    keys = watchKeyHashFile(keysFile, logger);
    const graphs = await loadGraphs(CONFIG, { logger });
    storage = openEmbeddedStorage({ dataDir: join(dir, 'data') });
    await ensureSystemAssistants(storage, graphs);
    engine = new RunEngine({ storage, graphs, logger, concurrency: 2, runTimeoutMs: 30_000 });
    app = await buildApp({ storage, graphs, engine, logger, keepAliveMs: 200, apiKeys: keys });
    await engine.start();
    await app.listen({ port: 0, host: '127.0.0.1' });
    url = `http://127.0.0.1:${(app.server.address() as AddressInfo).port}`;

    // Alice: a private assistant with a secret in its config, a thread waiting on her answer, a cron, a memory.
    const a = sdk('token-alice');
    const assistant = await a.assistants.create({
      graphId: 'hitl',
      config: { configurable: { secret: SECRET } },
      metadata: { tag: SECRET },
    });
    const thread = await a.threads.create({ metadata: { topic: SECRET } });
    const run = await a.runs.wait(thread.thread_id, assistant.assistant_id, { input: { question: SECRET } });
    const [last] = await a.runs.list(thread.thread_id);
    const cron = await a.crons.createForThread(thread.thread_id, assistant.assistant_id, { schedule: '0 0 1 1 *' });
    await a.store.putItem(['notes'], 'plan', { secret: SECRET });
    expect(run).toMatchObject({ question: SECRET });
    alice = { thread: thread.thread_id, assistant: assistant.assistant_id, run: last!.run_id, cron: cron.cron_id };
    bobThread = (await sdk('token-bob').threads.create()).thread_id;
  });
  afterAll(async () => {
    await engine?.stop(2_000);
    await app?.close();
    await storage?.close();
    rmSync(dir, { recursive: true, force: true });
  });

  it('has a row for every route the server documents', async () => {
    const doc = (await (await fetch(`${url}/openapi.json`, { headers: BOB })).json()) as {
      paths: Record<string, object>;
    };
    const documented = Object.entries(doc.paths).flatMap(([path, ops]) =>
      Object.keys(ops).map((m) => `${m.toUpperCase()} ${path}`),
    );
    expect(documented.filter((r) => !ROWS.some(([name]) => name === r))).toEqual([]);
  });

  it.each(ROWS)('%s: Bob learns and changes nothing of Alice (expected %s)', async (route, expected, probe) => {
    const method = route.split(' ')[0]!;
    const { path, body } = probe(alice);
    const res = await call(BOB, method, path, body);
    expect(res.text).not.toContain(SECRET);
    if (expected === 404 || expected === 409) expect(res.status, res.text).toBe(expected);
    else if (expected === 'empty') {
      expect(res.status, res.text).toBe(200);
      expect([0, []]).toContainEqual(JSON.parse(res.text));
    } else if (expected === 'own') expect(res.status, res.text).toBeLessThan(400);
    // Not user-scoped: answered without authentication (a UI file this fixture lacks is a plain 404).
    else expect([200, 404], res.text).toContain(res.status);
  });

  it.each(ROWS.filter(([, e]) => e !== 'open'))(
    '%s: a key of another workspace is refused before anything runs',
    async (route, _expected, probe) => {
      const method = route.split(' ')[0]!;
      const { path, body } = probe(alice);
      const res = await call({ ...ALICE, 'x-api-key': OTHER_KEY }, method, path, body);
      expect(res.status, res.text).toBe(401);
      expect(res.text).not.toContain(SECRET);
    },
  );

  it("leaves Alice's records as they were", async () => {
    const a = sdk('token-alice');
    expect((await a.assistants.get(alice.assistant)).version).toBe(1);
    expect((await a.threads.get(alice.thread)).metadata).toMatchObject({ topic: SECRET, owner: 'alice' });
    expect((await a.runs.list(alice.thread)).map((r) => r.run_id)).toEqual([alice.run]);
    expect((await a.crons.search({ threadId: alice.thread })).map((c) => c.cron_id)).toEqual([alice.cron]);
    expect((await a.store.getItem(['notes'], 'plan'))?.value).toEqual({ secret: SECRET });
  });

  it.each(COMMANDS)("$method on Alice's thread: 404 over POST /commands, no socket to send it on", async (cmd) => {
    const res = await call(BOB, 'POST', `/threads/${alice.thread}/commands`, { id: 1, ...cmd });
    expect(res.status, res.text).toBe(404);
    expect(res.text).not.toContain(SECRET);
    expect((await openSocket(alice.thread, ['agentplane', 'bearer.token-bob'])).status).toBe(404);
    expect(
      (await openSocket(alice.thread, ['agentplane', 'bearer.token-alice', `x-api-key.${OTHER_KEY}`])).status,
    ).toBe(401);
  });

  it('a caller who may read a thread but not start runs on it cannot start one by forking it or injecting a message', async () => {
    const VIEWER = { authorization: 'Bearer token-viewer' };
    const own = await sdk('token-viewer').threads.create();
    // Reading is allowed: state.get answers on the viewer's own thread.
    const read = await call(VIEWER, 'POST', `/threads/${own.thread_id}/commands`, { id: 1, method: 'state.get' });
    expect(read.status, read.text).toBe(200);
    for (const cmd of [
      { id: 2, method: 'run.start', params: { assistant_id: 'hitl', input: { question: 'q' } } },
      { id: 3, method: 'state.fork', params: { checkpoint_id: randomUUID() } },
      { id: 4, method: 'input.inject', params: { namespace: [], message: { role: 'user', content: 'q' } } },
    ]) {
      const http = await call(VIEWER, 'POST', `/threads/${own.thread_id}/commands`, cmd);
      expect(http.status, `${cmd.method}: ${http.text}`).toBe(403);
      expect(http.text).toContain('viewers may not start runs');
      const { status, ws } = await openSocket(own.thread_id, ['agentplane', 'bearer.token-viewer']);
      expect(status).toBe(101);
      try {
        expect(await command(ws, cmd.id, cmd.method, cmd.params)).toMatchObject({ type: 'error', id: cmd.id });
      } finally {
        ws.close();
      }
    }
    expect(await sdk('token-viewer').runs.list(own.thread_id)).toEqual([]);
  });

  it("run.start naming Alice's assistant on Bob's own thread: not found on every transport, nothing runs", async () => {
    const start = { id: 7, method: 'run.start', params: { assistant_id: alice.assistant, input: { question: 'q' } } };
    const http = await call(BOB, 'POST', `/threads/${bobThread}/commands`, start);
    expect(http.status, http.text).toBe(404);
    const { status, ws } = await openSocket(bobThread, ['agentplane', 'bearer.token-bob']);
    expect(status).toBe(101);
    try {
      const answer = await command(ws, 7, 'run.start', start.params);
      expect(answer).toMatchObject({ type: 'error', id: 7 });
      expect(JSON.stringify(answer)).toContain('Assistant not found');
      // The same answer as for an assistant that does not exist.
      const unknown = randomUUID();
      const other = await command(ws, 8, 'run.start', { ...start.params, assistant_id: unknown });
      expect({ ...answer, id: 8, message: String(answer.message).replace(alice.assistant, 'ID') }).toEqual({
        ...other,
        message: String(other.message).replace(unknown, 'ID'),
      });
    } finally {
      ws.close();
    }
    expect(await sdk('token-bob').runs.list(bobThread)).toEqual([]);
  });

  it("subscription.reconnect naming Alice's run on Bob's own socket: no_such_run, none of her events", async () => {
    const { status, ws } = await openSocket(bobThread, ['agentplane', 'bearer.token-bob']);
    expect(status).toBe(101);
    const seen: string[] = [];
    ws.on('message', (d: Buffer) => seen.push(d.toString()));
    try {
      // A subscription id made up to carry every channel, as this server's ids carry their filter.
      const filter = { channels: ['values', 'updates', 'messages', 'lifecycle', 'input', 'checkpoints', 'tasks'] };
      const forged = `${randomUUID()}.${Buffer.from(JSON.stringify(filter)).toString('base64url')}`;
      const answer = await command(ws, 1, 'subscription.reconnect', {
        run_id: alice.run,
        last_event_id: '0',
        subscriptions: [forged],
      });
      expect(answer).toMatchObject({ type: 'error', id: 1, error: 'no_such_run' });
      // Anything the socket was to send has gone out before the answer to a later command.
      expect(await command(ws, 2, 'state.get', {})).toMatchObject({ type: 'success', id: 2 });
    } finally {
      ws.close();
    }
    expect(seen.join('\n')).not.toContain(SECRET);
    expect(seen.map((m) => (JSON.parse(m) as { type: string }).type)).toEqual(['error', 'success']);
  });

  it("the graphs' system assistants: every user reads and runs them on every transport, none changes them", async () => {
    const bob = sdk('token-bob');
    expect((await bob.assistants.get('counter')).metadata).toEqual({ created_by: 'system' });
    const thread = (await bob.threads.create()).thread_id;
    expect(await bob.runs.wait(thread, 'counter', { input: {} })).toMatchObject({ count: 11 });
    const start = { id: 1, method: 'run.start', params: { assistant_id: 'counter', input: {} } };
    expect((await call(BOB, 'POST', `/threads/${thread}/commands`, start)).status).toBe(200);
    const { status, ws } = await openSocket(thread, ['agentplane', 'bearer.token-bob']);
    expect(status).toBe(101);
    try {
      expect(await command(ws, 2, 'run.start', start.params)).toMatchObject({ type: 'success', id: 2 });
    } finally {
      ws.close();
    }
    expect((await bob.runs.list(thread)).length).toBe(3);
    expect((await call(BOB, 'PATCH', '/assistants/counter', { name: 'mine' })).status).toBe(404);
    expect((await call(BOB, 'DELETE', '/assistants/counter')).status).toBe(404);
    expect((await sdk('token-alice').assistants.get('counter')).name).toBe('counter');
  });

  it('a repeated X-Api-Key is a 400, whichever copy holds the foreign key', async () => {
    for (const values of [
      ['junk', OTHER_KEY],
      [OWN_KEY, OTHER_KEY],
    ]) {
      const status = await new Promise<number>((resolve, reject) => {
        const req = httpRequest(`${url}/threads/${bobThread}`, { headers: { ...BOB, 'x-api-key': values } }, (res) => {
          res.resume();
          resolve(res.statusCode ?? 0);
        });
        req.on('error', reject);
        req.end();
      });
      expect(status).toBe(400);
    }
  });
});

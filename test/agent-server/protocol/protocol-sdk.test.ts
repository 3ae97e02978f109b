// The thread streaming protocol through the real SDK 1.15 (client.threads.stream / ThreadStream) against a real
// server process, on both stores, over SSE and over a WebSocket: values, messages token by token (content-block
// deltas), a tool call, a custom event, an interrupt answered with input.respond, subgraph namespaces and a run
// forked from a checkpoint (forkFrom, and the state.fork command). The server requires an API key: the SSE transport sends it as a header, the
// WebSocket (which cannot carry headers in a browser, and to which the SDK sends none) as a subprotocol. Refusals
// are tried the way a caller without the key, or with bad commands, would.
import { mkdtempSync, renameSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { Client } from '@langchain/langgraph-sdk-v1';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import WebSocket from 'ws';
import { hashApiKey } from '../../../src/agent-server/http/api-keys.ts';
import { createTestDatabase } from '../helpers/pg.ts';
import { EXECUTOR_THREAD, startServerProcess, type ServerProc } from '../helpers/process.ts';
import { isRootEnd, untilEnd, type ProtocolEvent as Ev } from '../helpers/protocol-events.ts';

const CONFIG = new URL('../../fixtures/protocol/langgraph.json', import.meta.url).pathname;
const KEY = 'ap_protocol_test_key_0123456789';

type Thread = ReturnType<Client['threads']['stream']>;

const deltas = (events: Ev[]) =>
  events
    .filter((e) => e.method === 'messages' && e.params.data.event === 'content-block-delta')
    .map((e) => (e.params.data.delta as { text: string }).text);

const ALL = ['values', 'updates', 'messages', 'tools', 'custom', 'lifecycle', 'input', 'checkpoints'] as const;

describe.each(['embedded', 'postgres'] as const)('thread protocol on %s storage', { timeout: 120_000 }, (store) => {
  let dir: string;
  let server: ServerProc;
  let drop: (() => Promise<void>) | undefined;

  beforeAll(async () => {
    dir = mkdtempSync(join(tmpdir(), 'ap-protocol-'));
    const keys = join(dir, 'keys.json');
    writeFileSync(`${keys}.tmp`, JSON.stringify({ hashes: [hashApiKey(KEY)] }));
    renameSync(`${keys}.tmp`, keys);
    const storeArgs: string[] = [];
    if (store === 'postgres') {
      const db = await createTestDatabase();
      drop = db.drop;
      storeArgs.push('--database-url', db.url);
    } else storeArgs.push('--data-dir', join(dir, 'data'));
    server = await startServerProcess([...EXECUTOR_THREAD, '--config', CONFIG, '--auth-keys-file', keys, ...storeArgs]);
  });
  afterAll(async () => {
    await server?.stop();
    await drop?.();
    rmSync(dir, { recursive: true, force: true });
  });

  function open(transport: 'sse' | 'websocket', graph = 'agent', threadId?: string): Thread {
    const options = { assistantId: graph, reconnectDelayMs: () => 50 };
    if (transport === 'sse') {
      const client = new Client({ apiUrl: server.url, apiKey: KEY, callerOptions: { maxRetries: 0 } });
      return threadId
        ? client.threads.stream(threadId, { ...options, transport: 'sse' })
        : client.threads.stream({ ...options, transport: 'sse' });
    }
    // No apiKey on this client: the SDK's WebSocket transport refuses headers; the key rides as a subprotocol.
    const client = new Client({ apiUrl: server.url, apiKey: null as never });
    const ws = {
      ...options,
      transport: 'websocket' as const,
      webSocketFactory: (url: string) => new WebSocket(url, ['agentplane', `x-api-key.${KEY}`]) as never,
    };
    return threadId ? client.threads.stream(threadId, ws) : client.threads.stream(ws);
  }

  it.each(['sse', 'websocket'] as const)(
    'over %s: values, tokens one by one, a tool call, a custom event, an interrupt answered',
    async (transport) => {
      const thread = open(transport);
      try {
        const sub = await thread.subscribe({ channels: [...ALL] });
        const it = (sub as unknown as AsyncIterable<Ev>)[Symbol.asyncIterator]();
        const text = 'Streaming, token by token!';
        const started = await thread.run.start({
          input: { text, sleep_ms: 5, city: 'Paris', ask: true, messages: [{ role: 'user', content: 'go' }] },
        });
        expect(started).toMatchObject({ run_id: expect.any(String) });
        const first = await untilEnd(it);

        // One content-block delta per token, in order, each the model's next character.
        expect(deltas(first)).toEqual([...text]);
        const msg = first.filter((e) => e.method === 'messages').map((e) => e.params.data.event);
        expect(msg[0]).toBe('message-start');
        expect(msg.at(-1)).toBe('message-finish');
        expect(first.find((e) => e.method === 'custom')!.params.data).toEqual({ payload: { starting: text.length } });
        const tools = first.filter((e) => e.method === 'tools').map((e) => e.params.data);
        expect(tools).toEqual([
          expect.objectContaining({ event: 'tool-started', tool_name: 'weather', tool_call_id: 'call_weather_1' }),
          expect.objectContaining({
            event: 'tool-finished',
            tool_call_id: 'call_weather_1',
            output: expect.objectContaining({ content: 'sunny in Paris' }),
          }),
        ]);
        const asked = first.filter((e) => e.method === 'input.requested');
        expect(asked).toHaveLength(1);
        // value beside payload, for the Python SDKs.
        expect(asked[0]!.params.data).toMatchObject({
          payload: { question: 'Proceed?' },
          value: { question: 'Proceed?' },
        });
        expect(first.at(-1)!.params.data.event).toBe('interrupted');
        expect(thread.interrupted).toBe(true);
        const lastValues = first.filter((e) => e.method === 'values').at(-1)!.params.data;
        expect(lastValues).toMatchObject({ weather: 'sunny in Paris' });
        expect(lastValues).not.toHaveProperty('__interrupt__');

        const pending = thread.interrupts[0]!;
        await thread.input.respond({
          interrupt_id: pending.interruptId,
          namespace: pending.namespace,
          response: 'yes',
        });
        const second = await untilEnd(it);
        expect(second.at(-1)!.params.data.event).toBe('completed');
        // Every client on the thread learns the interrupt was answered, as the resuming run starts.
        const answered = second.filter((e) => e.method === 'input.answered');
        expect(answered.map((e) => e.params.data)).toEqual([{ interrupt_ids: [pending.interruptId] }]);
        expect(second.indexOf(answered[0]!)).toBeLessThan(second.findIndex((e) => e.method === 'values'));
        expect(second.filter((e) => e.method === 'values').at(-1)!.params.data).toMatchObject({ answer: 'yes' });
        const state = (await thread.state.get({ namespace: [] })) as {
          values: Record<string, unknown>;
          checkpoint?: { id: string };
        };
        expect(state.values).toMatchObject({ answer: 'yes', weather: 'sunny in Paris' });
        expect(state.checkpoint?.id).toEqual(expect.any(String));

        // state.listCheckpoints: the thread's checkpoints newest first, the REST history's, paged by `before`.
        type Listed = { checkpoints: Array<{ id: string; timestamp: string; step: number; metadata: unknown }> };
        const page = (await thread.state.listCheckpoints({ limit: 2 })) as unknown as Listed;
        const history = await new Client({ apiUrl: server.url, apiKey: KEY }).threads.getHistory(thread.threadId, {
          limit: 4,
        });
        expect(page.checkpoints.map((c) => c.id)).toEqual(history.slice(0, 2).map((h) => h.checkpoint.checkpoint_id));
        expect(page.checkpoints[0]!.id).toBe(state.checkpoint!.id);
        expect(page.checkpoints[0]!.step).toBeGreaterThan(page.checkpoints[1]!.step);
        expect(page.checkpoints[0]!.timestamp).toBe(history[0]!.created_at);
        const next = (await thread.state.listCheckpoints({
          limit: 2,
          before: page.checkpoints[1]!.id,
        })) as unknown as Listed;
        expect(next.checkpoints.map((c) => c.id)).toEqual(history.slice(2, 4).map((h) => h.checkpoint.checkpoint_id));

        // Each event once, in order, under ids the client can deduplicate by.
        const all = [...first, ...second];
        const seqs = all.map((e) => e.seq!);
        expect(seqs).toEqual([...seqs].sort((a, b) => a - b));
        expect(new Set(all.map((e) => e.event_id)).size).toBe(all.length);
      } finally {
        await thread.close();
      }
    },
  );

  it('carries subgraph namespaces, and a subscription narrowed to one gets only its events', async () => {
    const thread = open('websocket', 'nested');
    try {
      const inner = await thread.subscribe({ channels: ['messages', 'lifecycle'], namespaces: [['inner']] });
      const root = await thread.subscribe({ channels: ['lifecycle'], namespaces: [[]], depth: 0 });
      const text = 'deep';
      await thread.run.start({ input: { text, messages: [{ role: 'user', content: 'go' }] } });
      const rootEvents = await untilEnd((root as unknown as AsyncIterable<Ev>)[Symbol.asyncIterator]());
      expect(rootEvents.map((e) => e.params.data.event)).toEqual(['running', 'completed']);
      const it = (inner as unknown as AsyncIterable<Ev>)[Symbol.asyncIterator]();
      const seen: Ev[] = [];
      // The inner subscription never sees the root's end: read until its own namespace completed.
      while (!seen.some((e) => e.method === 'lifecycle' && e.params.data.event === 'completed')) {
        seen.push((await it.next()).value as Ev);
      }
      for (const e of seen) expect(e.params.namespace[0]).toMatch(/^inner:/);
      expect(seen[0]).toMatchObject({
        method: 'lifecycle',
        params: { data: { event: 'started', graph_name: 'inner' } },
      });
      expect(deltas(seen).join('')).toBe(text);
      // The model ran in the subgraph's node: its messages name the subgraph, then the node's task.
      const m = seen.find((e) => e.method === 'messages')!;
      expect(m.params.namespace).toEqual([expect.stringMatching(/^inner:/), expect.stringMatching(/^talk:/)]);

      // agent.getTree: the run's graph and the subgraph it entered, each with how it ended.
      const { tree } = (await thread.agent.getTree({})) as unknown as {
        tree: { namespace: string[]; status: string; graph_name: string; children?: unknown[] };
      };
      expect(tree).toEqual({
        namespace: [],
        status: 'completed',
        graph_name: 'nested',
        children: [{ namespace: [expect.stringMatching(/^inner:/)], status: 'completed', graph_name: 'inner' }],
      });
      await expect(thread.agent.getTree({ run_id: crypto.randomUUID() })).rejects.toThrow(/no run/);
    } finally {
      await thread.close();
    }
  });

  it('forks a run from an earlier checkpoint (forkFrom)', async () => {
    const thread = open('sse');
    try {
      const sub = await thread.subscribe({ channels: ['checkpoints', 'values', 'lifecycle'] });
      const it = (sub as unknown as AsyncIterable<Ev>)[Symbol.asyncIterator]();
      await thread.run.start({ input: { text: 'once', messages: [{ role: 'user', content: 'go' }] } });
      const first = await untilEnd(it);
      const checkpoints = first.filter((e) => e.method === 'checkpoints').map((e) => e.params.data);
      // The checkpoint after the input, before the model spoke.
      const beforeTalk = checkpoints.find((c) => c.step === 0)!;
      expect(beforeTalk).toMatchObject({ id: expect.any(String) });

      await thread.run.start({ input: null, forkFrom: String(beforeTalk.id) });
      const fork = await untilEnd(it);
      expect(fork.at(-1)!.params.data.event).toBe('completed');
      const forkCheckpoints = fork.filter((e) => e.method === 'checkpoints').map((e) => e.params.data);
      expect(forkCheckpoints[0]).toMatchObject({ parent_id: beforeTalk.id });
      // Replayed from before the answer: one AI message, not two.
      const values = fork.filter((e) => e.method === 'values').at(-1)!.params.data as {
        messages: Array<{ type: string }>;
      };
      expect(values.messages.map((m) => m.type)).toEqual(['human', 'ai']);
    } finally {
      await thread.close();
    }
  });

  it.each(['sse', 'websocket'] as const)(
    'over %s: state.fork runs again from an earlier checkpoint; an unknown checkpoint is no_such_checkpoint',
    async (transport) => {
      const thread = open(transport);
      try {
        const sub = await thread.subscribe({ channels: ['checkpoints', 'lifecycle'] });
        const it = (sub as unknown as AsyncIterable<Ev>)[Symbol.asyncIterator]();
        await thread.run.start({ input: { text: 'once', messages: [{ role: 'user', content: 'go' }] } });
        const first = await untilEnd(it);
        const beforeTalk = first.filter((e) => e.method === 'checkpoints').find((e) => e.params.data.step === 0)!;
        const checkpointId = String(beforeTalk.params.data.id);

        const forked = (await thread.state.fork({ checkpoint_id: checkpointId })) as unknown as {
          run_id: string;
          thread_id: string;
        };
        expect(forked).toEqual({ run_id: expect.any(String), thread_id: thread.threadId });
        // The fork is an ordinary run of the thread, under the id the command answered (the SDK does not follow
        // it on the subscription, which ended with the first run: it is read back over REST).
        const client = new Client({ apiUrl: server.url, apiKey: KEY });
        await client.runs.join(thread.threadId, forked.run_id);
        expect((await client.runs.get(thread.threadId, forked.run_id)).status).toBe('success');
        const [latest] = await client.threads.getHistory<{ messages: Array<{ type: string }> }>(thread.threadId, {
          limit: 1,
        });
        // Replayed from before the answer: one AI message, not two, on a branch of the checkpoint it named.
        expect(latest!.values.messages.map((m) => m.type)).toEqual(['human', 'ai']);
        const branch = await client.threads.getHistory(thread.threadId, { limit: 10 });
        const chain: string[] = [];
        for (let c: (typeof branch)[number] | undefined = branch[0]; c;) {
          chain.push(c.checkpoint.checkpoint_id!);
          const parent = c.parent_checkpoint?.checkpoint_id;
          c = branch.find((b) => b.checkpoint.checkpoint_id === parent);
        }
        // Newest first: the fork's own checkpoints, then the one it named; none of the first run's after it.
        const firstIds = new Set(first.filter((e) => e.method === 'checkpoints').map((e) => String(e.params.data.id)));
        const named = chain.indexOf(checkpointId);
        expect(named).toBeGreaterThan(0);
        expect(chain.slice(0, named).filter((id) => firstIds.has(id))).toEqual([]);

        // A checkpoint id of no checkpoint on this thread: refused, and nothing runs.
        await expect(thread.state.fork({ checkpoint_id: crypto.randomUUID() })).rejects.toThrow(/no checkpoint/);
        expect(await client.runs.list(thread.threadId)).toHaveLength(2);
      } finally {
        await thread.close();
      }
    },
  );

  it.each(['sse', 'websocket'] as const)(
    'over %s: input.inject sends a message while the agent talks; it is the next turn, after the current one',
    async (transport) => {
      const thread = open(transport);
      try {
        const sub = await thread.subscribe({ channels: ['lifecycle', 'values'] });
        const it = (sub as unknown as AsyncIterable<Ev>)[Symbol.asyncIterator]();
        const { run_id: firstRun } = await thread.run.start({
          input: { text: 'first answer', sleep_ms: 20, messages: [{ role: 'user', content: 'go' }] },
        });
        await thread.input.inject({ namespace: [], message: { role: 'user', content: 'and also this' } });
        const first = await untilEnd(it);
        expect(first.at(-1)!.params.data.event).toBe('completed');
        // The SDK ends its subscription with the run it followed: the queued turn is read back over REST.
        const client = new Client({ apiUrl: server.url, apiKey: KEY });
        const runs = await client.runs.list(thread.threadId);
        expect(runs).toHaveLength(2);
        expect(runs[1]!.run_id).toBe(firstRun);
        await client.runs.join(thread.threadId, runs[0]!.run_id);
        expect((await client.runs.get(thread.threadId, runs[0]!.run_id)).status).toBe('success');
        type Content = string | Array<{ text?: string }>;
        const state = await client.threads.getState<{ messages: Array<{ type: string; content: Content }> }>(
          thread.threadId,
        );
        const text = (c: Content) => (typeof c === 'string' ? c : c.map((b) => b.text ?? '').join(''));
        // The message joined the conversation after the answer it interrupted, and the agent answered it.
        expect(state.values.messages.map((m) => [m.type, text(m.content)])).toEqual([
          ['human', 'go'],
          ['ai', 'first answer'],
          ['human', 'and also this'],
          ['ai', 'first answer'],
        ]);

        // Only the root graph takes a message; a message needs a role it knows; nothing runs for those.
        await expect(
          thread.input.inject({ namespace: ['inner:1'], message: { role: 'user', content: 'x' } }),
        ).rejects.toThrow(/only the root graph/);
        await expect(
          thread.input.inject({ namespace: [], message: { role: 'tool', content: 'x' } as never }),
        ).rejects.toThrow(/params\.message\.role/);
        expect(await client.runs.list(thread.threadId)).toHaveLength(2);
      } finally {
        await thread.close();
      }
    },
  );

  it('input.inject on a thread no agent has run on: no_such_run, and no run', async () => {
    const threadId = crypto.randomUUID();
    const res = await fetch(`${server.url}/threads/${threadId}/commands`, {
      method: 'POST',
      headers: { 'content-type': 'application/json', 'x-api-key': KEY },
      body: JSON.stringify({
        id: 1,
        method: 'input.inject',
        params: { namespace: [], message: { role: 'user', content: 'hi' } },
      }),
    });
    expect(res.status).toBe(404);
    expect(await res.json()).toMatchObject({ type: 'error', id: 1, error: 'no_such_run' });
  });

  it('subscription.reconnect: a client back on a new socket gets its subscriptions and what it missed, once', async () => {
    const threadId = crypto.randomUUID();
    const wsUrl = `${server.url.replace('http', 'ws')}/threads/${threadId}/stream/events`;
    const connect = async () => {
      const ws = new WebSocket(wsUrl, ['agentplane', `x-api-key.${KEY}`]);
      const got: Array<Record<string, unknown>> = [];
      ws.on('message', (d: Buffer) => got.push(JSON.parse(d.toString()) as Record<string, unknown>));
      await new Promise((r) => ws.once('open', r));
      const ask = async (id: number, method: string, params: unknown) => {
        ws.send(JSON.stringify({ id, method, params }));
        await expect.poll(() => got.some((m) => m.id === id), { timeout: 20_000 }).toBe(true);
        return got.find((m) => m.id === id)!;
      };
      return { ws, got, ask, events: () => got.filter((m) => m.type === 'event') as unknown as Ev[] };
    };
    const text = 'resumed without a gap';
    const one = await connect();
    const sub = await one.ask(1, 'subscription.subscribe', { channels: ['messages', 'lifecycle'] });
    const subscriptionId = (sub.result as { subscription_id: string }).subscription_id;
    const started = await one.ask(2, 'run.start', {
      assistant_id: 'agent',
      input: { text, sleep_ms: 20, messages: [{ role: 'user', content: 'go' }] },
    });
    const runId = (started.result as { run_id: string }).run_id;
    // The socket drops after a few tokens; the run goes on and ends while the client is away.
    await expect.poll(() => deltas(one.events()).length, { timeout: 20_000 }).toBeGreaterThanOrEqual(3);
    one.ws.terminate();
    const before = [...one.events()];
    await new Client({ apiUrl: server.url, apiKey: KEY }).runs.join(threadId, runId);

    const two = await connect();
    try {
      const answer = await two.ask(1, 'subscription.reconnect', {
        run_id: runId,
        last_event_id: before.at(-1)!.event_id,
        subscriptions: [subscriptionId],
      });
      expect(answer).toMatchObject({
        type: 'success',
        result: { restored: true, current_namespaces: [{ namespace: [], status: 'completed' }] },
      });
      await expect.poll(() => two.events().some(isRootEnd), { timeout: 20_000 }).toBe(true);
      const after = two.events();
      // Only what the client missed, and all of it: the tokens before and after the drop make the whole text.
      expect(after[0]!.seq!).toBeGreaterThan(before.at(-1)!.seq!);
      expect(deltas([...before, ...after]).join('')).toBe(text);
      expect(after.every((e) => ['messages', 'lifecycle'].includes(e.method))).toBe(true);

      // Refusals name the problem: a run of no such id, an id this server never gave out, an id that is no event's.
      const noRun = await two.ask(2, 'subscription.reconnect', { run_id: crypto.randomUUID() });
      expect(noRun).toMatchObject({ type: 'error', error: 'no_such_run' });
      const forged = await two.ask(3, 'subscription.reconnect', { run_id: runId, subscriptions: ['made-up'] });
      expect(forged).toMatchObject({ type: 'error', error: 'no_such_subscription' });
      const badId = await two.ask(4, 'subscription.reconnect', { run_id: runId, last_event_id: 'yesterday' });
      expect(badId).toMatchObject({ type: 'error', error: 'invalid_argument' });
      expect(String(badId.message)).toContain('params.last_event_id');
    } finally {
      two.ws.close();
    }
    // Over HTTP, a stream's `since` does this: the command says so.
    const http = await fetch(`${server.url}/threads/${threadId}/commands`, {
      method: 'POST',
      headers: { 'content-type': 'application/json', 'x-api-key': KEY },
      body: JSON.stringify({ id: 9, method: 'subscription.reconnect', params: { run_id: runId } }),
    });
    expect(http.status).toBe(400);
    expect(((await http.json()) as { message: string }).message).toContain('since');
  });

  it('refuses a WebSocket, SSE stream or command without the key, and never echoes or logs the key', async () => {
    const wsUrl = `${server.url.replace('http', 'ws')}/threads/${crypto.randomUUID()}/stream/events`;
    // A refused client keeps its end open, as an attacker holding sockets would: the server must close it.
    const handshake = (protocols: string[]) =>
      new Promise<{ status?: number; closedByServer?: boolean; protocol?: string }>((resolve) => {
        const ws = new WebSocket(wsUrl, protocols);
        ws.once('unexpected-response', (req, res) => {
          const bound = setTimeout(() => {
            resolve({ status: res.statusCode, closedByServer: false });
            req.destroy();
          }, 15_000);
          res.socket.once('close', () => {
            clearTimeout(bound);
            resolve({ status: res.statusCode, closedByServer: true });
          });
          res.resume();
        });
        ws.once('open', () => {
          resolve({ protocol: ws.protocol });
          ws.close();
        });
        ws.once('error', () => undefined);
      });
    const refused = { status: 401, closedByServer: true };
    expect(await handshake([])).toEqual(refused);
    expect(await handshake(['agentplane', 'x-api-key.wrong-key'])).toEqual(refused);
    expect(await handshake(['agentplane', `x-api-key.${KEY}`.toUpperCase()])).toEqual(refused);
    expect(await handshake(['agentplane', `x-api-key.${KEY}`])).toEqual({ protocol: 'agentplane' });

    const threadUrl = `${server.url}/threads/${crypto.randomUUID()}`;
    const post = (path: string, body: unknown, key?: string) =>
      fetch(`${threadUrl}${path}`, {
        method: 'POST',
        headers: { 'content-type': 'application/json', ...(key ? { 'x-api-key': key } : {}) },
        body: JSON.stringify(body),
      });
    expect((await post('/stream/events', { channels: ['values'] })).status).toBe(401);
    expect((await post('/commands', { id: 1, method: 'run.start', params: { assistant_id: 'agent' } })).status).toBe(
      401,
    );
    // Nothing a caller sent as a credential shows up in the server's log.
    expect(server.output()).not.toContain(KEY);
  });

  it('answers bad commands and filters with a 4xx naming the problem, over HTTP and over the WebSocket', async () => {
    const threadUrl = `${server.url}/threads/${crypto.randomUUID()}`;
    const post = async (path: string, body: unknown) => {
      const res = await fetch(`${threadUrl}${path}`, {
        method: 'POST',
        headers: { 'content-type': 'application/json', 'x-api-key': KEY },
        body: JSON.stringify(body),
      });
      return { status: res.status, body: (await res.json()) as Record<string, unknown> };
    };
    const noAssistant = await post('/commands', { id: 3, method: 'run.start', params: { input: {} } });
    expect(noAssistant.status).toBe(422);
    expect(noAssistant.body).toMatchObject({ type: 'error', id: 3, error: 'invalid_argument' });
    expect(String(noAssistant.body.message)).toContain('params.assistant_id');
    const unknownGraph = await post('/commands', { id: 4, method: 'run.start', params: { assistant_id: 'nope' } });
    expect(unknownGraph.status).toBe(404);
    expect(String(unknownGraph.body.message)).toContain('nope');
    expect((await post('/commands', { id: 5, method: 'run.explode' })).body).toMatchObject({
      error: 'unknown_command',
    });
    expect((await post('/commands', { id: 6, method: 'input.respond', params: { interrupt_id: 'x' } })).status).toBe(
      404,
    );
    expect((await post('/commands', { id: -1, method: 'state.get' })).status).toBe(422);
    const badChannel = await post('/stream/events', { channels: ['values', 'everything'] });
    expect(badChannel.status).toBe(422);
    expect(String(badChannel.body.detail)).toContain('channels.1');
    expect((await post('/stream/events', { channels: [] })).status).toBe(422);
    // A plain GET of the WebSocket endpoint says what it is.
    const plain = await fetch(`${threadUrl}/stream/events`, { headers: { 'x-api-key': KEY } });
    expect(plain.status).toBe(426);

    const ws = new WebSocket(`${threadUrl.replace('http', 'ws')}/stream/events`, ['agentplane', `x-api-key.${KEY}`]);
    const replies: Array<Record<string, unknown>> = [];
    ws.on('message', (d: Buffer) => replies.push(JSON.parse(d.toString()) as Record<string, unknown>));
    await new Promise((r) => ws.once('open', r));
    ws.send('not json');
    ws.send(JSON.stringify({ id: 7, method: 'subscription.subscribe', params: { channels: ['bogus'] } }));
    ws.send(JSON.stringify({ id: 8, method: 'subscription.unsubscribe', params: { subscription_id: 'none' } }));
    ws.send(JSON.stringify({ id: 9, method: 'run.start', params: {} }));
    await expect.poll(() => replies.length, { timeout: 10_000 }).toBe(4);
    ws.close();
    const byId = (id: number | null) => replies.find((r) => r.id === id)!;
    expect(byId(null)).toMatchObject({ type: 'error', error: 'invalid_argument' });
    expect(byId(7)).toMatchObject({ type: 'error', error: 'invalid_argument' });
    expect(String(byId(7).message)).toContain('channels.0');
    expect(byId(8)).toMatchObject({ type: 'error' });
    expect(String(byId(9).message)).toContain('params.assistant_id');
  });
});

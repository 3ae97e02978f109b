// The thread protocol under custom auth (users are bearer tokens; each sees only threads they own), tried the way
// another user would: reading, commanding or opening a socket on Alice's thread, and squatting a thread id before
// Alice creates it (the check made when the stream opened found nothing to refuse) over SSE and over a WebSocket.
// The WebSocket's credential rides as a `bearer.<token>` subprotocol.
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { Client } from '@langchain/langgraph-sdk-v1';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import WebSocket from 'ws';
import { EXECUTOR_THREAD, startServerProcess, type ServerProc } from '../helpers/process.ts';

const CONFIG = new URL('../../fixtures/protocol/langgraph-auth.json', import.meta.url).pathname;
const ALICE = { authorization: 'Bearer token-alice' };
const BOB = { authorization: 'Bearer token-bob' };

interface Ev {
  method: string;
  params: { namespace: string[]; data: { event?: string } };
}

describe('thread protocol under custom auth', { timeout: 90_000 }, () => {
  let dir: string;
  let server: ServerProc;

  beforeAll(async () => {
    dir = mkdtempSync(join(tmpdir(), 'ap-protocol-auth-'));
    server = await startServerProcess([...EXECUTOR_THREAD, '--config', CONFIG, '--data-dir', join(dir, 'data')]);
  });
  afterAll(async () => {
    await server?.stop();
    rmSync(dir, { recursive: true, force: true });
  });

  const post = async (path: string, body: unknown, headers: Record<string, string>) => {
    const res = await fetch(`${server.url}${path}`, {
      method: 'POST',
      headers: { 'content-type': 'application/json', ...headers },
      body: JSON.stringify(body),
    });
    return { status: res.status, body: await res.text() };
  };

  /** Alice runs a turn on `threadId` through the SDK and waits until it completed. */
  async function aliceTurn(threadId: string): Promise<void> {
    const client = new Client({ apiUrl: server.url, defaultHeaders: ALICE, callerOptions: { maxRetries: 0 } });
    const thread = client.threads.stream(threadId, { assistantId: 'agent' });
    try {
      const sub = await thread.subscribe({ channels: ['lifecycle'] });
      const it = (sub as unknown as AsyncIterable<Ev>)[Symbol.asyncIterator]();
      await thread.run.start({ input: { text: 'secret plans', messages: [{ role: 'user', content: 'go' }] } });
      for (;;) {
        const { value } = await it.next();
        if (!value.params.namespace.length && value.params.data.event === 'completed') break;
      }
    } finally {
      await thread.close();
    }
  }

  const socket = (threadId: string, token: string) =>
    new WebSocket(`${server.url.replace('http', 'ws')}/threads/${threadId}/stream/events`, [
      'agentplane',
      `bearer.${token}`,
    ]);

  it("keeps Bob out of Alice's thread: its stream, its commands and a socket on it", async () => {
    const threadId = crypto.randomUUID();
    await aliceTurn(threadId);
    expect((await post(`/threads/${threadId}/commands`, { id: 1, method: 'state.get' }, ALICE)).status).toBe(200);

    expect((await post(`/threads/${threadId}/stream/events`, { channels: ['values'] }, BOB)).status).toBe(404);
    expect((await post(`/threads/${threadId}/commands`, { id: 1, method: 'state.get' }, BOB)).status).toBe(404);
    const start = { id: 2, method: 'run.start', params: { assistant_id: 'agent', input: { text: 'mine now' } } };
    expect((await post(`/threads/${threadId}/commands`, start, BOB)).status).toBe(404);
    const status = await new Promise<number | undefined>((resolve) => {
      const ws = socket(threadId, 'token-bob');
      ws.once('unexpected-response', (_req, res) => resolve(res.statusCode));
      ws.once('open', () => resolve(101));
      ws.once('error', () => undefined);
    });
    expect(status).toBe(404);
    // Nothing Bob sent started a run: Alice's thread has her one run.
    const runs = await fetch(`${server.url}/threads/${threadId}/runs`, { headers: ALICE });
    expect(((await runs.json()) as unknown[]).length).toBe(1);
  });

  it('ends a squatted SSE stream when Alice creates the thread, without one event of hers', async () => {
    const threadId = crypto.randomUUID();
    const res = await fetch(`${server.url}/threads/${threadId}/stream/events`, {
      method: 'POST',
      headers: { 'content-type': 'application/json', ...BOB },
      body: JSON.stringify({ channels: ['values', 'messages', 'lifecycle', 'custom', 'updates'] }),
    });
    expect(res.status).toBe(200);
    const read = res.text();
    await aliceTurn(threadId);
    // The stream ends by itself; it carried heartbeats at most.
    const text = await read;
    expect(text).not.toContain('event:');
    expect(text).not.toContain('secret');
  });

  it('closes a squatted WebSocket (4404) when Alice creates the thread, without one event of hers', async () => {
    const threadId = crypto.randomUUID();
    const ws = socket(threadId, 'token-bob');
    const received: Array<Record<string, unknown>> = [];
    ws.on('message', (d: Buffer) => received.push(JSON.parse(d.toString()) as Record<string, unknown>));
    const closed = new Promise<number>((r) => ws.once('close', (code) => r(code)));
    await new Promise((r) => ws.once('open', r));
    ws.send(JSON.stringify({ id: 1, method: 'subscription.subscribe', params: { channels: ['values', 'lifecycle'] } }));
    await expect.poll(() => received.length).toBe(1);
    await aliceTurn(threadId);
    // Commands on the thread Alice now owns are refused too.
    ws.send(JSON.stringify({ id: 2, method: 'state.get' }));
    ws.send(JSON.stringify({ id: 3, method: 'run.start', params: { assistant_id: 'agent', input: {} } }));
    expect(await closed).toBe(4404);
    expect(received.filter((m) => m.type === 'event')).toEqual([]);
    expect(JSON.stringify(received)).not.toContain('secret');
    for (const id of [2, 3]) {
      const reply = received.find((m) => m.id === id);
      // Answered before the close (or not at all once closed), never with her state or a run.
      if (reply) expect(reply).toMatchObject({ type: 'error', error: 'no_such_run' });
    }
    const runs = await fetch(`${server.url}/threads/${threadId}/runs`, { headers: ALICE });
    expect(((await runs.json()) as unknown[]).length).toBe(1);
  });
});

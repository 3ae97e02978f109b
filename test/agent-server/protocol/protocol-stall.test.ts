// A WebSocket subscriber of the thread protocol that stops reading holds the server to one page of the log: once
// the socket takes nothing for --stream-stall-timeout it is dropped (logged), and a client that comes back gets the
// whole run again from the durable log, every event once. Subscriptions made back to back on one socket each get
// their replay.
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import WebSocket from 'ws';
import { EXECUTOR_THREAD, startServerProcess, type ServerProc } from '../helpers/process.ts';

const CONFIG = new URL('../../fixtures/protocol/langgraph.json', import.meta.url).pathname;
const COUNT = 3000;

describe('a protocol WebSocket that stops reading', { timeout: 90_000 }, () => {
  let dir: string;
  let server: ServerProc;

  beforeAll(async () => {
    dir = mkdtempSync(join(tmpdir(), 'ap-protocol-stall-'));
    server = await startServerProcess([
      ...EXECUTOR_THREAD,
      '--config',
      CONFIG,
      '--data-dir',
      join(dir, 'data'),
      '--stream-stall-timeout',
      '2',
    ]);
  });
  afterAll(async () => {
    await server?.stop();
    rmSync(dir, { recursive: true, force: true });
  });

  const open = async (threadId: string) => {
    const ws = new WebSocket(`${server.url.replace('http', 'ws')}/threads/${threadId}/stream/events`);
    const messages: Array<Record<string, unknown>> = [];
    ws.on('message', (d: Buffer) => messages.push(JSON.parse(d.toString()) as Record<string, unknown>));
    await new Promise((r) => ws.once('open', r));
    ws.send(JSON.stringify({ id: 1, method: 'subscription.subscribe', params: { channels: ['custom', 'lifecycle'] } }));
    await expect.poll(() => messages.length).toBeGreaterThan(0);
    return { ws, messages };
  };

  it('is dropped after the stall timeout, and a new connection replays the run in full', async () => {
    const threadId = crypto.randomUUID();
    const stalled = await open(threadId);
    // The client stops taking bytes off its socket.
    (stalled.ws as unknown as { _socket: { pause(): void } })._socket.pause();
    const started = await fetch(`${server.url}/threads/${threadId}/commands`, {
      method: 'POST',
      headers: { 'content-type': 'application/json' },
      body: JSON.stringify({
        id: 2,
        method: 'run.start',
        params: { assistant_id: 'burst', input: { count: COUNT, size: 4000 } },
      }),
    });
    expect(started.status).toBe(200);
    await expect
      .poll(() => server.output().includes('protocol WebSocket client stopped reading'), { timeout: 60_000 })
      .toBe(true);
    const closed = new Promise((r) => stalled.ws.once('close', r));
    (stalled.ws as unknown as { _socket: { resume(): void } })._socket.resume();
    await closed;
    const got = stalled.messages.filter((m) => m.method === 'custom').length;
    expect(got).toBeLessThan(COUNT);

    const again = await open(threadId);
    const isEnd = (m: Record<string, unknown>) =>
      m.method === 'lifecycle' && (m.params as { data: { event: string } }).data.event === 'completed';
    await expect.poll(() => again.messages.some(isEnd), { timeout: 60_000 }).toBe(true);
    const custom = again.messages.filter((m) => m.method === 'custom');
    expect(custom.map((m) => (m.params as { data: { payload: { i: number } } }).data.payload.i)).toEqual(
      Array.from({ length: COUNT }, (_, i) => i),
    );
    again.ws.close();
  });

  it('gives each of several subscriptions made back to back its replay', async () => {
    const threadId = crypto.randomUUID();
    const first = await open(threadId);
    const isEnd = (m: Record<string, unknown>) =>
      m.method === 'lifecycle' && (m.params as { data: { event: string } }).data.event === 'completed';
    const run = await fetch(`${server.url}/threads/${threadId}/commands`, {
      method: 'POST',
      headers: { 'content-type': 'application/json' },
      body: JSON.stringify({ id: 2, method: 'run.start', params: { assistant_id: 'burst', input: { count: 50 } } }),
    });
    expect(run.status).toBe(200);
    await expect.poll(() => first.messages.some(isEnd), { timeout: 60_000 }).toBe(true);
    // The first subscription has caught up with the finished run; three more arrive at once.
    const subscribe = (id: number, channels: string[]) =>
      first.ws.send(JSON.stringify({ id, method: 'subscription.subscribe', params: { channels } }));
    subscribe(3, ['values']);
    subscribe(4, ['updates']);
    subscribe(5, ['checkpoints']);
    const count = (method: string) => first.messages.filter((m) => m.method === method).length;
    await expect.poll(() => [count('values'), count('updates'), count('checkpoints')].every((n) => n > 0)).toBe(true);
    first.ws.close();
  });
});

// The thread protocol across replicas: two real server processes on one Postgres database. The SDK 1.15
// ThreadStream loses its connection in the middle of a run (its SSE stream breaks, or its WebSocket drops) and
// reconnects to the other replica, which did not serve the session before: the run's tokens arrive complete, in
// order, each once (the SDK deduplicates by event_id, so the ids must be the same on both replicas), for a run started
// over the protocol and for one started with the run API. Twice: stream events in Postgres and in Redis Streams
// (--redis-url).
import { Client } from '@langchain/langgraph-sdk-v1';
import { Client as LegacyClient } from '@langchain/langgraph-sdk';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import WebSocket from 'ws';
import { redisSkipReason, testRedisUrl } from '../../support/redis.ts';
import { createTestDatabase } from '../helpers/pg.ts';
import { EXECUTOR_THREAD, startServerProcess, type ServerProc } from '../helpers/process.ts';

const CONFIG = new URL('../../fixtures/protocol/langgraph.json', import.meta.url).pathname;

interface Ev {
  event_id?: string;
  method: string;
  params: { namespace: string[]; data: Record<string, unknown> & { event?: string } };
}

const TEXT = 'Forty characters streamed across replicas';
const CUT_AFTER = 6;

const isDelta = (e: Ev) => e.method === 'messages' && e.params.data.event === 'content-block-delta';
const isRootEnd = (e: Ev) =>
  e.method === 'lifecycle' &&
  e.params.namespace.length === 0 &&
  ['completed', 'interrupted', 'failed'].includes(String(e.params.data.event));

const redisUrl = await testRedisUrl();
if (!redisUrl) console.warn(`[protocol-replicas] Redis transport skipped: ${redisSkipReason}`);
const transports = redisUrl ? (['postgres', 'redis'] as const) : (['postgres'] as const);

describe.each(transports)(
  'thread protocol across replicas (stream events on %s)',
  { timeout: 120_000 },
  (transport) => {
    let a: ServerProc;
    let b: ServerProc;
    let drop: () => Promise<void>;

    beforeAll(async () => {
      const db = await createTestDatabase();
      drop = db.drop;
      const args = [
        '--config',
        CONFIG,
        '--database-url',
        db.url,
        ...(transport === 'redis' ? ['--redis-url', redisUrl!] : []),
      ];
      [a, b] = await Promise.all([
        startServerProcess([...EXECUTOR_THREAD, ...args]),
        startServerProcess([...EXECUTOR_THREAD, ...args]),
      ]);
    });
    afterAll(async () => {
      await Promise.all([a?.stop(), b?.stop()]);
      await drop?.();
    });

    const INPUT = { text: TEXT, sleep_ms: 60, messages: [{ role: 'user', content: 'go' }] };

    /**
     * Reads the run's events from a fresh subscription until the run ends; checks what a reconnect must keep. The
     * run starts over the protocol, or with `start` (the run API).
     */
    async function turn(
      thread: ReturnType<Client['threads']['stream']>,
      cut: () => boolean,
      start: () => Promise<{ run_id: string }> = () => thread.run.start({ input: INPUT }) as never,
    ) {
      const sub = await thread.subscribe({ channels: ['messages', 'lifecycle'] });
      const it = (sub as unknown as AsyncIterable<Ev>)[Symbol.asyncIterator]();
      const { run_id } = await start();
      const events: Ev[] = [];
      for (;;) {
        const { value, done } = await it.next();
        if (done) throw new Error('subscription ended before the run did');
        events.push(value);
        if (isRootEnd(value)) break;
      }
      expect(cut()).toBe(true);
      for (const p of [a, b]) expect(p.output()).toContain(`"stream_events":"${transport}"`);
      expect(events.at(-1)!.params.data.event).toBe('completed');
      expect(events.filter(isDelta).map((e) => (e.params.data.delta as { text: string }).text)).toEqual([...TEXT]);
      expect(new Set(events.map((e) => e.event_id)).size).toBe(events.length);
      return run_id;
    }

    it('an SSE stream broken mid-run resumes on the other replica without gaps or duplicates', async () => {
      let target = a.url;
      let cutAt: string | undefined;
      const hits = { a: 0, b: 0 };
      const legacy = new LegacyClient({ apiUrl: a.url });
      let threadId = '';
      // Every request goes to the current target; the first event stream is broken after a few tokens, and from
      // then on the target is the other replica.
      const fetchVia = async (input: string | URL | Request, init?: RequestInit): Promise<Response> => {
        const url = new URL(String(input instanceof Request ? input.url : input));
        const origin = new URL(target);
        url.host = origin.host;
        if (target === a.url) hits.a++;
        else hits.b++;
        const res = await fetch(url, init);
        if (!url.pathname.endsWith('/stream/events') || cutAt !== undefined || !res.body) return res;
        let seen = 0;
        const decoder = new TextDecoder();
        const body = res.body.pipeThrough(
          new TransformStream<Uint8Array, Uint8Array>({
            async transform(chunk, controller) {
              seen += decoder.decode(chunk, { stream: true }).split('"content-block-delta"').length - 1;
              controller.enqueue(chunk);
              if (seen >= CUT_AFTER && cutAt === undefined) {
                cutAt = (await legacy.runs.list(threadId))[0]?.status ?? 'no run';
                target = b.url;
                controller.error(new Error('connection lost'));
              }
            },
          }),
        );
        return new Response(body, { status: res.status, headers: res.headers });
      };
      const client = new Client({ apiUrl: a.url, callerOptions: { maxRetries: 0 } });
      const thread = client.threads.stream({
        assistantId: 'agent',
        transport: 'sse',
        fetch: fetchVia as typeof fetch,
        reconnectDelayMs: () => 20,
      });
      threadId = thread.threadId;
      try {
        await turn(thread, () => cutAt !== undefined);
        // Cut while the run was still running, and continued on the replica that had not served the session.
        expect(cutAt).toBe('running');
        expect(hits.b).toBeGreaterThan(0);
      } finally {
        await thread.close();
      }
    });

    /** A WebSocket factory whose first socket goes to replica a and drops after a few tokens, the next to b. */
    function droppingFactory() {
      const opened: string[] = [];
      let dropped = false;
      const factory = (url: string) => {
        const onB = opened.length > 0;
        const target = new URL(onB ? b.url : a.url);
        const u = new URL(url);
        u.host = target.host;
        opened.push(target.host);
        const ws = new WebSocket(u);
        if (!onB) {
          let seen = 0;
          ws.on('message', (d: Buffer) => {
            seen += d.toString().includes('"content-block-delta"') ? 1 : 0;
            if (seen >= CUT_AFTER && !dropped) {
              dropped = true;
              ws.terminate();
            }
          });
        }
        return ws as never;
      };
      return { factory, opened, dropped: () => dropped };
    }

    it('a WebSocket dropped mid-run reconnects to the other replica, resubscribes, and misses nothing', async () => {
      const ws = droppingFactory();
      const client = new Client({ apiUrl: a.url });
      const thread = client.threads.stream({
        assistantId: 'agent',
        transport: 'websocket',
        webSocketFactory: ws.factory,
        reconnectDelayMs: () => 20,
      });
      try {
        await turn(thread, ws.dropped);
        expect(ws.opened).toEqual([new URL(a.url).host, new URL(b.url).host]);
      } finally {
        await thread.close();
      }
    });

    it('a run started with the run API: its tokens reach a subscriber that reconnects to the other replica', async () => {
      const ws = droppingFactory();
      const legacy = new LegacyClient({ apiUrl: b.url });
      const { thread_id } = await legacy.threads.create();
      const thread = new Client({ apiUrl: a.url }).threads.stream(thread_id, {
        assistantId: 'agent',
        transport: 'websocket',
        webSocketFactory: ws.factory,
        reconnectDelayMs: () => 20,
      });
      try {
        // Created through b with the SDK's runs.create, as a CLI would; the subscriber starts on a and moves to b.
        await turn(thread, ws.dropped, () =>
          legacy.runs.create(thread_id, 'agent', { input: INPUT, streamMode: ['messages-tuple'] }),
        );
        expect(ws.opened).toEqual([new URL(a.url).host, new URL(b.url).host]);
      } finally {
        await thread.close();
      }
    });
  },
);

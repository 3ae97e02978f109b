// Runs started through the run API (runs.stream, runs.create) seen by a thread-protocol subscriber of the same
// thread: their model's messages arrive as content-block events (message-start, deltas, message-finish; a streamed
// tool call as tool-call-delta pieces), live and on replay, on both stores, while the run-centric SSE stream of the
// same run carries exactly the frames its modes ask for, none of the protocol's. A protocol-started run still
// yields one set of deltas. A real server process, the real SDK (1.15) on both sides.
import { Client } from '@langchain/langgraph-sdk-v1';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { ARG_PIECES } from '../../fixtures/protocol/src/toolcaller.ts';
import { startServerOnStore, type StoreServer } from '../helpers/store-server.ts';
import { untilEnd, type ProtocolEvent as Ev } from '../helpers/protocol-events.ts';

const CONFIG = new URL('../../fixtures/protocol/langgraph.json', import.meta.url).pathname;

type Frame = { event: string; data: unknown };
type Msg = { type?: string; id?: string; content?: unknown; kwargs?: { id?: string; content?: unknown } };

const messageEvents = (events: Ev[]) => events.filter((e) => e.method === 'messages').map((e) => e.params.data);
const deltaOf = (d: Record<string, unknown>) => d.delta as { type: string; text?: string; args?: string };
const deltas = (events: Ev[]) =>
  messageEvents(events)
    .filter((d) => d.event === 'content-block-delta')
    .map(deltaOf);

async function collect(frames: AsyncIterable<Frame>): Promise<Frame[]> {
  const out: Frame[] = [];
  for await (const f of frames) out.push({ event: f.event, data: f.data });
  return out;
}

/** The last AI message of a values payload (the server's serialization: plain or LangChain's constructor form). */
function lastAi(values: unknown): { id?: string; content: unknown } {
  const messages = (values as { messages: Msg[] }).messages;
  const m = messages.at(-1)!;
  return m.kwargs ? { id: m.kwargs.id, content: m.kwargs.content } : { id: m.id, content: m.content };
}

describe.each(['embedded', 'postgres'] as const)(
  'run API runs over the thread protocol, %s',
  { timeout: 120_000 },
  (store) => {
    let running: StoreServer | undefined;
    let client: Client;

    beforeAll(async () => {
      running = await startServerOnStore(store, ['--config', CONFIG]);
      client = new Client({ apiUrl: running.server.url, callerOptions: { maxRetries: 0 } });
    });
    afterAll(async () => {
      await running?.close();
    });

    const watch = (threadId: string, assistantId = 'agent') =>
      client.threads.stream(threadId, { assistantId, transport: 'sse', reconnectDelayMs: () => 50 });

    it.each([
      ['values only: the answer in its values, no token events', ['values']],
      ['messages-tuple: token by token', ['messages-tuple', 'values']],
    ] as const)(
      'runs.stream (%s) reaches a protocol subscriber; its SSE stream has only its modes',
      async (_, asked) => {
        const modes: readonly string[] = asked;
        const text = 'Tokens for the other tab';
        const { thread_id } = await client.threads.create();
        const thread = watch(thread_id);
        try {
          const sub = await thread.subscribe({ channels: ['messages', 'lifecycle', 'values'] });
          const frames = await collect(
            client.runs.stream(thread_id, 'agent', {
              input: { text, messages: [{ role: 'user', content: 'go' }] },
              streamMode: [...asked],
            }) as AsyncIterable<Frame>,
          );
          const live = await untilEnd(sub);

          // The run-centric stream: metadata, then only the asked modes; nothing of the protocol's.
          expect(frames[0]!.event).toBe('metadata');
          const allowed = modes.includes('messages-tuple') ? ['values', 'messages'] : ['values'];
          for (const f of frames.slice(1)) expect(allowed).toContain(f.event);
          const finalValues = frames.filter((f) => f.event === 'values').at(-1)!.data;
          const answer = lastAi(finalValues);
          expect(answer.content).toBe(text);
          if (modes.includes('messages-tuple')) {
            const tokens = frames
              .filter((f) => f.event === 'messages')
              .map((f) => (f.data as [{ content: string }])[0].content);
            expect(tokens.join('')).toBe(text);
          }
          // The same run joined afterwards: the same frames, from the stored log.
          const { run_id } = frames[0]!.data as { run_id: string };
          expect(await collect(client.runs.joinStream(thread_id, run_id) as AsyncIterable<Frame>)).toEqual(frames);

          const msgs = messageEvents(live);
          if (!modes.includes('messages-tuple')) {
            // Its model did not stream (the run asked for values only): nothing to relay token by token, and the
            // answer reaches the subscriber in the run's values, as the run-centric stream has it.
            expect(msgs).toEqual([]);
            const values = live.filter((e) => e.method === 'values');
            expect(lastAi(values.at(-1)!.params.data).content).toBe(text);
            expect(live.at(-1)!.params.data.event).toBe('completed');
            return;
          }
          // The protocol subscriber: one message, its deltas making the model's answer, under the state's id.
          expect(msgs[0]).toMatchObject({ event: 'message-start', id: answer.id });
          expect(msgs.filter((d) => d.event === 'message-start')).toHaveLength(1);
          expect(msgs.at(-1)!.event).toBe('message-finish');
          const texts = deltas(live).map((d) => d.text);
          expect(texts.join('')).toBe(text);
          expect(texts).toEqual([...text]);
          for (const e of live.filter((x) => x.method === 'messages')) expect(e.params.namespace[0]).toMatch(/^talk:/);
          expect(live.indexOf(live.find((e) => e.method === 'messages')!)).toBeLessThan(
            live.findLastIndex((e) => e.method === 'values'),
          );
          expect(live.at(-1)!.params.data.event).toBe('completed');

          // Replay: a subscriber arriving after the run ended gets the same message events.
          const late = watch(thread_id);
          try {
            const replayed = await untilEnd(await late.subscribe({ channels: ['messages', 'lifecycle'] }));
            expect(messageEvents(replayed)).toEqual(msgs);
          } finally {
            await late.close();
          }
        } finally {
          await thread.close();
        }
      },
    );

    it('runs.create of a model streaming a tool call: tool-call-delta pieces as the model streams them', async () => {
      const { thread_id } = await client.threads.create();
      const thread = watch(thread_id, 'toolcaller');
      try {
        const sub = await thread.subscribe({ channels: ['messages', 'lifecycle'] });
        await client.runs.create(thread_id, 'toolcaller', {
          input: { messages: [{ role: 'user', content: 'weather?' }] },
          streamMode: ['messages-tuple'],
        });
        const live = await untilEnd(sub);
        expect(deltas(live)).toEqual(ARG_PIECES.map((args) => ({ type: 'tool-call-delta', args })));
        expect(messageEvents(live).find((d) => d.event === 'content-block-finish')).toMatchObject({
          content: { type: 'tool_call', id: 'call_1', name: 'weather', args: { city: 'Paris' } },
        });
      } finally {
        await thread.close();
      }
    });

    it('a run started over the protocol yields its deltas once', async () => {
      const text = 'Only once';
      const { thread_id } = await client.threads.create();
      const thread = watch(thread_id);
      try {
        const sub = await thread.subscribe({ channels: ['messages', 'lifecycle'] });
        await thread.run.start({ input: { text, messages: [{ role: 'user', content: 'go' }] } });
        const live = await untilEnd(sub);
        expect(deltas(live).map((d) => d.text)).toEqual([...text]);
        expect(messageEvents(live).filter((d) => d.event === 'message-start')).toHaveLength(1);
        expect(messageEvents(live).filter((d) => d.event === 'message-finish')).toHaveLength(1);
      } finally {
        await thread.close();
      }
    });
  },
);

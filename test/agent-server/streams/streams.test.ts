// Every stream mode through the real SDK against a real server process (embedded store): the platform's event
// names and payload shapes, subgraph namespacing, metadata first, error events, heartbeats, thread streams and
// the answers to bad stream modes and Last-Event-IDs.
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { Client } from '@langchain/langgraph-sdk';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { EXECUTOR_THREAD, startServerProcess, type ServerProc } from '../helpers/process.ts';
import { readSse } from '../helpers/sse.ts';

const CONFIG = new URL('../../fixtures/streams/langgraph.json', import.meta.url).pathname;
type Ev = { event: string; data: any };

describe('stream modes', { timeout: 120_000 }, () => {
  let dir: string;
  let server: ServerProc;
  let client: Client;

  beforeAll(async () => {
    dir = mkdtempSync(join(tmpdir(), 'ap-as-streams-'));
    server = await startServerProcess([...EXECUTOR_THREAD, '--config', CONFIG, '--data-dir', dir]);
    client = new Client({ apiUrl: server.url, callerOptions: { maxRetries: 0 } });
  });
  afterAll(async () => {
    await server?.stop();
    rmSync(dir, { recursive: true, force: true });
  });

  async function stream(
    graph: string,
    input: Record<string, unknown>,
    streamMode: string[],
    subgraphs = false,
  ): Promise<{ thread: string; events: Ev[] }> {
    const t = await client.threads.create();
    const events: Ev[] = [];
    for await (const e of client.runs.stream(t.thread_id, graph, {
      input,
      streamMode: streamMode as never,
      streamSubgraphs: subgraphs,
    })) {
      events.push(e as Ev);
    }
    return { thread: t.thread_id, events };
  }
  const chatInput = { text: 'hey you', messages: [{ role: 'user', content: 'hi' }] };

  it('values, updates, messages (metadata/partial/complete), messages-tuple and custom, metadata first', async () => {
    const { events } = await stream('chat', chatInput, ['values', 'updates', 'messages', 'messages-tuple', 'custom']);
    expect(events[0]).toMatchObject({ event: 'metadata', data: { attempt: 1 } });
    expect(typeof events[0]!.data.run_id).toBe('string');
    const names = new Set(events.map((e) => e.event));
    expect([...names].sort()).toEqual([
      'custom',
      'messages',
      'messages/complete',
      'messages/metadata',
      'messages/partial',
      'metadata',
      'updates',
      'values',
    ]);
    // messages: one metadata per message, then the message so far on every token, then the finished message.
    const partial = events.filter((e) => e.event === 'messages/partial').map((e) => e.data[0].content);
    expect(partial).toEqual(['h', 'he', 'hey', 'hey ', 'hey y', 'hey yo', 'hey you']);
    const meta = events.find((e) => e.event === 'messages/metadata')!.data;
    const id = events.find((e) => e.event === 'messages/partial')!.data[0].id as string;
    expect(meta[id].metadata.langgraph_node).toBe('talk');
    const complete = events.filter((e) => e.event === 'messages/complete').flatMap((e) => e.data);
    expect(complete.map((m: any) => [m.type, m.content])).toEqual([
      ['human', 'hi'],
      ['ai', 'hey you'],
    ]);
    // messages-tuple: [chunk, metadata] per token.
    const tuples = events.filter((e) => e.event === 'messages').map((e) => e.data);
    expect(tuples.map(([m]: any) => m.content).join('')).toBe('hey you');
    expect(tuples[0][1].langgraph_node).toBe('talk');
    expect(events.find((e) => e.event === 'custom')!.data).toEqual({ starting: 7 });
    expect(events.find((e) => e.event === 'updates')!.data.talk.messages[0].content).toBe('hey you');
    expect(
      events
        .filter((e) => e.event === 'values')
        .at(-1)!
        .data.messages.map((m: any) => m.content),
    ).toEqual(['hi', 'hey you']);
  });

  it('events: LangChain streamEvents v2, alone (not replaced by values)', async () => {
    const { events } = await stream('chat', chatInput, ['events']);
    expect(events[0]!.event).toBe('metadata');
    expect(new Set(events.slice(1).map((e) => e.event))).toEqual(new Set(['events']));
    const kinds = events.slice(1).map((e) => e.data.event as string);
    expect(kinds[0]).toBe('on_chain_start');
    expect(kinds.filter((k) => k === 'on_chat_model_stream')).toHaveLength(7);
    expect(kinds).toContain('on_chat_model_end');
    for (const e of events.slice(1)) {
      expect(e.data).toMatchObject({
        name: expect.any(String),
        run_id: expect.any(String),
        metadata: expect.any(Object),
      });
      expect(e.data.tags).not.toContain('langsmith:hidden');
    }
    const tokens = events
      .filter((e) => e.data.event === 'on_chat_model_stream')
      .map((e) => e.data.data.chunk.content)
      .join('');
    expect(tokens).toBe('hey you');
  });

  it('debug, tasks and checkpoints with subgraphs: mode|namespace events, checkpoint and parent_checkpoint, no internal config', async () => {
    const { thread, events } = await stream('nested', chatInput, ['debug', 'tasks', 'checkpoints', 'updates'], true);
    const sub = events.filter((e) => e.event.includes('|'));
    expect(sub.length).toBeGreaterThan(0);
    for (const e of sub) expect(e.event).toMatch(/^(debug|tasks|checkpoints|updates)\|inner:[0-9a-f-]+$/);
    const checkpoints = events.filter((e) => e.event === 'checkpoints');
    expect(checkpoints.length).toBeGreaterThanOrEqual(2);
    for (const c of checkpoints) {
      expect(c.data.checkpoint).toMatchObject({
        thread_id: thread,
        checkpoint_ns: '',
        checkpoint_id: expect.any(String),
      });
      expect(Object.keys(c.data)).toEqual(
        expect.arrayContaining(['values', 'next', 'metadata', 'config', 'parent_config', 'tasks', 'parent_checkpoint']),
      );
      expect(c.data.config.callbacks).toBeUndefined();
      for (const k of Object.keys(c.data.config.configurable ?? {})) expect(k.startsWith('__')).toBe(false);
    }
    expect(checkpoints[0]!.data.parent_checkpoint).toBeNull();
    expect(checkpoints[1]!.data.parent_checkpoint.checkpoint_id).toBe(checkpoints[0]!.data.checkpoint.checkpoint_id);
    const tasks = events.filter((e) => e.event === 'tasks').map((e) => e.data);
    expect(tasks.find((t) => 'input' in t)).toMatchObject({
      name: 'inner',
      triggers: expect.any(Array),
      interrupts: [],
    });
    expect(tasks.find((t) => 'result' in t)).toMatchObject({ name: 'inner' });
    const debug = events.filter((e) => e.event === 'debug').map((e) => e.data);
    expect(new Set(debug.map((d) => d.type))).toEqual(new Set(['checkpoint', 'task', 'task_result']));
    expect(debug.find((d) => d.type === 'checkpoint').payload.checkpoint.thread_id).toBe(thread);
  });

  it('a failing graph ends its stream with an error event shaped {error, message}', async () => {
    const { events } = await stream('fail', {}, ['values', 'updates']);
    expect(events.at(-1)).toMatchObject({ event: 'error', data: { error: 'Error', message: 'boom on purpose' } });
    expect(events.filter((e) => e.event === 'error')).toHaveLength(1);
  });

  it("joinStream picks stream modes out of the run's log, and the thread stream carries every run of the thread", async () => {
    const t = await client.threads.create();
    const abort = new AbortController();
    const seen: Ev[] = [];
    const following = (async () => {
      for await (const e of client.threads.joinStream(t.thread_id, { signal: abort.signal } as never)) {
        seen.push(e as Ev);
        // Run starts: the metadata events with an attempt (a run's end is metadata {status: run_done}).
        if (
          seen.filter((x) => x.event === 'metadata' && x.data.attempt).length === 2 &&
          seen.at(-1)!.event === 'values' &&
          seen.filter((x) => x.event === 'values').length >= 4
        )
          abort.abort();
      }
    })().catch((err: unknown) => {
      if (!abort.signal.aborted) throw err;
    });
    const r1 = await client.runs.wait(t.thread_id, 'chat', {
      input: chatInput,
      streamMode: ['values', 'custom'],
    } as never);
    expect(r1).toBeTruthy();
    const run2 = await client.runs.create(t.thread_id, 'chat', {
      input: { text: 'again' },
      streamMode: ['values', 'custom'],
    });
    await client.runs.join(t.thread_id, run2.run_id);
    await following;
    const runIds = seen.filter((e) => e.event === 'metadata' && e.data.attempt).map((e) => e.data.run_id);
    expect(runIds).toHaveLength(2);
    expect(runIds[1]).toBe(run2.run_id);
    // A join asking for custom only gets metadata and custom out of the same log.
    const joined: Ev[] = [];
    for await (const e of client.runs.joinStream(t.thread_id, run2.run_id, { streamMode: ['custom'] }))
      joined.push(e as Ev);
    expect(joined.map((e) => e.event)).toEqual(['metadata', 'custom']);
  });

  it('Last-Event-ID -1 (how useStream joins and reconnects) replays a run from the start on every join route', async () => {
    const collect = async (events: AsyncIterable<unknown>) => {
      const out: Ev[] = [];
      for await (const e of events) out.push(e as Ev);
      return out;
    };
    const t = await client.threads.create();
    const run = await client.runs.create(t.thread_id, 'chat', { input: chatInput, streamMode: ['values', 'custom'] });
    await client.runs.join(t.thread_id, run.run_id);
    const full = await collect(client.runs.joinStream(t.thread_id, run.run_id));
    expect(full.map((e) => e.event)).toEqual(expect.arrayContaining(['metadata', 'custom', 'values']));
    expect(await collect(client.runs.joinStream(t.thread_id, run.run_id, { lastEventId: '-1' }))).toEqual(full);
    // The thread-less form the SDK uses for stateless runs.
    expect(await collect(client.runs.joinStream(null, run.run_id, { lastEventId: '-1' }))).toEqual(full);
    // The thread stream never ends: it is read until the run's last values, with a time limit.
    const abort = new AbortController();
    const limit = setTimeout(() => abort.abort(), 15_000);
    const seen: Ev[] = [];
    try {
      for await (const e of client.threads.joinStream(t.thread_id, { lastEventId: '-1', signal: abort.signal })) {
        seen.push(e as Ev);
        if (seen.filter((x) => x.event === 'values').length === full.filter((x) => x.event === 'values').length) break;
      }
    } finally {
      clearTimeout(limit);
    }
    expect(seen[0]).toMatchObject({ event: 'metadata', data: { run_id: run.run_id } });
    expect(seen.filter((e) => e.event === 'values')).toEqual(full.filter((e) => e.event === 'values'));
    // Only -1 means "from the start": other negative ids are still refused.
    const minusTwo = await readSse(`${server.url}/threads/${t.thread_id}/runs/${run.run_id}/stream`, {
      lastEventId: '-2',
    });
    expect(minusTwo.status).toBe(422);
  });

  it('sends a heartbeat comment after 5 s without events', async () => {
    const t = await client.threads.create();
    const r = await readSse(`${server.url}/threads/${t.thread_id}/runs/stream`, {
      method: 'POST',
      body: { assistant_id: 'chat', input: { text: 'ab', sleep_ms: 6_500 }, stream_mode: ['messages-tuple'] },
    });
    expect(r.comments).toBeGreaterThanOrEqual(1);
    expect(r.events.filter((e) => e.event === 'messages')).toHaveLength(2);
  });

  it('refuses an unknown stream mode with 422 listing the valid ones; a bad Last-Event-ID is a 4xx, one past the end replays', async () => {
    const t = await client.threads.create();
    const bad = await fetch(`${server.url}/threads/${t.thread_id}/runs/stream`, {
      method: 'POST',
      headers: { 'content-type': 'application/json' },
      body: JSON.stringify({ assistant_id: 'chat', input: chatInput, stream_mode: ['values', 'tokens'] }),
    });
    expect(bad.status).toBe(422);
    const text = JSON.stringify(await bad.json());
    expect(text).toContain('stream_mode');
    for (const m of ['values', 'messages-tuple', 'events', 'checkpoints']) expect(text).toContain(m);

    const run = await client.runs.create(t.thread_id, 'chat', { input: chatInput, streamMode: ['values'] });
    await client.runs.join(t.thread_id, run.run_id);
    const path = `${server.url}/threads/${t.thread_id}/runs/${run.run_id}/stream`;
    const joinBad = await fetch(`${path}?stream_mode=tokens`);
    expect(joinBad.status).toBe(422);
    expect(JSON.stringify(await joinBad.json())).toContain('valid modes: values');
    const notNumber = await readSse(path, { lastEventId: 'abc' });
    expect(notNumber.status).toBeGreaterThanOrEqual(400);
    expect(notNumber.status).toBeLessThan(500);
    expect(JSON.stringify(notNumber.body).toLowerCase()).toContain('last-event-id');
    const full = await readSse(path);
    const past = await readSse(path, { lastEventId: 999_999_999 });
    expect(past.events).toEqual(full.events);
    expect(full.events[0]!.event).toBe('metadata');
  });
});

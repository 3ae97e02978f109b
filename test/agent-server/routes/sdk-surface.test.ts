// The wider SDK surface against a real server process on both stores: factory graphs built with the thread's or
// the assistant's config, schemas and subgraphs, assistant deletion with its threads, batch and thread-less runs,
// temporary threads, failed waits, busy threads and the platform's 404 texts.
import { randomUUID } from 'node:crypto';
import { Client } from '@langchain/langgraph-sdk';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { ServerProc } from '../helpers/process.ts';
import { startServerOnStore, type StoreServer } from '../helpers/store-server.ts';

const CONFIG = new URL('../fixtures/sdk-surface/langgraph.json', import.meta.url).pathname;

async function eventually<T>(read: () => Promise<T>, ok: (v: T) => boolean, ms = 15_000): Promise<T> {
  const end = Date.now() + ms;
  for (;;) {
    const v = await read();
    if (ok(v) || Date.now() > end) return v;
    await new Promise((r) => setTimeout(r, 100));
  }
}

const gone = (client: Client, threadId: string) =>
  client.threads.get(threadId).then(
    () => false,
    (err: Error) => /404/.test(err.message),
  );

describe.each(['embedded', 'postgres'] as const)('SDK surface against a server process (%s)', (store) => {
  let server: ServerProc;
  let client: Client;
  let running: StoreServer | undefined;

  beforeAll(async () => {
    running = await startServerOnStore(store, ['--config', CONFIG]);
    server = running.server;
    client = new Client({ apiUrl: server.url, callerOptions: { maxRetries: 0 } });
  });
  afterAll(async () => {
    await running?.close();
  });

  it('builds a factory graph with the run config for state reads, updates as a config-only node and history', async () => {
    const t = await client.threads.create();
    const out = await client.runs.wait(t.thread_id, 'shaped', {
      input: {},
      config: { configurable: { variant: 'b' } },
    });
    expect(out).toMatchObject({ trail: ['work:b', 'extra'] });
    await client.threads.updateState(t.thread_id, { values: { trail: ['manual'] }, asNode: 'extra' });
    const state = await client.threads.getState(t.thread_id);
    expect(state.values).toMatchObject({ trail: ['work:b', 'extra', 'manual'] });
    expect(state.next).toEqual([]);
    const history = await client.threads.getHistory(t.thread_id, { limit: 20 });
    expect(history[0]!.metadata).toMatchObject({ source: 'update' });
    expect(history[0]!.values).toMatchObject({ trail: ['work:b', 'extra', 'manual'] });

    // Built with defaults, the graph has no node "extra": the update is refused.
    const plain = await client.threads.create();
    await client.runs.wait(plain.thread_id, 'shaped', { input: {} });
    await expect(
      client.threads.updateState(plain.thread_id, { values: { trail: ['x'] }, asNode: 'extra' }),
    ).rejects.toThrow(/HTTP 400.*extra/);
  });

  it("builds a factory graph with the assistant's config for runs, drawings, schemas and runless threads", async () => {
    const a = await client.assistants.create({ graphId: 'shaped', config: { configurable: { variant: 'b' } } });
    const drawn = await client.assistants.getGraph(a.assistant_id);
    expect(drawn.nodes.map((n) => n.id)).toContain('extra');
    expect((await client.assistants.getGraph('shaped')).nodes.map((n) => n.id)).not.toContain('extra');

    const t = await client.threads.create();
    expect(await client.runs.wait(t.thread_id, a.assistant_id, { input: {} })).toMatchObject({
      trail: ['work:b', 'extra'],
    });
    await client.threads.updateState(t.thread_id, { values: { trail: ['again'] }, asNode: 'extra' });
    expect((await client.threads.getState(t.thread_id)).values).toMatchObject({ trail: ['work:b', 'extra', 'again'] });

    // A thread with no runs yet takes the config of the assistant its metadata names.
    const fresh = await client.threads.create({ graphId: 'shaped', metadata: { assistant_id: a.assistant_id } });
    await client.threads.updateState(fresh.thread_id, { values: { trail: ['seed'] }, asNode: 'extra' });
    expect((await client.threads.getState(fresh.thread_id)).values).toMatchObject({ trail: ['seed'] });
  });

  it('answers JSON schemas of zod state and context, and of Annotation state', async () => {
    const typed = await client.assistants.getSchemas('typed');
    expect(typed.graph_id).toBe('typed');
    expect(typed.state_schema).toMatchObject({
      type: 'object',
      properties: { question: { type: 'string', description: 'what was asked' }, answer: { type: 'string' } },
      required: ['question'],
    });
    expect(typed.input_schema).toMatchObject({ properties: { question: { type: 'string' } } });
    expect(typed.output_schema).toMatchObject({ properties: { answer: { type: 'string' } } });
    expect(typed.context_schema).toMatchObject({ properties: { tone: { enum: ['dry', 'warm'] } }, required: ['tone'] });
    expect(typed.config_schema).toEqual(typed.context_schema);

    const shaped = await client.assistants.getSchemas('shaped');
    expect(Object.keys((shaped.state_schema as { properties: object }).properties).sort()).toEqual([
      'delay_ms',
      'fail',
      'trail',
    ]);
  });

  it('lists subgraphs, recursively and by namespace', async () => {
    const direct = await client.assistants.getSubgraphs('nested');
    expect(Object.keys(direct)).toEqual(['child']);
    expect(Object.keys((direct.child!.state_schema as { properties: object }).properties).sort()).toEqual([
      'depth',
      'mid_note',
    ]);
    const all = await client.assistants.getSubgraphs('nested', { recurse: true });
    expect(Object.keys(all).sort()).toEqual(['child', 'child|grandchild']);
    expect(Object.keys((all['child|grandchild']!.state_schema as { properties: object }).properties).sort()).toEqual([
      'depth',
      'leaf_note',
    ]);
    const one = await client.assistants.getSubgraphs('nested', { namespace: 'child|grandchild', recurse: true });
    expect(Object.keys(one)).toEqual(['child|grandchild']);
    expect(await client.assistants.getSubgraphs('shaped')).toEqual({});
  });

  it('deletes an assistant with or without the threads it ran on', async () => {
    const keep = await client.assistants.create({ graphId: 'shaped', name: 'keep-threads' });
    const kept = await client.threads.create();
    await client.runs.wait(kept.thread_id, keep.assistant_id, { input: {} });
    await client.assistants.delete(keep.assistant_id);
    await expect(client.assistants.get(keep.assistant_id)).rejects.toThrow(/404.*Assistant not found/);
    expect((await client.threads.get(kept.thread_id)).thread_id).toBe(kept.thread_id);

    const drop = await client.assistants.create({ graphId: 'shaped', name: 'drop-threads' });
    const mine = await Promise.all([client.threads.create(), client.threads.create()]);
    for (const t of mine) await client.runs.wait(t.thread_id, drop.assistant_id, { input: {} });
    const other = await client.threads.create();
    await client.runs.wait(other.thread_id, 'shaped', { input: {} });
    await client.assistants.delete(drop.assistant_id, { deleteThreads: true });
    for (const t of mine) expect(await gone(client, t.thread_id)).toBe(true);
    expect((await client.threads.get(other.thread_id)).thread_id).toBe(other.thread_id);
  });

  it('creates stateless runs in a batch; their temporary threads go away unless on_completion is keep', async () => {
    const runs = await client.runs.createBatch([
      { assistantId: 'shaped', input: {} },
      { assistantId: 'shaped', input: {}, on_completion: 'keep' } as never,
    ]);
    expect(runs).toHaveLength(2);
    expect(runs.map((r) => r.status)).toEqual(['pending', 'pending']);
    const [temporary, kept] = runs as [(typeof runs)[0], (typeof runs)[0]];
    expect((temporary as unknown as { kwargs: object }).kwargs).toMatchObject({ temporary: true });
    expect((kept as unknown as { kwargs: object }).kwargs).toMatchObject({ temporary: false });
    expect(await client.runs.join(kept.thread_id, kept.run_id)).toMatchObject({ trail: ['work:a'] });
    expect(
      await eventually(
        () => gone(client, temporary.thread_id),
        (v) => v,
      ),
    ).toBe(true);
    expect((await client.threads.getState(kept.thread_id)).values).toMatchObject({ trail: ['work:a'] });
    await expect(client.runs.createBatch([{ assistantId: 'nope' }])).rejects.toThrow(/404/);
  });

  it('joins the stream of a stateless run by run id alone', async () => {
    const run = await client.runs.create(null, 'shaped', {
      input: { delay_ms: 400 },
      streamMode: ['values', 'updates'],
    });
    const events: Array<{ event: string; data: any }> = [];
    for await (const e of client.runs.joinStream(null, run.run_id)) events.push(e as never);
    expect(events[0]!.event).toBe('metadata');
    expect(events.filter((e) => e.event === 'values').at(-1)!.data).toMatchObject({ trail: ['work:a'] });
    // The temporary thread (on_completion defaults to delete) goes with the run.
    expect(
      await eventually(
        () => gone(client, run.thread_id),
        (v) => v,
      ),
    ).toBe(true);
    await expect(
      (async () => {
        for await (const _ of client.runs.joinStream(null, randomUUID())) void _;
      })(),
    ).rejects.toThrow(/404/);
  });

  it('surfaces a failed run as an error from wait (raiseError) and as {__error__} from join', async () => {
    const t = await client.threads.create();
    await expect(client.runs.wait(t.thread_id, 'shaped', { input: { fail: true } })).rejects.toThrow(
      'ShapedFailure: variant a failed on purpose',
    );
    const raw = await client.runs.wait(t.thread_id, 'shaped', { input: { fail: true }, raiseError: false });
    expect(raw).toEqual({ __error__: { error: 'ShapedFailure', message: 'variant a failed on purpose' } });
    const [latest] = await client.runs.list(t.thread_id, { limit: 1 });
    expect(latest!.status).toBe('error');
    expect(await client.runs.join(t.thread_id, latest!.run_id)).toEqual(raw);
    await expect(client.runs.wait(null, 'shaped', { input: { fail: true } })).rejects.toThrow(/^ShapedFailure: /);
  });

  it('refuses a state update with 409 while a run is in flight', async () => {
    const t = await client.threads.create();
    await client.runs.wait(t.thread_id, 'shaped', { input: {} });
    const run = await client.runs.create(t.thread_id, 'shaped', { input: { delay_ms: 30_000 } });
    expect((await client.threads.get(t.thread_id)).status).toBe('busy');
    await expect(client.threads.updateState(t.thread_id, { values: { trail: ['x'] }, asNode: 'work' })).rejects.toThrow(
      /HTTP 409.*busy/,
    );
    await client.runs.cancel(t.thread_id, run.run_id, true);
    await client.threads.updateState(t.thread_id, { values: { trail: ['after'] }, asNode: 'work' });
    expect((await client.threads.getState(t.thread_id)).values).toMatchObject({ trail: ['work:a', 'after'] });
  });

  it('lists the versions of an assistant and sets the latest one', async () => {
    const a = await client.assistants.create({ graphId: 'shaped', name: 'v-one', metadata: { team: 'x' } });
    const first = await client.assistants.getVersions(a.assistant_id);
    expect(first[0]).toMatchObject({ assistant_id: a.assistant_id, version: 1, name: 'v-one', graph_id: 'shaped' });
    const updated = await client.assistants.update(a.assistant_id, { name: 'v-two' });
    expect(updated.version).toBe(2);
    const versions = await client.assistants.getVersions(a.assistant_id, { metadata: { team: 'x' } });
    expect(versions.map((v) => [v.version, v.name])).toEqual([
      [2, 'v-two'],
      [1, 'v-one'],
    ]);
    expect(await client.assistants.getVersions(a.assistant_id, { metadata: { team: 'y' } })).toEqual([]);
    // Back to version 1, then a patch is the newest version + 1.
    expect(await client.assistants.setLatest(a.assistant_id, 1)).toMatchObject({ version: 1, name: 'v-one' });
    expect((await client.assistants.get(a.assistant_id)).name).toBe('v-one');
    expect((await client.assistants.update(a.assistant_id, { name: 'v-three' })).version).toBe(3);
    await expect(client.assistants.setLatest(a.assistant_id, 99)).rejects.toThrow(/404.*Assistant version not found/);
    await expect(client.assistants.getVersions(randomUUID())).rejects.toThrow(/404.*Assistant not found/);
  });

  it('validates thread ttl (minutes, strategy delete)', async () => {
    const t = await client.threads.create({ ttl: 60 });
    expect(t.thread_id).toEqual(expect.any(String));
    const res = await fetch(`${server.url}/threads`, {
      method: 'POST',
      headers: { 'content-type': 'application/json' },
      body: JSON.stringify({ ttl: { ttl: -1, strategy: 'delete' } }),
    });
    expect(res.status).toBe(422);
  });

  it("answers 404 with the platform's texts in {detail}", async () => {
    const check = async (path: string, text: RegExp) => {
      const res = await fetch(`${server.url}${path}`);
      expect(res.status).toBe(404);
      expect(((await res.json()) as { detail: string }).detail).toMatch(text);
    };
    await check(`/assistants/${randomUUID()}`, /^Assistant not found/);
    await check('/assistants/no-such-graph', /^No assistant found for graph no-such-graph/);
    await check(`/threads/${randomUUID()}`, /^Thread not found/);
    await check(`/threads/${randomUUID()}/state`, /^Thread not found/);
    const missing = randomUUID();
    await expect(client.threads.update(missing, { metadata: { a: 1 } })).rejects.toThrow(/404.*Thread not found/);
    await expect(client.threads.delete(missing)).rejects.toThrow(/404.*Thread not found/);
    await expect(client.threads.copy(missing)).rejects.toThrow(/404.*Thread not found/);
    await expect(client.runs.create(missing, 'shaped', { input: {} })).rejects.toThrow(/404.*Thread not found/);
  });
});

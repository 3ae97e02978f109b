// What a LangGraph.js app or client written against the platform's documentation relies on, through the real SDK
// and plain HTTP against a real server process on both stores: langgraph.json "env" read by the server itself,
// failed waits raising the run's error, the caller's configurable user_id, recursion_limit, and relative webhooks
// that reach the deployment's own custom routes and nothing else.
import { MemorySaver } from '@langchain/langgraph';
import { Client } from '@langchain/langgraph-sdk';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { nested } from '../agent-server/fixtures/app-parity/graphs.ts';
import { startServerOnStore, until, type StoreServer } from '../agent-server/helpers/store-server.ts';

const CONFIG = new URL('../agent-server/fixtures/app-parity/langgraph.json', import.meta.url).pathname;

interface Delivered {
  path: string;
  secret: string | null;
  body: Record<string, unknown>;
}

describe.each(['embedded', 'postgres'] as const)('app parity (%s)', (store) => {
  let running: StoreServer;
  let url: string;
  let client: Client;

  beforeAll(async () => {
    running = await startServerOnStore(store, ['--config', CONFIG]);
    url = running.server.url;
    client = new Client({ apiUrl: url, callerOptions: { maxRetries: 0 } });
  });
  afterAll(async () => {
    await running?.close();
  });

  const post = async (path: string, body: unknown) => {
    const res = await fetch(`${url}${path}`, {
      method: 'POST',
      headers: { 'content-type': 'application/json' },
      body: JSON.stringify(body),
    });
    return { status: res.status, body: (await res.json()) as Record<string, any> };
  };

  it("applies langgraph.json env to the server's own settings (LANGGRAPH_CONFIG) as well as to graph code", async () => {
    const [system] = await client.assistants.search({ graphId: 'seen', metadata: { created_by: 'system' } });
    expect(system!.config).toMatchObject({ configurable: { preset: 'from-env' } });
    const out = await client.runs.wait(null, 'seen', { input: {} });
    expect(out).toMatchObject({ marker: 'from-langgraph-json' });
  });

  it('answers JSON schemas for Annotation and zod graphs, their subgraphs and a field zod cannot express', async () => {
    const a = await client.assistants.getSchemas('annotated');
    // Annotation channels typed by what they show at runtime (reducer defaults) and by their TypeScript types.
    expect(a.state_schema).toEqual({
      title: 'annotated_state',
      type: 'object',
      properties: {
        items: { type: 'array', items: { type: 'string' }, default: [] },
        count: { type: 'number', default: 0 },
        title: { type: 'string' },
      },
      $schema: 'http://json-schema.org/draft-07/schema#',
    });
    expect(a.input_schema).toMatchObject({ properties: { items: { type: 'array' }, title: { type: 'string' } } });
    expect(a.context_schema).toMatchObject({ properties: { lang: { type: 'string' } }, required: ['lang'] });
    expect(a.config_schema).toEqual(a.context_schema);
    // No context declared: a permissive object, never null.
    const nested = await client.assistants.getSchemas('nested');
    expect(nested.config_schema).toEqual({
      title: 'nested_config',
      type: 'object',
      properties: {},
      additionalProperties: true,
    });
    expect(nested.context_schema).toEqual(nested.config_schema);
    const subs = await client.assistants.getSubgraphs('nested');
    expect(subs.inner).toMatchObject({
      state_schema: { properties: { answer: {} } },
      config_schema: { type: 'object' },
    });
    // curl: a bigint field has no JSON Schema; the rest of the zod state is typed and the answer is a 200.
    const odd = await fetch(`${url}/assistants/odd/schemas`);
    expect(odd.status).toBe(200);
    expect(((await odd.json()) as any).state_schema).toMatchObject({
      type: 'object',
      properties: { big: {}, note: { type: 'string' } },
      required: ['note'],
    });
    // ... and the log says why.
    await until('the log names the reason', async () => /"graph_id":"odd".*BigInt/.test(running.server.output()));
  });

  it('copies a thread: its history reads as the original with the new thread id, subgraph checkpoints included', async () => {
    const t = await client.threads.create({ metadata: { owner: 'ada' } });
    await client.runs.wait(t.thread_id, 'nested', { input: {} });
    const copy = await client.threads.copy(t.thread_id);
    expect(copy.thread_id).not.toBe(t.thread_id);
    const swap = (v: unknown) => JSON.parse(JSON.stringify(v).replaceAll(t.thread_id, copy.thread_id)) as unknown;
    const original = await client.threads.getHistory(t.thread_id, { limit: 50 });
    const copied = await client.threads.getHistory(copy.thread_id, { limit: 50 });
    expect(copied.length).toBe(original.length);
    expect(copied).toEqual(swap(original));
    expect(await client.threads.getState(copy.thread_id)).toEqual(swap(await client.threads.getState(t.thread_id)));
    const inner = (await client.threads.getState(t.thread_id)).tasks[0]!.checkpoint!;
    const sub = await client.threads.getHistory(copy.thread_id, { checkpoint: { checkpoint_ns: inner.checkpoint_ns } });
    expect(sub.length).toBeGreaterThan(0);
    expect(JSON.stringify(sub)).not.toContain(t.thread_id);
    // The copy's record: the original's metadata with its own thread_id, as the platform answers.
    expect(copy).toMatchObject({ metadata: { owner: 'ada', graph_id: 'nested', thread_id: copy.thread_id } });
    // Resuming the copy leaves the original waiting.
    await client.runs.wait(copy.thread_id, 'nested', { command: { resume: 'yes' } });
    expect((await client.threads.getState(copy.thread_id)).values).toEqual({ answer: 'yes' });
    expect((await client.threads.get(t.thread_id)).status).toBe('interrupted');
  });

  it('streams an interrupt inside a subgraph as LangGraph emits it: the same frames, names and interrupt ids', async () => {
    const modes = ['values', 'updates', 'tasks', 'checkpoints', 'debug'] as const;
    // What the library itself emits for the graph (the reference server relays these chunks as they come).
    const graph = Object.assign(Object.create(Object.getPrototypeOf(nested)), nested, {
      checkpointer: new MemorySaver(),
    }) as typeof nested;
    const lib: string[] = [];
    const stream = await graph.stream(
      {},
      { configurable: { thread_id: 'lib' }, streamMode: [...modes], subgraphs: true },
    );
    for await (const [ns, mode] of stream) lib.push(ns.length ? `${mode}|${ns.join('|')}` : mode);

    const t = await client.threads.create();
    const events: { event: string; data: any }[] = [];
    for await (const e of client.runs.stream(t.thread_id, 'nested', {
      input: {},
      streamMode: [...modes],
      streamSubgraphs: true,
    }))
      events.push(e);
    const task = (name: string) => name.replace(/^([a-z]+\|inner):[0-9a-f-]{36}$/, '$1:<task>');
    expect(events[0]!.event).toBe('metadata');
    expect(events.slice(1).map((e) => task(e.event))).toEqual(lib.map(task));

    // One interrupt id everywhere: the subgraph's frames, the root's, the state and the thread.
    const state = await client.threads.getState(t.thread_id);
    const taskId = state.tasks[0]!.id;
    const id = state.tasks[0]!.interrupts[0]!.id!;
    expect(events.find((e) => e.event === `updates|inner:${taskId}`)!.data).toEqual({
      __interrupt__: [{ id, value: { question: 'approve?' } }],
    });
    expect(events.find((e) => e.event === 'values')!.data).toEqual({
      __interrupt__: [{ id, value: { question: 'approve?' } }],
    });
    expect((await client.threads.get(t.thread_id)).interrupts).toEqual({
      [taskId]: [{ id, value: { question: 'approve?' } }],
    });
    // Resumed by that id (the map form), the subgraph finishes.
    await client.runs.wait(t.thread_id, 'nested', { command: { resume: { [id]: 'approved' } } });
    expect((await client.threads.getState(t.thread_id)).values).toEqual({ answer: 'approved' });

    // Without stream_subgraphs only the root's frames come, as the library gives them; the interrupt among them.
    const rootOnly: string[] = [];
    const libRoot = await graph.stream({}, { configurable: { thread_id: 'lib-root' }, streamMode: [...modes] });
    for await (const [mode] of libRoot) rootOnly.push(mode);
    const plain = await client.threads.create();
    const root: { event: string; data: any }[] = [];
    for await (const e of client.runs.stream(plain.thread_id, 'nested', { input: {}, streamMode: [...modes] }))
      root.push(e);
    expect(root.slice(1).map((e) => e.event)).toEqual(rootOnly);
    const rootId = (await client.threads.getState(plain.thread_id)).tasks[0]!.interrupts[0]!.id;
    expect(root.find((e) => e.event === 'updates')!.data).toEqual({
      __interrupt__: [{ id: rootId, value: { question: 'approve?' } }],
    });
  });

  it("passes the caller's configurable user_id through without custom auth ('' when none is given)", async () => {
    expect(
      await client.runs.wait(null, 'seen', { input: {}, config: { configurable: { user_id: 'user-7' } } }),
    ).toMatchObject({ user_id: 'user-7' });
    expect(await client.runs.wait(null, 'seen', { input: {} })).toMatchObject({ user_id: '' });
    const t = await client.threads.create();
    const run = await client.runs.create(t.thread_id, 'seen', {
      input: {},
      config: { configurable: { user_id: 'u8' } },
    });
    // curl's view: the run record keeps it.
    const record = (await (await fetch(`${url}/threads/${t.thread_id}/runs/${run.run_id}`)).json()) as any;
    expect(record.kwargs.config.configurable.user_id).toBe('u8');
  });

  it("raises a failed run's error from wait (thread and stateless) with the platform's error form; thread in error", async () => {
    const t = await client.threads.create();
    const limited = { input: {}, config: { recursion_limit: 4 } };
    // recursion_limit is honoured: the message names the limit the request set.
    await expect(client.runs.wait(t.thread_id, 'loop', limited)).rejects.toThrow(
      /^GraphRecursionError: Recursion limit of 4 reached without hitting a stop condition/,
    );
    expect((await client.threads.get(t.thread_id)).status).toBe('error');
    const [run] = await client.runs.list(t.thread_id);
    expect(run!.status).toBe('error');
    await expect(client.runs.wait(null, 'loop', limited)).rejects.toThrow(/^GraphRecursionError: Recursion limit of 4/);

    // Plain HTTP: the answer is the error form, not the last state.
    const again = await client.threads.create();
    const raw = await post(`/threads/${again.thread_id}/runs/wait`, { assistant_id: 'loop', ...limited });
    expect(raw.body).toEqual({
      __error__: { error: 'GraphRecursionError', message: expect.stringMatching(/^Recursion limit of 4 reached/) },
    });
    expect(raw.body).not.toHaveProperty('n');
    const stateless = await post('/runs/wait', { assistant_id: 'loop', ...limited });
    expect(stateless.body.__error__).toMatchObject({ error: 'GraphRecursionError' });
  });

  it("delivers a relative webhook to the deployment's own custom route, with the run and webhooks.headers", async () => {
    const seen = async () => (await (await fetch(`${url}/hooks/seen`)).json()) as Delivered[];
    const t = await client.threads.create();
    const run = await client.runs.create(t.thread_id, 'seen', { input: {}, webhook: '/hooks/done?tag=a' });
    await until('the webhook arrived', async () => (await seen()).some((d) => d.body.run_id === run.run_id));
    const got = (await seen()).find((d) => d.body.run_id === run.run_id)!;
    expect(got).toMatchObject({
      path: '/hooks/done',
      secret: 's3cret',
      body: { status: 'success', thread_id: t.thread_id, values: { marker: 'from-langgraph-json' } },
    });
    // Crons take the same targets.
    const cron = await post('/runs/crons', { assistant_id: 'seen', schedule: '0 0 1 1 *', webhook: '/hooks/done' });
    expect(cron.status).toBe(200);
  });

  it('never lets a relative webhook reach a built-in route, and refuses paths that are not paths', async () => {
    const victim = await client.threads.create();
    await client.runs.wait(victim.thread_id, 'seen', { input: {} });
    const history = (await client.threads.getHistory(victim.thread_id)).length;
    const t = await client.threads.create();
    const before = await client.threads.count();
    // Built-in routes that would act on the webhook's body with the server's rights: a copy of another thread, a
    // state write (the body carries "values"), a new assistant.
    const targets = [`/threads/${victim.thread_id}/copy`, `/threads/${victim.thread_id}/state`, '/assistants'];
    for (const webhook of targets) {
      const r = await client.runs.create(t.thread_id, 'seen', { input: {}, webhook });
      await client.runs.join(t.thread_id, r.run_id);
    }
    // Deliveries go out in order right after each run: once a later one has arrived, the earlier ones were made.
    const marker = await client.runs.create(t.thread_id, 'seen', { input: {}, webhook: '/hooks/done' });
    await until('a later webhook arrived', async () =>
      ((await (await fetch(`${url}/hooks/seen`)).json()) as Delivered[]).some((d) => d.body.run_id === marker.run_id),
    );
    expect(await client.threads.count()).toBe(before);
    expect((await client.threads.getHistory(victim.thread_id)).length).toBe(history);
    expect((await client.assistants.search({ limit: 100 })).every((a) => a.metadata?.created_by === 'system')).toBe(
      true,
    );
    for (const webhook of ['//evil.example/hook', '/\\evil.example', 'hooks/done', 'ftp://x.example/h']) {
      const res = await post(`/threads/${t.thread_id}/runs`, { assistant_id: 'seen', input: {}, webhook });
      expect(res.status, webhook).toBe(422);
      expect(res.body.detail, webhook).toMatch(/webhook/);
    }
  });
});

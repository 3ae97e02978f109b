// What the reference servers' own HTTP suite (langgraphjs libs/langgraph-api/tests/api.test.mts) checks and this
// server used to miss, tested our own way through the real SDK against a real server process on both stores:
// emptying the server between test groups (POST /internal/truncate, only with --test-truncate); a thread's history
// filtered by the metadata of the run that wrote it; a subgraph task's checkpoint as the platform shows it and passed
// back whole to read and update that subgraph; a UI entry whose name is not a JS identifier. docs/agent-server.md
// ("The reference suite") lists the suite's items and where this server stands on each.
import { Client } from '@langchain/langgraph-sdk';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { parseAgentServerConfig } from '../../src/agent-server/config.ts';
import { startHarness } from '../agent-server/helpers/harness.ts';
import { startServerOnStore, type StoreServer } from '../agent-server/helpers/store-server.ts';

const CONFIG = new URL('../agent-server/fixtures/reference-suite/langgraph.json', import.meta.url).pathname;

type Msg = { content: string; type: string };

describe.each(['embedded', 'postgres'] as const)('reference suite behaviours (%s)', (store) => {
  let running: StoreServer;
  let url: string;
  let client: Client;

  beforeAll(async () => {
    running = await startServerOnStore(store, ['--config', CONFIG, '--test-truncate']);
    url = running.server.url;
    client = new Client({ apiUrl: url, callerOptions: { maxRetries: 0 } });
  });
  afterAll(async () => {
    await running?.close();
  });

  const truncate = (body: unknown) =>
    fetch(`${url}/internal/truncate`, {
      method: 'POST',
      headers: { 'content-type': 'application/json' },
      body: JSON.stringify(body),
    });

  it('POST /internal/truncate empties what it names: threads (with their runs), store items, API assistants', async () => {
    const mine = await client.assistants.create({ graphId: 'steps', name: 'mine' });
    const t = await client.threads.create({ metadata: { owner: 'a' } });
    await client.runs.wait(t.thread_id, 'steps', { input: { messages: [{ type: 'human', content: 'hi' }] } });
    await client.threads.create();
    await client.store.putItem(['notes', 'a'], 'k1', { v: 1 });
    await client.store.putItem(['other'], 'k2', { v: 2 });

    // Threads only: the store and the assistants stay.
    let res = await truncate({ threads: true });
    expect(res.status).toBe(200);
    expect(await res.json()).toMatchObject({ ok: true, deleted: { threads: 2, store: 0, assistants: 0 } });
    expect(await client.threads.search()).toEqual([]);
    await expect(client.threads.get(t.thread_id)).rejects.toThrow(/404/);
    expect((await client.store.listNamespaces()).namespaces).toHaveLength(2);

    res = await truncate({ store: true, assistants: true });
    expect(await res.json()).toMatchObject({ deleted: { store: 2, assistants: 1 } });
    expect((await client.store.listNamespaces()).namespaces).toEqual([]);
    expect((await client.store.searchItems(['notes'])).items).toEqual([]);
    await expect(client.assistants.get(mine.assistant_id)).rejects.toThrow(/404/);
    // Each graph's system assistant stays: runs by graph name keep working.
    const system = await client.assistants.search({ metadata: { created_by: 'system' } });
    expect(system.map((a) => a.graph_id).sort()).toEqual(['forecast', 'steps', 'typed']);

    // A field it does not know is refused, naming it, rather than read as "nothing".
    res = await truncate({ thread: true });
    expect(res.status).toBe(422);
    expect(((await res.json()) as { detail: string }).detail).toMatch(/thread/);
  });

  it("a thread's history filtered by run metadata holds the checkpoints that run wrote", async () => {
    const t = await client.threads.create();
    expect(await client.threads.getHistory(t.thread_id)).toEqual([]);
    await client.runs.wait(t.thread_id, 'steps', { input: { messages: [{ type: 'human', content: 'first' }] } });
    const first = await client.threads.getHistory<{ messages: Msg[] }>(t.thread_id);
    expect(first.map((s) => s.values.messages?.length ?? 0)).toEqual([3, 2, 1, 0]);
    expect(first.at(-1)?.next).toEqual(['__start__']);

    await client.runs.wait(t.thread_id, 'steps', {
      input: { messages: [{ type: 'human', content: 'second' }] },
      metadata: { batch: 'b-7' },
    });
    const all = await client.threads.getHistory<{ messages: Msg[] }>(t.thread_id);
    expect(all).toHaveLength(8);
    const second = await client.threads.getHistory<{ messages: Msg[] }>(t.thread_id, { metadata: { batch: 'b-7' } });
    // The second run's four checkpoints: its input checkpoint already holds the first run's three messages.
    expect(second.map((s) => s.values.messages.length)).toEqual([6, 5, 4, 3]);
    expect(second.every((s) => s.metadata?.batch === 'b-7')).toBe(true);
    expect(await client.threads.getHistory(t.thread_id, { metadata: { batch: 'other' } })).toEqual([]);
  });

  it("a waiting subgraph's task names {thread_id, checkpoint_ns}, and that object reads and updates the subgraph", async () => {
    const t = await client.threads.create();
    const chunks: Array<{ event: string }> = [];
    for await (const c of client.runs.stream(t.thread_id, 'forecast', {
      input: { messages: [{ role: 'human', content: 'weather?', id: 'q' }] },
    })) {
      chunks.push(c);
    }
    expect(chunks.filter((c) => c.event === 'error')).toEqual([]);

    const state = await client.threads.getState(t.thread_id);
    expect(state.next).toEqual(['forecast']);
    expect(state.tasks).toEqual([
      {
        id: expect.any(String),
        name: 'forecast',
        path: ['__pregel_pull', 'forecast'],
        error: null,
        interrupts: [],
        // Exactly these two keys: the subgraph's own checkpoint is not named before it has run.
        checkpoint: { thread_id: t.thread_id, checkpoint_ns: expect.stringMatching(/^forecast:/) },
        state: null,
        result: null,
      },
    ]);
    const sub = state.tasks[0]!.checkpoint!;

    await client.threads.updateState(t.thread_id, { values: { city: 'Oslo' }, checkpoint: sub });
    const inner = await client.threads.getState<{ city: string }>(t.thread_id, sub);
    expect(inner.values.city).toBe('Oslo');
    expect(inner.next).toEqual(['report']);

    let last: { event: string; data: { messages?: Msg[] } } | undefined;
    for await (const c of client.runs.stream(t.thread_id, 'forecast', { input: null })) {
      last = c as { event: string; data: { messages?: Msg[] } };
    }
    expect(last?.event).toBe('values');
    expect(last?.data.messages?.map((m) => m.content)).toEqual(['weather?', 'Rain in Oslo']);

    const outer = await client.threads.getHistory<{ messages: Msg[] }>(t.thread_id);
    expect(outer.map((s) => s.next)).toEqual([[], ['forecast'], ['router'], ['__start__']]);
    const innerHistory = await client.threads.getHistory<{ messages: Msg[] }>(t.thread_id, { checkpoint: sub });
    expect(innerHistory[0]!.values.messages).toHaveLength(2);
    expect(innerHistory.at(-1)?.next).toEqual(['__start__']);
    expect(innerHistory.length).toBeGreaterThanOrEqual(4);
  });

  it("a run's frames are the platform's: metadata {run_id, attempt}, messages with name null (and the seed's example)", async () => {
    const t = await client.threads.create();
    const human = {
      content: 'weather?',
      additional_kwargs: {},
      response_metadata: {},
      type: 'human',
      name: null,
      id: 'q',
      // Seed 2.3 lists `example` (boolean) on every message; the hosted platform's current version leaves it out.
      example: false,
    };
    const first: Array<{ event: string; data: unknown }> = [];
    for await (const { event, data } of client.runs.stream(t.thread_id, 'forecast', {
      input: { messages: [{ role: 'human', content: 'weather?', id: 'q' }] },
    })) {
      first.push({ event, data });
    }
    const runId = (first[0]?.data as { run_id: string }).run_id;
    // Exactly: the thread is the stream's own (or in Content-Location), not repeated in the event.
    expect(first[0]).toEqual({ event: 'metadata', data: { run_id: runId, attempt: 1 } });
    expect(first.slice(1, 3)).toEqual([
      { event: 'values', data: { messages: [human] } },
      { event: 'values', data: { messages: [human], route: 'forecast' } },
    ]);

    // A join replaying the run sends the same first event.
    const joined: Array<{ event: string; data: unknown }> = [];
    for await (const { event, data } of client.runs.joinStream(t.thread_id, runId, { lastEventId: '-1' })) {
      joined.push({ event, data });
    }
    expect(joined[0]).toEqual(first[0]);

    let last: { event: string; data: unknown } | undefined;
    for await (const { event, data } of client.runs.stream(t.thread_id, 'forecast', {
      input: null,
      streamMode: ['values', 'updates'],
      streamSubgraphs: true,
    })) {
      if (event === 'metadata') expect(Object.keys(data as object).sort()).toEqual(['attempt', 'run_id']);
      last = { event, data };
    }
    expect(last).toEqual({
      event: 'values',
      data: {
        route: 'forecast',
        messages: [
          human,
          {
            content: 'Rain in Paris',
            additional_kwargs: {},
            response_metadata: {},
            type: 'ai',
            name: null,
            id: 'report',
            example: false,
            tool_calls: [],
            invalid_tool_calls: [],
          },
        ],
      },
    });
  });

  it("types Annotation state and context from the graph's TypeScript source, its subgraphs' too", async () => {
    const typed = await client.assistants.create({ graphId: 'typed' });
    const schemas = await client.assistants.getSchemas(typed.assistant_id);
    expect(schemas.state_schema).toMatchObject({
      $schema: 'http://json-schema.org/draft-07/schema#',
      properties: {
        // Literal unions become enums (sorted); what the channel shows at runtime stays beside the type.
        tone: { type: 'string', enum: ['dry', 'warm'] },
        count: { type: 'number' },
        messages: { type: 'array', items: { $ref: '#/definitions/BaseMessage' }, langgraph_type: 'messages' },
      },
      definitions: {
        BaseMessage: {
          description: expect.stringContaining('Base class for all types of messages'),
          oneOf: expect.arrayContaining([{ $ref: '#/definitions/HumanMessage' }, { $ref: '#/definitions/AIMessage' }]),
        },
        HumanMessage: { type: 'object', properties: { type: { const: 'human' } } },
      },
    });
    // Every $ref points at a definition the schema carries.
    const refs = [...JSON.stringify(schemas.state_schema).matchAll(/"#\/definitions\/(\w+)"/g)].map((m) => m[1]!);
    const defined = Object.keys((schemas.state_schema as { definitions: object }).definitions);
    expect(refs.filter((r) => !defined.includes(r))).toEqual([]);
    expect(schemas.context_schema).toMatchObject({ type: 'object', properties: { model: { enum: ['big', 'small'] } } });
    expect(schemas.config_schema).toEqual(schemas.context_schema);

    const subgraphs = await client.assistants.getSubgraphs(typed.assistant_id, { recurse: true });
    expect(Object.keys(subgraphs)).toEqual(['review', 'review|check']);
    expect(subgraphs.review!.state_schema).toMatchObject({
      properties: {
        verdict: { type: 'string', enum: ['no', 'yes'] },
        notes: { type: 'array', items: { type: 'string' } },
      },
    });
    expect(subgraphs['review|check']!.state_schema).toMatchObject({
      properties: { score: { type: ['number', 'null'] }, verdict: { enum: ['no', 'yes'] } },
    });
    // The JS reference server's names for the same schemas, beside the platform's.
    const review = subgraphs.review as unknown as Record<string, unknown>;
    expect(review.state).toEqual(review.state_schema);
    expect(review.config).toEqual(review.config_schema);
  });

  it('a UI entry named "chat-widget" renders through __LGUI_chat_widget; "chat_widget" beside it keeps its own', async () => {
    const ui = (client as unknown as { '~ui': { getComponent(a: string, n: string): Promise<string> } })['~ui'];
    const dashed = await ui.getComponent('chat-widget', 'card');
    expect(dashed).toContain(
      `<script src="${url}/ui/chat-widget/entrypoint.js" onload='__LGUI_chat_widget.render("card", "{{shadowRootId}}")'></script>`,
    );
    const js = await (await fetch(`${url}/ui/chat-widget/entrypoint.js`)).text();
    expect(js).toContain('var __LGUI_chat_widget =');
    // Both names would make the same identifier: the second one gets another, so neither page global is overwritten.
    const underscored = await ui.getComponent('chat_widget', 'card');
    const global = /onload='([\w$]+)\.render/.exec(underscored)?.[1];
    expect(global).toMatch(/^__LGUI_/);
    expect(global).not.toBe('__LGUI_chat_widget');
    expect(await (await fetch(`${url}/ui/chat_widget/entrypoint.js`)).text()).toContain(`var ${global} =`);
  });
});

describe('POST /internal/truncate is off unless asked for', () => {
  it('is a 404 on a server started without --test-truncate, and deletes nothing', async () => {
    const h = await startHarness({ store: 'embedded' });
    try {
      const created = await h.call('POST', '/threads', {});
      expect(created.status).toBe(200);
      const res = await h.call('POST', '/internal/truncate', { threads: true });
      expect(res.status).toBe(404);
      expect((await h.call('GET', `/threads/${created.body.thread_id}`)).status).toBe(200);
    } finally {
      await h.close();
    }
  });

  it("is not switched on by a project's langgraph.json env, only by the flag or the process environment", () => {
    const parse = (argv: string[], env: NodeJS.ProcessEnv) => parseAgentServerConfig(argv, env)!.testTruncate;
    const hostile = new URL('../agent-server/fixtures/reference-suite/truncate-env/langgraph.json', import.meta.url)
      .pathname;
    expect(parse(['--config', hostile], {})).toBeUndefined();
    expect(parse(['--config', hostile, '--test-truncate'], {})).toBe(true);
    expect(parse(['--config', CONFIG], { AGENTPLANE_TEST_TRUNCATE: '1' })).toBe(true);
    expect(parse(['--config', CONFIG], {})).toBeUndefined();
  });
});

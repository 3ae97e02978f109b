// The lean checkpoint reader must give exactly what LangGraph's own serializer gives, for every document: the
// common ones through its one synchronous pass, everything else by handing over to the package.
import {
  AIMessage,
  AIMessageChunk,
  ChatMessage,
  FunctionMessage,
  HumanMessage,
  RemoveMessage,
  SystemMessage,
  ToolMessage,
  ToolMessageChunk,
} from '@langchain/core/messages';
import { Document } from '@langchain/core/documents';
import { JsonPlusSerializer } from '@langchain/langgraph-checkpoint';
import { MemorySaver, MessagesAnnotation, StateGraph } from '@langchain/langgraph';
import { afterEach, describe, expect, it, vi } from 'vitest';
import { LeanCheckpointSerializer } from '../../../src/agent-server/shims/checkpoint-serde.ts';

const pkg = new JsonPlusSerializer();
const lean = new LeanCheckpointSerializer();

function messagesOfEveryKind() {
  return [
    new HumanMessage({ content: 'hi', id: 'h1', name: 'ada', additional_kwargs: { x: [1, { y: null }] } }),
    new HumanMessage({
      content: [
        { type: 'text', text: 'look' },
        { type: 'image_url', image_url: { url: 'data:x' } },
      ],
    }),
    new AIMessage({
      content: '',
      id: 'a1',
      tool_calls: [{ id: 't1', name: 'search', args: { q: 'sf', n: 3, nested: { deep: [true] } }, type: 'tool_call' }],
      invalid_tool_calls: [{ id: 't2', name: 'bad', args: '{oops', error: 'parse', type: 'invalid_tool_call' }],
      usage_metadata: { input_tokens: 3, output_tokens: 5, total_tokens: 8 },
      response_metadata: { model_name: 'fake', finish_reason: 'tool_calls' },
    }),
    new AIMessageChunk({
      content: 'par',
      id: 'c1',
      tool_call_chunks: [{ id: 't3', name: 'f', args: '{"a"', index: 0 }],
    }),
    new ToolMessage({
      content: 'sunny',
      tool_call_id: 't1',
      name: 'search',
      artifact: { raw: [1, 2] },
      status: 'success',
    }),
    new ToolMessageChunk({ content: 'part', tool_call_id: 't9' }),
    new SystemMessage({ content: 'be brief', id: 's1' }),
    new ChatMessage({ content: 'x', role: 'critic' }),
    new FunctionMessage({ content: '{}', name: 'fn' }),
    new RemoveMessage({ id: 'h1' }),
  ];
}

async function both(value: unknown): Promise<{ expected: unknown; actual: unknown }> {
  const [type, bytes] = await pkg.dumpsTyped(value);
  return { expected: await pkg.loadsTyped(type, bytes), actual: await lean.loadsTyped(type, bytes) };
}

async function bothFromText(text: string): Promise<{ expected: unknown; actual: unknown }> {
  return { expected: await pkg.loadsTyped('json', text), actual: await lean.loadsTyped('json', text) };
}

function expectSame({ expected, actual }: { expected: unknown; actual: unknown }): void {
  expect(actual).toStrictEqual(expected);
  expect(JSON.stringify(actual)).toBe(JSON.stringify(expected));
}

/** A two-node graph (a tool call, then its result) run once on `saver`. */
async function runToolGraph(saver: MemorySaver) {
  const graph = new StateGraph(MessagesAnnotation)
    .addNode('agent', () => ({
      messages: [new AIMessage({ content: '', tool_calls: [{ id: 'c1', name: 'look', args: { q: 'x' } }] })],
    }))
    .addNode('tools', () => ({ messages: [new ToolMessage({ content: 'found', tool_call_id: 'c1' })] }))
    .addEdge('__start__', 'agent')
    .addEdge('agent', 'tools')
    .addEdge('tools', '__end__')
    .compile({ checkpointer: saver });
  const config = { configurable: { thread_id: 't' } };
  await graph.invoke({ messages: [new HumanMessage('find x')] }, config);
  return { graph, config };
}

describe('LeanCheckpointSerializer', () => {
  afterEach(() => vi.restoreAllMocks());

  it('revives every message class as the package does, in one synchronous pass', async () => {
    const slow = vi.spyOn(JsonPlusSerializer.prototype as unknown as { _loads(d: string): Promise<unknown> }, '_loads');
    const doc = { v: 4, channel_values: { messages: messagesOfEveryKind(), count: 2, note: undefined, empty: [] } };
    const { expected, actual } = await both(doc);
    const fromPackage = slow.mock.calls.length;
    expectSame({ expected, actual });
    const revived = (actual as { channel_values: { messages: object[] } }).channel_values.messages;
    const originals = messagesOfEveryKind();
    revived.forEach((m, i) => expect(Object.getPrototypeOf(m)).toBe(Object.getPrototypeOf(originals[i])));
    expect((actual as { channel_values: object }).channel_values).toHaveProperty('note', undefined);
    // The package's reader ran once, for `expected`; the lean one did not hand over.
    expect(fromPackage).toBe(1);
  });

  it('hands documents with anything else to the package, with the same result', async () => {
    const slow = vi.spyOn(JsonPlusSerializer.prototype as unknown as { _loads(d: string): Promise<unknown> }, '_loads');
    // [value, whether its document needs the package's reader]
    const cases: Array<[unknown, boolean]> = [
      [{ set: new Set([1, 2]), map: new Map([['a', 1]]) }, true],
      [{ when: new Error('boom'), re: /a+b/gi, bytes: new Uint8Array([1, 2, 255]) }, true],
      [{ msg: new AIMessage({ content: 'x', additional_kwargs: { inner: { lc: 3, type: 'undefined' } } }) }, true],
      [{ msg: new AIMessage({ content: 'x', additional_kwargs: { inner: new HumanMessage('nested') } }) }, true],
      [{ deep: Array.from({ length: 60 }).reduce<unknown>((acc) => ({ acc }), { leaf: new HumanMessage('d') }) }, true],
      // A message serialises its kwargs itself: a Set in them is stored as {}, plain data.
      [{ msg: new AIMessage({ content: 'x', additional_kwargs: { missing: undefined, set: new Set(['a']) } }) }, false],
    ];
    for (const [value, handsOver] of cases) {
      slow.mockClear();
      const pair = await both(value);
      expectSame(pair);
      expect(slow.mock.calls.length).toBe(handsOver ? 2 : 1);
    }
  });

  it('reads hand-written documents the same way, odd keys and numbers included', async () => {
    const texts = [
      '{"__proto__": {"polluted": true}, "a": 1}',
      '{"a": {"lc": 2, "type": "undefined"}, "b": [{"lc": 2, "type": "undefined"}]}',
      '{"a": {"lc": 3}}',
      '{"n": 1e400, "m": -0}',
      '{"m": {"lc": 1, "type": "constructor", "id": ["langchain_core", "messages", "HumanMessage"], "kwargs": {"content": "x", "__proto__": {"p": 1}}}}',
      '{"m": {"lc": 1, "type": "constructor", "id": ["langchain_core", "messages", "HumanMessage"], "kwargs": {"content": "x", "response_metadata": {"n": 1e400}}}}',
      '{"m": {"lc": 1, "type": "constructor", "id": ["langchain_core", "messages", "human", "HumanMessage"], "kwargs": {"content": "x"}}}',
      '{"m": {"lc": 1, "type": "constructor", "id": ["langchain_core", "messages", "coerceMessageLikeToMessage"], "kwargs": {}}}',
      '{"m": {"lc": 1, "type": "constructor", "id": ["langchain_core", "messages", "HumanMessage"]}}',
      '{"m": {"lc": 1, "type": "secret", "id": ["OPENAI_API_KEY"]}}',
      '{"m": {"lc": 1, "type": "constructor", "id": ["langchain_core", "messages", "HumanMessage"], "kwargs": {"content": "x", "Mixed-Key name": 1, "tool_call_id": "t"}}}',
    ];
    for (const text of texts) {
      const settle = async (p: Promise<unknown>) =>
        p.then(
          (v) => ({ v }),
          (e: Error) => ({ e: e.message }),
        );
      const expected = await settle(pkg.loadsTyped('json', text));
      const actual = await settle(lean.loadsTyped('json', text));
      expect(actual, text).toStrictEqual(expected);
    }
    expectSame(await bothFromText('{"ok": [1, "two", null, true, {"x": 1.5}]}'));
    // A Document is stored as its plain fields.
    expectSame(await both({ doc: new Document({ pageContent: 'text', metadata: { source: 's' } }) }));
    // State shaped like a serialised message is a message to the package, and so here (it stores it as is).
    const shaped = { lc: 1, type: 'constructor', id: ['langchain_core', 'messages', 'AIMessage'], kwargs: {} };
    expectSame(await both({ user: shaped }));
    // undefined inside a message's kwargs: dropped from objects, null in arrays, as the package's round trip does.
    expectSame(
      await bothFromText(
        '{"m": {"lc": 1, "type": "constructor", "id": ["langchain_core", "messages", "AIMessage"], "kwargs": ' +
          '{"content": "x", "usage_metadata": {"lc": 2, "type": "undefined"}, "additional_kwargs": ' +
          '{"list": [1, {"lc": 2, "type": "undefined"}], "o": {"gone": {"lc": 2, "type": "undefined"}}}}}}',
      ),
    );
  });

  it('reads what a graph run checkpoints exactly as the package does', async () => {
    const saver = new MemorySaver();
    const { config } = await runToolGraph(saver);
    for await (const snapshot of saver.list(config)) {
      expectSame(await both(snapshot.checkpoint));
      expectSame(await both(snapshot.metadata));
      for (const [, , value] of snapshot.pendingWrites ?? []) expectSame(await both(value));
    }
  });
});

describe('LeanCheckpointSerializer writing', () => {
  afterEach(() => vi.restoreAllMocks());

  const text = async (s: JsonPlusSerializer, value: unknown) => {
    const [type, bytes] = await s.dumpsTyped(value);
    return `${type}:${new TextDecoder().decode(bytes)}`;
  };
  const spyWriter = () =>
    vi.spyOn(JsonPlusSerializer.prototype as unknown as { _dumps(v: unknown): Uint8Array }, '_dumps');

  it('writes the same text as the package for plain data, undefined, messages and toJSON values, in one pass', async () => {
    const slow = spyWriter();
    const withToJSON = (result: unknown) => ({ toJSON: () => result });
    const holes: unknown[] = [1];
    holes[3] = 'after a hole';
    const cases: unknown[] = [
      { v: 4, channel_values: { messages: messagesOfEveryKind(), count: 2, note: undefined, empty: [], z: null } },
      messagesOfEveryKind(),
      undefined,
      'text',
      [undefined, null, 1, [undefined]],
      holes,
      { nan: NaN, inf: -Infinity, zero: -0, big: 1e300, str: 'quote " backslash \\ ✓ \ud83d\ude00 \u0000' },
      { fn: () => 1, sym: Symbol('s'), list: [() => 1, Symbol('t')] },
      { when: new Date('2026-11-27T10:00:00Z'), dates: [new Date(0)] },
      {
        custom: withToJSON({ inner: undefined, list: [undefined, 2] }),
        prim: withToJSON(7),
        none: withToJSON(undefined),
      },
      { shared: ((o) => ({ a: o, b: o, c: [o, o] }))({ x: undefined }) },
      {
        msg: new AIMessage({
          content: 'x',
          additional_kwargs: { missing: undefined, nested: [undefined, { u: undefined }] },
        }),
      },
      { ['__proto__']: 1, normal: 2 },
      JSON.parse('{"__proto__": {"own": true}, "a": [1]}'),
      Object.assign(Object.create(null), { bare: undefined, n: 1 }),
      { deep: Array.from({ length: 150 }).reduce<unknown>((acc) => ({ acc }), { leaf: new HumanMessage('d') }) },
    ];
    for (const value of cases) {
      slow.mockClear();
      expect(await text(lean, value)).toBe(await text(pkg, value));
      // Only the package's own call for the expected text: the lean writer did not hand over.
      expect(slow.mock.calls.length).toBe(1);
    }
  });

  it('hands anything the package rewrites or refuses to its writer, with the same result', async () => {
    const slow = spyWriter();
    class Point {
      constructor(
        public x: number,
        public y: number,
      ) {}
    }
    const cycle: Record<string, unknown> = { name: 'loop' };
    cycle.self = cycle;
    const ownToJSON = { toJSON: () => ({ toJSON: () => 'never called', kept: 1 }) };
    const cases: unknown[] = [
      { set: new Set([1, undefined]), map: new Map([['a', { b: undefined }]]) },
      { err: new Error('boom'), re: /a+b/gi },
      { bytes: new Uint8Array([1, 2, 255]), buf: Buffer.from('hi') },
      { send: { lg_name: 'Send', node: 'n', args: { a: 1 } } },
      { point: new Point(1, 2) },
      { big: 10n },
      { boxed: Object(1), s: Object('s') },
      cycle,
      ownToJSON,
      { deep: Array.from({ length: 400 }).reduce<unknown>((acc) => [acc], 'leaf') },
    ];
    for (const value of cases) {
      slow.mockClear();
      expect(await text(lean, value)).toBe(await text(pkg, value));
      expect(slow.mock.calls.length).toBe(2);
    }
    // A Send is the package's to write.
    expect(await text(lean, { send: { lg_name: 'Send', node: 'n', args: 1 } })).toContain('"node":"n"');
  });

  it('writes what a graph run checkpoints exactly as the package does, and reads it back', async () => {
    const slow = spyWriter();
    const saver = new MemorySaver(new LeanCheckpointSerializer());
    const { graph, config } = await runToolGraph(saver);
    expect(slow).not.toHaveBeenCalled();
    let seen = 0;
    for await (const snapshot of saver.list(config)) {
      seen++;
      for (const value of [
        snapshot.checkpoint,
        snapshot.metadata,
        ...(snapshot.pendingWrites ?? []).map((w) => w[2]),
      ]) {
        expect(await text(lean, value)).toBe(await text(pkg, value));
      }
    }
    expect(seen).toBeGreaterThan(2);
    expect((await graph.getState(config)).values.messages.map((m: { content: unknown }) => m.content)).toEqual([
      'find x',
      '',
      'found',
    ]);
  });
});

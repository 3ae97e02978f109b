// messageJSON() must give exactly what a message's own toJSON() gives (and messageDictOf() what toDict() gives),
// for every @langchain/core message class and every shape of fields, or give nothing and leave it to toJSON().
import {
  AIMessage,
  AIMessageChunk,
  ChatMessage,
  ChatMessageChunk,
  FunctionMessage,
  FunctionMessageChunk,
  HumanMessage,
  HumanMessageChunk,
  RemoveMessage,
  SystemMessage,
  SystemMessageChunk,
  ToolMessage,
  ToolMessageChunk,
} from '@langchain/core/messages';
import { Document } from '@langchain/core/documents';
import { describe, expect, it } from 'vitest';
import { messageDictOf, messageJSON } from '../../../src/agent-server/shims/message-json.ts';
import { stringify } from '../../../src/agent-server/serde.ts';

function messages(): object[] {
  const tricky = {
    lcLike: { lc: 1, type: 'secret', id: ['KEY'] },
    escapedLike: { __lc_escaped__: 'x' },
    twoKeys: { __lc_escaped__: 'x', other: 1 },
    when: new Date('2026-11-27T00:00:00Z'),
    doc: new Document({ pageContent: 'p', metadata: { a: 1 } }),
    nested: [{ lc: 2 }, [{ deep: { lc: 3, x: [1] } }], null, 'text', 1.5, true],
    inner: new HumanMessage('inside'),
    camelCaseKey: { innerCamel: 1 },
    undef: undefined,
  };
  const ai = new AIMessage({
    content: '',
    id: 'a1',
    name: 'bot',
    tool_calls: [{ id: 't1', name: 'search', args: { q: 'sf', nested: { lc: 1 } }, type: 'tool_call' }],
    invalid_tool_calls: [{ id: 't2', name: 'bad', args: '{oops', error: 'parse', type: 'invalid_tool_call' }],
    usage_metadata: { input_tokens: 3, output_tokens: 5, total_tokens: 8 },
    response_metadata: { model_name: 'fake', finish_reason: 'tool_calls', tricky },
    additional_kwargs: tricky,
  });
  const mutated = new AIMessage({ content: 'before', id: 'm1' });
  mutated.content = 'after';
  (mutated as unknown as { response_metadata: unknown }).response_metadata = { changed: true };
  const chunk = new AIMessageChunk({
    content: 'par',
    id: 'c1',
    tool_call_chunks: [{ id: 't3', name: 'f', args: '{"a"', index: 0 }],
  }).concat(new AIMessageChunk({ content: 'tial', tool_call_chunks: [{ args: ':1}', index: 0 }] }));
  return [
    new HumanMessage('plain'),
    new HumanMessage({
      content: [
        { type: 'text', text: 'look' },
        { type: 'image_url', image_url: { url: 'data:x' } },
      ],
      id: 'h2',
    }),
    new HumanMessage({ content: 'x', additional_kwargs: { x: [1, { y: null }] }, name: 'ada' }),
    ai,
    mutated,
    chunk,
    new AIMessageChunk({ content: 'c', usage_metadata: { input_tokens: 1, output_tokens: 1, total_tokens: 2 } }),
    new ToolMessage({
      content: 'sunny',
      tool_call_id: 't1',
      name: 'search',
      artifact: { raw: [1, 2], lc: 9 },
      status: 'success',
    }),
    new ToolMessage({ content: [{ type: 'text', text: 'block' }], tool_call_id: 't1', status: 'error' }),
    new ToolMessageChunk({ content: 'part', tool_call_id: 't9' }),
    new SystemMessage({ content: 'be brief', id: 's1' }),
    new SystemMessageChunk({ content: 'sys' }),
    new ChatMessage({ content: 'x', role: 'critic' }),
    new ChatMessageChunk({ content: 'y', role: 'critic' }),
    new FunctionMessage({ content: '{}', name: 'fn' }),
    new FunctionMessageChunk({ content: '{}', name: 'fn' }),
    new HumanMessageChunk({ content: 'h' }),
    new RemoveMessage({ id: 'h1' }),
  ];
}

describe('messageJSON', () => {
  it('gives what toJSON() and toDict() give, for every message class', () => {
    for (const m of messages()) {
      const own = (m as { toJSON(): unknown }).toJSON();
      const fast = messageJSON(m);
      expect(fast, m.constructor.name).toBeDefined();
      expect(fast).toStrictEqual(own);
      expect(JSON.stringify(fast)).toBe(JSON.stringify(own));
      const dict = (m as { toDict(): unknown }).toDict();
      expect(messageDictOf(m)).toStrictEqual(dict);
      expect(JSON.stringify(messageDictOf(m))).toBe(JSON.stringify(dict));
    }
  });

  it('gives the same answer on repeated calls (what it remembers per class does not leak between messages)', () => {
    const first = messages().map((m) => JSON.stringify(messageJSON(m)));
    const again = messages().map((m) => JSON.stringify(messageJSON(m)));
    expect(again).toEqual(first);
    expect(new Set(first).size).toBe(first.length);
  });

  it('leaves subclasses, overrides, cycles and odd keys to the message itself', () => {
    class MyMessage extends AIMessage {}
    const own = new AIMessage('own toJSON');
    (own as unknown as { toJSON: () => unknown }).toJSON = () => ({ custom: true });
    const cyclic = new AIMessage({ content: 'c', additional_kwargs: {} });
    (cyclic.additional_kwargs as Record<string, unknown>).self = cyclic;
    const loop: Record<string, unknown> = {};
    loop.loop = loop;
    const looping = new AIMessage({ content: 'c', additional_kwargs: { loop } });
    const proto = new AIMessage({ content: 'p', additional_kwargs: JSON.parse('{"__proto__": {"x": 1}}') });
    for (const m of [new MyMessage('sub'), own, cyclic, looping, proto, { toJSON: () => 1 }]) {
      expect(messageJSON(m)).toBeUndefined();
    }
    // And the serialiser still gives what the message's own methods give.
    expect(JSON.parse(stringify(cyclic))).toMatchObject({ content: 'c', type: 'ai' });
    expect(JSON.parse(stringify(new MyMessage('sub')))).toMatchObject({ content: 'sub', type: 'ai' });
  });
});

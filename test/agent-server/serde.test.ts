import { AIMessage, HumanMessage, ToolMessage } from '@langchain/core/messages';
import { describe, expect, it } from 'vitest';
import { stringify, toPlain } from '../../src/agent-server/serde.ts';

describe('serde', () => {
  it('turns messages anywhere in a value into the dict form, with name and example always present', () => {
    const ai = new AIMessage({
      content: '',
      id: 'a2',
      tool_calls: [{ id: 't1', name: 'greet', args: { who: 'Ada' } }],
    });
    const out = toPlain<Record<string, unknown>>({
      messages: [new HumanMessage({ content: 'Ada', id: 'h1' }), ai],
      nested: { deeper: [{ tool: new ToolMessage({ content: 'hi', tool_call_id: 't1' }) }] },
    });
    expect(out.messages).toEqual([
      expect.objectContaining({ type: 'human', content: 'Ada', id: 'h1', name: null, example: false }),
      expect.objectContaining({
        type: 'ai',
        id: 'a2',
        tool_calls: [expect.objectContaining({ id: 't1', name: 'greet', args: { who: 'Ada' } })],
      }),
    ]);
    expect((out.nested as { deeper: Array<{ tool: unknown }> }).deeper[0]!.tool).toMatchObject({
      type: 'tool',
      tool_call_id: 't1',
      content: 'hi',
    });
    // The "lc" constructor form never leaks.
    expect(stringify(ai)).not.toContain('"lc"');
  });

  it('serialises like JSON.stringify otherwise: toJSON, bigints, undefined, functions', () => {
    const value = {
      when: new Date(0),
      big: 12345678901234567890n,
      gone: undefined,
      fn: () => 1,
      list: [undefined, 1n, () => 2],
      map: new Map([['a', 1]]),
    };
    expect(JSON.parse(stringify(value))).toEqual({
      when: '1970-01-01T00:00:00.000Z',
      big: '12345678901234567890',
      list: [null, '1', null],
      map: {},
    });
    expect(stringify(undefined)).toBe('null');
    expect(toPlain(undefined)).toBeNull();
    expect(stringify('x')).toBe('"x"');
  });

  it('serialises what toJSON returns (messages inside included) without changing the object toJSON handed out', () => {
    const kept = { inner: new HumanMessage({ content: 'kept', id: 'k' }), n: 2n };
    const holder = { toJSON: () => kept };
    expect(JSON.parse(stringify({ holder }))).toEqual({
      holder: { inner: expect.objectContaining({ type: 'human', content: 'kept' }), n: '2' },
    });
    expect(kept.inner).toBeInstanceOf(HumanMessage);
    expect(kept.n).toBe(2n);
  });

  it('leaves the input untouched and refuses cycles as JSON.stringify does', () => {
    const input = { messages: [new HumanMessage('a')], n: 1n };
    toPlain(input);
    expect(input.messages[0]).toBeInstanceOf(HumanMessage);
    expect(input.n).toBe(1n);
    const loop: Record<string, unknown> = { a: 1 };
    loop.self = { back: loop };
    expect(() => stringify(loop)).toThrow(/circular/);
    // The same object twice, not a cycle, is fine.
    const shared = { x: 1 };
    expect(JSON.parse(stringify({ a: shared, b: [shared, shared] }))).toEqual({ a: { x: 1 }, b: [{ x: 1 }, { x: 1 }] });
  });
});

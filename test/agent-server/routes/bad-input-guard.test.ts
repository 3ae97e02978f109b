// The input walk on its own: every kind of string problem, keys as well as values, and the depth bound.
import { describe, expect, it } from 'vitest';
import { findInputProblem, MAX_JSON_DEPTH, stringProblem } from '../../../src/agent-server/routes/input-guard.ts';

/** `levels` nested arrays around `inner` (built as text: JSON.stringify itself recurses). */
const nested = (levels: number, inner = '1') => JSON.parse('['.repeat(levels) + inner + ']'.repeat(levels)) as unknown;

describe('stringProblem', () => {
  it.each([
    ['plain text', 'hello', null],
    ['empty', '', null],
    ['emoji (a valid surrogate pair)', 'ok 😀 \ud83d\ude00', null],
    ['NUL', 'a\u0000b', 'a NUL character (\\u0000)'],
    ['NUL and a lone surrogate: NUL is named', '\ud800\u0000', 'a NUL character (\\u0000)'],
    ['lone high surrogate', 'x\ud800y', 'a lone UTF-16 surrogate (\\ud800)'],
    ['lone high surrogate at the end', 'x\udbff', 'a lone UTF-16 surrogate (\\udbff)'],
    ['lone low surrogate', '\udc00x', 'a lone UTF-16 surrogate (\\udc00)'],
    ['pair in the wrong order', '\ude00\ud83d', 'a lone UTF-16 surrogate (\\ude00)'],
    ['valid pair then a lone one', '😀\udfff', 'a lone UTF-16 surrogate (\\udfff)'],
  ])('%s', (_name, s, expected) => {
    expect(stringProblem(s)).toBe(expected);
  });
});

describe('findInputProblem', () => {
  it.each<[string, unknown, string | null]>([
    ['numbers, booleans, null', { a: 1, b: [true, null, 2.5] }, null],
    ['emoji in keys and values', { '😀': ['😀'] }, null],
    [
      'NUL in a nested value',
      { metadata: { note: 'a\u0000' } },
      'body.metadata.note contains a NUL character (\\u0000)',
    ],
    [
      'NUL in an array item',
      { input: { steps: ['ok', 'x\u0000'] } },
      'body.input.steps.1 contains a NUL character (\\u0000)',
    ],
    [
      'NUL in a key',
      { metadata: { 'a\u0000b': 1 } },
      'body.metadata has a key "a\\u0000b" that contains a NUL character (\\u0000)',
    ],
    [
      'lone surrogate in a key',
      { config: { configurable: { '\ud800': 1 } } },
      'body.config.configurable has a key "\\ud800" that contains a lone UTF-16 surrogate (\\ud800)',
    ],
    ['lone surrogate as the whole body', '\udc00', 'body contains a lone UTF-16 surrogate (\\udc00)'],
    [
      'first problem in document order wins',
      { a: 'fine', b: '\u0000', c: '\ud800' },
      'body.b contains a NUL character (\\u0000)',
    ],
  ])('%s', (_name, value, expected) => {
    expect(findInputProblem(value, 'body')).toBe(expected);
  });

  it('shows long and awkward keys escaped and cut short', () => {
    const key = `${'k'.repeat(100)}\u0000`;
    expect(findInputProblem({ [key]: 1 }, 'body')).toBe(
      `body has a key "${'k'.repeat(40)}…" that contains a NUL character (\\u0000)`,
    );
    expect(findInputProblem({ 'x.😀': { y: '\ud800' } }, 'querystring')).toBe(
      'querystring.x.😀.y contains a lone UTF-16 surrogate (\\ud800)',
    );
  });

  it(`accepts ${MAX_JSON_DEPTH} levels and refuses one more, naming the bound and a shortened path`, () => {
    expect(findInputProblem(nested(MAX_JSON_DEPTH), 'body')).toBeNull();
    expect(findInputProblem({ a: nested(MAX_JSON_DEPTH - 1) }, 'body')).toBeNull();
    expect(findInputProblem({ a: nested(MAX_JSON_DEPTH) }, 'body')).toBe(
      `body.a.0.0.0.0.0.0.….0.0.0 is nested deeper than ${MAX_JSON_DEPTH} levels of objects and arrays (the most accepted)`,
    );
    expect(findInputProblem(nested(3), 'body', 2)).toMatch(/^body\.0\.0 is nested deeper than 2 levels/);
  });

  it('walks a million levels without recursion, and stops at the bound', () => {
    const deep = nested(1_000_000);
    expect(findInputProblem(deep, 'body')).toMatch(/nested deeper than 256 levels/);
    // Deep objects too; and a problem string beyond the bound is not what gets reported.
    const text = '{"a":'.repeat(100_000) + '"\\u0000"' + '}'.repeat(100_000);
    expect(findInputProblem(JSON.parse(text), 'body')).toMatch(/nested deeper than 256 levels/);
  });

  it('walks a wide body without trouble', () => {
    const wide = Array.from({ length: 200_000 }, (_, i) => ({ i, s: `item ${i}` }));
    expect(findInputProblem({ input: wide }, 'body')).toBeNull();
    wide[199_999]!.s = 'last\u0000';
    expect(findInputProblem({ input: wide }, 'body')).toBe('body.input.199999.s contains a NUL character (\\u0000)');
  });
});

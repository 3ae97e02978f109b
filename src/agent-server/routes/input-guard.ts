// One check on every request's parsed input, before schema validation, so that both stores see the same input
// and no route can skip it: strings (values and object keys) must hold no NUL and no lone UTF-16 surrogate
// (Postgres text and jsonb cannot store them, SQLite can; refusing keeps the stores alike), and JSON may nest at
// most MAX_JSON_DEPTH levels (JSON.stringify, SQLite's JSON functions and jsonb recurse on depth).
// The walk is an explicit stack, so a body nested a million levels deep cannot exhaust the call stack here.

/** Deepest accepted nesting of objects and arrays in a body; the body itself is level 1. */
export const MAX_JSON_DEPTH = 256;

/** One step of a field path; the path is only built when a problem is reported. */
interface PathStep {
  readonly up: PathStep | null;
  readonly key: string | number;
}

const PATH_HEAD = 8;
const PATH_TAIL = 3;
const KEY_SHOWN = 40;

// String.prototype.isWellFormed is in Node 20 but not in the ES2023 lib this project compiles against.
type WellFormedCheck = string & { isWellFormed(): boolean };

// eslint-disable-next-line no-control-regex -- NUL is one of the characters this finds
const UNSHOWABLE = /\u0000|[\ud800-\udbff](?![\udc00-\udfff])|(?<![\ud800-\udbff])[\udc00-\udfff]/g;

/** The string's offending character named for a message, or null when the string is fine. */
export function stringProblem(s: string): string | null {
  if (s.indexOf('\u0000') !== -1) return 'a NUL character (\\u0000)';
  if ((s as WellFormedCheck).isWellFormed()) return null;
  for (let i = 0; i < s.length; i++) {
    const c = s.charCodeAt(i);
    if (c >= 0xd800 && c <= 0xdbff) {
      const next = s.charCodeAt(i + 1);
      if (next >= 0xdc00 && next <= 0xdfff) {
        i++;
        continue;
      }
    } else if (c < 0xdc00 || c > 0xdfff) {
      continue;
    }
    return `a lone UTF-16 surrogate (\\u${c.toString(16)})`;
  }
  return null;
}

/** A key made printable: NULs and surrogates written as escapes, long keys cut short. */
function showKey(key: string | number): string {
  if (typeof key === 'number') return String(key);
  const cut = key.length > KEY_SHOWN ? `${key.slice(0, KEY_SHOWN)}…` : key;
  return cut.replace(UNSHOWABLE, (ch) => `\\u${ch.charCodeAt(0).toString(16).padStart(4, '0')}`);
}

function showPath(step: PathStep): string {
  const keys: (string | number)[] = [];
  for (let s: PathStep | null = step; s; s = s.up) keys.push(s.key);
  keys.reverse();
  const shown =
    keys.length > PATH_HEAD + PATH_TAIL + 1
      ? [...keys.slice(0, PATH_HEAD).map(showKey), '…', ...keys.slice(-PATH_TAIL).map(showKey)]
      : keys.map(showKey);
  return shown.join('.');
}

/**
 * The first problem in a parsed JSON value (or a params/query object), as a sentence naming the field path from
 * `root`, or null when the value is acceptable.
 */
export function findInputProblem(value: unknown, root: string, maxDepth = MAX_JSON_DEPTH): string | null {
  // depth: how many objects/arrays enclose the entry.
  const stack: { value: unknown; at: PathStep; depth: number }[] = [{ value, at: { up: null, key: root }, depth: 0 }];
  for (let top = stack.pop(); top; top = stack.pop()) {
    const { value: v, at, depth } = top;
    if (typeof v === 'string') {
      const problem = stringProblem(v);
      if (problem) return `${showPath(at)} contains ${problem}`;
      continue;
    }
    if (v === null || typeof v !== 'object') continue;
    if (depth + 1 > maxDepth) {
      return `${showPath(at)} is nested deeper than ${maxDepth} levels of objects and arrays (the most accepted)`;
    }
    if (Array.isArray(v)) {
      for (let i = v.length - 1; i >= 0; i--) stack.push({ value: v[i], at: { up: at, key: i }, depth: depth + 1 });
      continue;
    }
    const keys = Object.keys(v);
    for (const key of keys) {
      const problem = stringProblem(key);
      if (problem) return `${showPath(at)} has a key "${showKey(key)}" that contains ${problem}`;
    }
    for (let i = keys.length - 1; i >= 0; i--) {
      const key = keys[i]!;
      stack.push({ value: (v as Record<string, unknown>)[key], at: { up: at, key }, depth: depth + 1 });
    }
  }
  return null;
}

// Checkpoint deserialisation without a promise per JSON value. LangGraph's JsonPlusSerializer revives a loaded
// checkpoint with an async function called on every value of the document (a promise each, and each promise pays
// for the async hooks that AsyncLocalStorage keeps enabled), and every LangChain message in it goes through
// `load()`: stringified again, parsed again, and revived by a second async walk. On a GET of thread state or a
// run's first checkpoint read that was the largest part of the work.
//
// LeanCheckpointSerializer revives the common documents in one synchronous pass over the parsed JSON, building the
// very objects the package would: plain containers, `undefined` records, and messages of @langchain/core's message
// classes made as `load()` makes them (its constructor, the keys mapped from JSON the same way). Anything else (a
// Set, Map, Error, RegExp, bytes or delta-snapshot record, another LangChain class, a secret, escaped user data
// holding an "lc" key, a "__proto__" key, a number JSON cannot hold) hands the whole document to the package's
// own code, unchanged. Writing is below.
import { JsonPlusSerializer } from '@langchain/langgraph-checkpoint';
import * as messages from '@langchain/core/messages';
import { CORE_MESSAGE_CLASSES, messageJSON } from './message-json.ts';

type Dict = Record<string, unknown>;
type MessageClass = new (fields: Dict) => object;

/** Thrown inside the fast pass: the document needs the package's reviver. */
const FALLBACK = Symbol('checkpoint-serde-fallback');

/** load() refuses documents nested deeper than this (and the package's error is the one to give). */
const MAX_DEPTH = 40;

const MESSAGE_CLASSES: ReadonlySet<string> = new Set(CORE_MESSAGE_CLASSES);

interface Builder {
  cls: MessageClass;
  /** The class's lc_aliases inverted (JSON key -> field), as load() maps kwargs. */
  fromJson: Record<string, string>;
}
const builders = new Map<string, Builder | null>();

function builderFor(name: string): Builder | null {
  let b = builders.get(name);
  if (b !== undefined) return b;
  const cls = (messages as unknown as Record<string, unknown>)[name];
  b = null;
  if (MESSAGE_CLASSES.has(name) && typeof cls === 'function') {
    const aliases: Record<string, string> = {};
    for (let c = cls as { prototype?: object } | null; c?.prototype; c = Object.getPrototypeOf(c) as typeof c) {
      Object.assign(aliases, Reflect.get(c.prototype, 'lc_aliases'));
    }
    const fromJson: Record<string, string> = {};
    for (const [field, jsonKey] of Object.entries(aliases)) fromJson[jsonKey] = field;
    // load() sets the class's name to the serialised one after each construction; it is the same name.
    Object.defineProperty(cls, 'name', { value: name });
    b = { cls: cls as MessageClass, fromJson };
  }
  builders.set(name, b);
  return b;
}

/** A JSON key as a constructor field (snake_case -> camelCase), the way LangChain's load() maps kwargs. */
function fieldOf(key: string, fromJson: Record<string, string>): string {
  const alias = fromJson[key];
  if (alias) return alias;
  const trimmed = key.trim();
  if (!/[-_\s]/.test(trimmed)) return trimmed;
  return trimmed
    .replace(/[-_\s]+/g, '_')
    .toLowerCase()
    .replace(/_+([a-z0-9])/g, (_, c: string) => c.toUpperCase());
}

const isUndefinedRecord = (v: unknown): boolean =>
  v !== null && typeof v === 'object' && (v as Dict).lc === 2 && (v as Dict).type === 'undefined';

/**
 * A message's kwargs as the package's path leaves them: it revives them, stringifies the result (an `undefined`
 * record is dropped from an object, null in an array) and parses that again. Plain data only, changed in place.
 */
function plainKwargs(value: unknown, depth: number): unknown {
  if (typeof value === 'number' && !Number.isFinite(value)) throw FALLBACK;
  if (value === null || typeof value !== 'object') return value;
  if (depth > MAX_DEPTH) throw FALLBACK;
  if (Array.isArray(value)) {
    for (let i = 0; i < value.length; i++) {
      value[i] = isUndefinedRecord(value[i]) ? null : plainKwargs(value[i], depth + 1);
    }
    return value;
  }
  const obj = value as Dict;
  if (Object.hasOwn(obj, '__proto__') || 'lc' in obj || '__lc_escaped__' in obj) throw FALLBACK;
  for (const k in obj) {
    if (isUndefinedRecord(obj[k])) delete obj[k];
    else obj[k] = plainKwargs(obj[k], depth + 1);
  }
  return obj;
}

function message(record: Dict, depth: number): object {
  const id = record.id as unknown[];
  const kwargs = record.kwargs;
  if (id.length !== 3 || id[0] !== 'langchain_core' || id[1] !== 'messages' || typeof id[2] !== 'string') {
    throw FALLBACK;
  }
  if (kwargs === null || typeof kwargs !== 'object' || Array.isArray(kwargs)) throw FALLBACK;
  const b = builderFor(id[2]);
  if (!b) throw FALLBACK;
  plainKwargs(kwargs, depth + 1);
  const fields: Dict = {};
  for (const k in kwargs as Dict) fields[fieldOf(k, b.fromJson)] = (kwargs as Dict)[k];
  return new b.cls(fields);
}

/** Revives `value` (fresh from JSON.parse, so changed in place) as the package's reviver would. */
function revive(value: unknown, depth: number): unknown {
  if (typeof value === 'number' && !Number.isFinite(value)) throw FALLBACK;
  if (value === null || typeof value !== 'object') return value;
  if (depth > MAX_DEPTH) throw FALLBACK;
  if (Array.isArray(value)) {
    for (let i = 0; i < value.length; i++) value[i] = revive(value[i], depth + 1);
    return value;
  }
  const obj = value as Dict;
  if (Object.hasOwn(obj, '__proto__')) throw FALLBACK;
  if ('lc' in obj) {
    if (obj.lc === 1 && obj.type === 'constructor' && Array.isArray(obj.id) && 'kwargs' in obj) {
      return message(obj, depth);
    }
    if (obj.lc !== 2 || obj.type !== 'undefined') throw FALLBACK;
  }
  for (const k in obj) obj[k] = revive(obj[k], depth + 1);
  return 'lc' in obj ? undefined : obj;
}

// Writing. The package serialises with fast-safe-stringify: a first walk over the whole document looking for
// cycles, then JSON.stringify with a replacer, a call from native code into JavaScript for every value. For the
// documents of a run (plain data, `undefined`, LangChain messages and other values with toJSON) writeReady()
// makes in one walk what JSON.stringify needs to give the same text with no replacer: it calls toJSON as
// JSON.stringify does, puts the package's `undefined` record where the replacer would, and copies only the
// containers on the way to such a change. Anything the package's replacer rewrites (Set, Map, RegExp, Error, bytes,
// a Send, a delta snapshot), any other class instance, a bigint, a boxed primitive, a cycle or an object deeper
// than MAX_WRITE_DEPTH hands the whole document to the package's writer instead.

const UNDEFINED_RECORD = Object.freeze({ lc: 2, type: 'undefined' });
const MAX_WRITE_DEPTH = 200;

const isPlainContainer = (v: object): boolean => {
  if (Array.isArray(v)) return true;
  const proto = Object.getPrototypeOf(v) as unknown;
  return proto === Object.prototype || proto === null;
};

/**
 * `value` (found under `key`) as JSON.stringify with the package's replacer would see it, in a form that plain
 * JSON.stringify serialises to the same text; `undefined` where JSON.stringify leaves the value out.
 */
function writeReady(value: unknown, key: string, path: object[]): unknown {
  if (value === undefined) return UNDEFINED_RECORD;
  if (typeof value === 'bigint') throw FALLBACK;
  if (value === null || typeof value !== 'object') return value;
  let obj: object = value;
  const toJSON = (obj as Dict).toJSON;
  if (typeof toJSON === 'function') {
    const replaced = messageJSON(obj) ?? (toJSON as (k: string) => unknown).call(obj, key);
    if (replaced === undefined) return UNDEFINED_RECORD;
    if (typeof replaced === 'bigint') throw FALLBACK;
    if (replaced === null || typeof replaced !== 'object') return replaced;
    obj = replaced;
    // JSON.stringify does not call toJSON on what toJSON gave; plain JSON.stringify would, if it had one.
    if (Object.hasOwn(obj, 'toJSON')) throw FALLBACK;
  }
  // The package's replacer rewrites any object with lg_name "Send", plain ones included.
  if (!isPlainContainer(obj) || (obj as Dict).lg_name === 'Send') throw FALLBACK;
  if (path.length >= MAX_WRITE_DEPTH || path.includes(obj)) throw FALLBACK;
  path.push(obj);
  let out: Dict | unknown[] | undefined;
  if (Array.isArray(obj)) {
    const list = obj as unknown[];
    let copy: unknown[] | undefined;
    for (let i = 0; i < list.length; i++) {
      const item: unknown = list[i];
      const ready = writeReady(item, String(i), path);
      if (ready !== item) {
        copy ??= list.slice();
        copy[i] = ready;
      }
    }
    out = copy;
  } else {
    const dict = obj as Dict;
    for (const k of Object.keys(dict)) {
      const item = dict[k];
      const ready = writeReady(item, k, path);
      if (ready !== item) {
        out ??= { ...dict };
        (out as Dict)[k] = ready;
      }
    }
  }
  path.pop();
  return out ?? obj;
}

export class LeanCheckpointSerializer extends JsonPlusSerializer {
  protected override _dumps(obj: unknown): Uint8Array {
    let text: string;
    try {
      text = JSON.stringify(writeReady(obj, '', []));
    } catch (err) {
      if (err === FALLBACK) return super._dumps(obj);
      throw err;
    }
    return new TextEncoder().encode(text);
  }

  protected override async _loads(data: string): Promise<unknown> {
    const parsed: unknown = JSON.parse(data);
    try {
      return revive(parsed, 0);
    } catch (err) {
      if (err === FALLBACK) return super._loads(data);
      throw err;
    }
  }
}

// LangChain's serialised form of a message ({lc: 1, type: "constructor", id, kwargs}), as Serializable.toJSON()
// makes it, for the message classes of @langchain/core. A run serialises its messages again at every step (each
// values event and each checkpoint holds the whole list), and toJSON() redoes per call what is fixed per class: it
// walks the prototype chain calling the lc_aliases / lc_secrets / lc_attributes getters (each builds objects), builds
// lc_id, and maps every key to snake_case with three regular expressions. About 13 µs for an AIMessage.
//
// messageJSON() gives the same object with that per-class work done once: the class's aliases and id are read from
// its first instance (for these classes they are constants of the class), key mappings are remembered, and the
// kwargs are escaped exactly as toJSON() escapes them (objects holding an "lc" key wrapped, LangChain objects kept,
// other objects copied). It answers only for an instance of one of those classes that does not override anything
// involved and has no secrets or attributes; for anything else, or an odd input (a cycle, a "__proto__" key, very
// deep kwargs), it returns undefined and the caller uses the message's own toJSON().
import * as messages from '@langchain/core/messages';
import { Serializable } from '@langchain/core/load/serializable';

type Dict = Record<string, unknown>;
type Message = Dict & { lc_kwargs?: unknown; lc_serializable?: unknown };
export type SerializedMessage = { lc: 1; type: 'constructor'; id: string[]; kwargs: Dict };

/** The message classes of @langchain/core/messages (the ones a checkpoint may hold as such). */
export const CORE_MESSAGE_CLASSES = [
  'AIMessage',
  'AIMessageChunk',
  'ChatMessage',
  'ChatMessageChunk',
  'FunctionMessage',
  'FunctionMessageChunk',
  'HumanMessage',
  'HumanMessageChunk',
  'RemoveMessage',
  'SystemMessage',
  'SystemMessageChunk',
  'ToolMessage',
  'ToolMessageChunk',
] as const;

const TO_JSON = Serializable.prototype.toJSON;
const TO_DICT = messages.BaseMessage.prototype.toDict;

/** Thrown inside the pass: the message's own toJSON() is to be used. */
const OWN = Symbol('message-json-own');
const MAX_DEPTH = 100;

interface ClassInfo {
  id: string[];
  aliases: Record<string, string>;
  /** Field name -> JSON key, filled as keys are met. */
  keys: Map<string, string>;
}

const known = new Map<object, string>();
for (const name of CORE_MESSAGE_CLASSES) {
  const cls = (messages as unknown as Record<string, { prototype?: object } | undefined>)[name];
  if (cls?.prototype) known.set(cls.prototype, name);
}
const infos = new Map<object, ClassInfo | null>();

function infoFor(msg: Message, proto: object): ClassInfo | null {
  let info = infos.get(proto);
  if (info !== undefined) return info;
  info = null;
  const aliases: Record<string, string> = {};
  const secrets: Dict = {};
  const attributes: Dict = {};
  for (let c: object | null = proto; c; c = Object.getPrototypeOf(c) as object | null) {
    Object.assign(aliases, Reflect.get(c, 'lc_aliases', msg));
    Object.assign(secrets, Reflect.get(c, 'lc_secrets', msg));
    Object.assign(attributes, Reflect.get(c, 'lc_attributes', msg));
  }
  const id = (msg as { lc_id?: unknown }).lc_id;
  if (
    !Object.keys(secrets).length &&
    !Object.keys(attributes).length &&
    Array.isArray(id) &&
    id.every((p) => typeof p === 'string')
  ) {
    info = { id: id as string[], aliases, keys: new Map() };
  }
  infos.set(proto, info);
  return info;
}

// The same conversion as @langchain/core's snakeCase (load/map_keys).
function snakeCase(key: string): string {
  return key
    .replace(/([A-Z]+)([A-Z][a-z0-9]+)/g, '$1_$2')
    .replace(/([a-z0-9])([A-Z])/g, '$1_$2')
    .replace(/[-_\s]+/g, '_')
    .toLowerCase();
}

function jsonKey(info: ClassInfo, key: string): string {
  let k = info.keys.get(key);
  if (k === undefined) {
    k = info.aliases[key] || snakeCase(key);
    if (info.keys.size < 256) info.keys.set(key, k);
  }
  return k;
}

const isSerializableLike = (v: object): boolean => 'lc_serializable' in v && typeof (v as Dict).toJSON === 'function';

/** toJSON()'s escapeIfNeeded: objects with an "lc" key (or a lone "__lc_escaped__") wrapped, others copied. */
function escape(value: unknown, path: Set<object>, depth: number): unknown {
  if (value === null || typeof value !== 'object') return value;
  if (depth > MAX_DEPTH) throw OWN;
  if (Array.isArray(value)) return value.map((item) => escape(item, path, depth + 1));
  if (path.has(value)) throw OWN;
  if (isSerializableLike(value)) return value;
  const record = value as Dict;
  const keys = Object.keys(record);
  if ('lc' in record || (keys.length === 1 && '__lc_escaped__' in record)) return { __lc_escaped__: record };
  path.add(value);
  const out: Dict = {};
  for (const k of keys) {
    if (k === '__proto__') throw OWN;
    out[k] = escape(record[k], path, depth + 1);
  }
  path.delete(value);
  return out;
}

/** What `msg.toJSON()` returns, or undefined when the message's own toJSON() must be called. */
export function messageJSON(msg: object): SerializedMessage | undefined {
  const proto = Object.getPrototypeOf(msg) as object | null;
  if (!proto || !known.has(proto)) return undefined;
  const m = msg as Message;
  if (m.toJSON !== TO_JSON || m.lc_serializable !== true) return undefined;
  const lcKwargs = m.lc_kwargs;
  if (lcKwargs === null || typeof lcKwargs !== 'object' || Array.isArray(lcKwargs)) return undefined;
  if (lcKwargs instanceof Serializable) return undefined;
  const info = infoFor(m, proto);
  if (!info) return undefined;
  const kwargs: Dict = {};
  const path = new Set<object>([msg]);
  try {
    for (const key of Object.keys(lcKwargs)) {
      if (key === '__proto__') return undefined;
      const value = key in m ? m[key] : (lcKwargs as Dict)[key];
      kwargs[jsonKey(info, key)] = escape(value, path, 0);
    }
  } catch (err) {
    if (err === OWN) return undefined;
    throw err;
  }
  return { lc: 1, type: 'constructor', id: info.id.slice(), kwargs };
}

/** What `msg.toDict()` returns ({type, data: toJSON().kwargs}), or undefined as for messageJSON(). */
export function messageDictOf(msg: object): { type: string; data: Dict } | undefined {
  const m = msg as Dict & { getType?: () => string };
  if (m.toDict !== TO_DICT || typeof m.getType !== 'function') return undefined;
  const json = messageJSON(msg);
  return json && { type: m.getType(), data: json.kwargs };
}

// JSON for the wire and for stored thread values. LangChain messages serialise themselves in the "lc"
// constructor format; clients expect the plain dict form ({type, content, ...}), which toDict() gives.
//
// Values are first rewritten into what JSON.stringify serialises as-is (messages -> dicts, bigints -> strings,
// objects with toJSON -> its result), copying only the containers on the way to something rewritten. A replacer
// function would do the same at a higher cost: JSON.stringify calls a message's own toJSON (the expensive "lc"
// form) before the replacer can swap in the dict, and calls the replacer once per key of every object.

import { messageDictOf } from './shims/message-json.ts';

type Dict = Record<string, unknown>;

function messageDict(raw: { toDict(): { type: string; data: Dict } }): Dict {
  const { type, data } = messageDictOf(raw) ?? raw.toDict();
  // The production server always sends name (null when unset) and example; seed 2.3 lists both.
  return { ...data, name: data.name ?? null, example: data.example ?? false, type };
}

/** `value` as JSON.stringify needs it; the same object when nothing below it needs rewriting. */
function jsonReady(value: unknown, key: string, path: Set<object>): unknown {
  if (typeof value === 'bigint') return value.toString();
  if (value === null || typeof value !== 'object') return value;
  let obj = value as Dict;
  let fresh = false;
  if (typeof obj.toDict === 'function') {
    obj = messageDict(obj as unknown as { toDict(): { type: string; data: Dict } });
    fresh = true;
  } else if (typeof obj.toJSON === 'function') {
    // As JSON.stringify does: toJSON's result is serialised, without calling toJSON on it again.
    const replaced = (obj.toJSON as (k: string) => unknown)(key);
    if (replaced === null || typeof replaced !== 'object')
      return typeof replaced === 'bigint' ? String(replaced) : replaced;
    // Its result may be an object the instance keeps (toJSON() { return this.data }): copied, never written to.
    return walkChildren(replaced as Dict, path, false);
  }
  return walkChildren(obj, path, fresh);
}

function walkChildren(obj: Dict, path: Set<object>, fresh: boolean): unknown {
  if (path.has(obj)) throw new TypeError('Converting circular structure to JSON');
  path.add(obj);
  let out: Dict | unknown[] | undefined = fresh ? obj : undefined;
  if (Array.isArray(obj)) {
    for (let i = 0; i < obj.length; i++) {
      const item: unknown = obj[i];
      const ready = jsonReady(item, String(i), path);
      if (ready !== item) {
        out ??= (obj as unknown[]).slice();
        (out as unknown[])[i] = ready;
      }
    }
  } else {
    for (const k of Object.keys(obj)) {
      const item = obj[k];
      const ready = jsonReady(item, k, path);
      if (ready !== item) {
        out ??= { ...obj };
        (out as Dict)[k] = ready;
      }
    }
  }
  path.delete(obj);
  return out ?? obj;
}

export function stringify(value: unknown): string {
  return JSON.stringify(jsonReady(value, '', new Set())) ?? 'null';
}

/**
 * `value` as JSON.stringify serialises it as-is, without the round trip through text: messages become dicts,
 * class instances their JSON, and whatever needs no rewriting is shared with `value`, so the result is read-only.
 * Serialised later (a reply), it gives the same text as toPlain's copy would, from one serialisation.
 */
export function toJsonReady<T = unknown>(value: unknown): T {
  if (value === undefined) return null as T;
  return jsonReady(value, '', new Set()) as T;
}

/** A plain-JSON copy of graph output (messages turned into dicts, class instances into their JSON). */
export function toPlain<T = unknown>(value: unknown): T {
  if (value === undefined) return null as T;
  return JSON.parse(stringify(value)) as T;
}

export function serializeError(err: unknown): { error: string; message: string } {
  if (err instanceof Error) return { error: err.name || 'Error', message: err.message };
  return { error: 'Error', message: typeof err === 'string' ? err : stringify(err) };
}

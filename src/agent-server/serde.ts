// JSON for the wire and for stored thread values. LangChain messages serialise themselves in the "lc"
// constructor format; clients expect the plain dict form ({type, content, ...}), which toDict() gives.

function replacer(this: Record<string, unknown>, key: string, value: unknown): unknown {
  const raw = this[key];
  if (raw !== null && typeof raw === 'object' && typeof (raw as { toDict?: unknown }).toDict === 'function') {
    const { type, data } = (raw as { toDict(): { type: string; data: Record<string, unknown> } }).toDict();
    // The production server always sends name (null when unset) and example; seed 2.3 lists both.
    return { ...data, name: data.name ?? null, example: data.example ?? false, type };
  }
  if (typeof raw === 'bigint') return raw.toString();
  return value;
}

export function stringify(value: unknown): string {
  return JSON.stringify(value, replacer) ?? 'null';
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

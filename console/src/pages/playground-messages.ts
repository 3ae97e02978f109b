// The chat messages of a graph's state as the playground shows them: their kind, their text, and how a streamed
// message (whole, or a chunk of one) folds into the list.
export type Msg = {
  id?: string;
  type?: string;
  role?: string;
  content: unknown;
  name?: string;
  tool_calls?: { id?: string; name: string; args: unknown }[];
  tool_call_id?: string;
  status?: string;
};

export function kindOf(m: Msg): 'human' | 'ai' | 'tool' | 'system' {
  const t = (m.type ?? m.role ?? '').toLowerCase();
  if (t.startsWith('human') || t === 'user') return 'human';
  if (t.startsWith('tool')) return 'tool';
  if (t.startsWith('system')) return 'system';
  return 'ai';
}

export function textOf(content: unknown): string {
  if (typeof content === 'string') return content;
  if (Array.isArray(content)) {
    return content
      .map((b) =>
        b && typeof b === 'object' && (b as { type?: string }).type === 'text'
          ? String((b as { text?: unknown }).text ?? '')
          : '',
      )
      .join('');
  }
  return content == null ? '' : JSON.stringify(content);
}

/** Folds a streamed message (a whole message or a chunk of one) into the list, by id. */
export function upsert(list: Msg[], m: Msg): Msg[] {
  const i = m.id ? list.findIndex((x) => x.id === m.id) : -1;
  if (i < 0) return [...list, m];
  const prev = list[i]!;
  const isChunk = (m.type ?? '').endsWith('Chunk');
  const merged: Msg = isChunk
    ? {
        ...prev,
        ...m,
        content: textOf(prev.content) + textOf(m.content),
        tool_calls: m.tool_calls?.length ? m.tool_calls : prev.tool_calls,
      }
    : m;
  return list.map((x, j) => (j === i ? merged : x));
}

export function hasMessages(values: unknown): values is { messages: Msg[] } {
  return Boolean(values && typeof values === 'object' && Array.isArray((values as { messages?: unknown }).messages));
}

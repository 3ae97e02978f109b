// A raw server-sent-events reader over fetch: every event with its id, as the wire carries it (the SDK hides ids
// and reconnects by itself; these tests need to see both).
export interface SseEvent {
  id: number | null;
  event: string;
  data: unknown;
}

export interface SseRead {
  status: number;
  events: SseEvent[];
  /** Comment lines (heartbeats). */
  comments: number;
}

/**
 * Reads a stream until it ends, `signal` aborts, or `until` says so (then the connection is dropped).
 * Non-2xx answers come back with no events.
 */
export async function readSse(
  url: string,
  opts: {
    method?: string;
    body?: unknown;
    lastEventId?: number | string;
    until?: (events: SseEvent[]) => boolean;
    signal?: AbortSignal;
  } = {},
): Promise<SseRead & { body?: unknown }> {
  const abort = new AbortController();
  opts.signal?.addEventListener('abort', () => abort.abort(), { once: true });
  const res = await fetch(url, {
    method: opts.method ?? 'GET',
    signal: abort.signal,
    headers: {
      ...(opts.body !== undefined ? { 'content-type': 'application/json' } : {}),
      ...(opts.lastEventId !== undefined ? { 'last-event-id': String(opts.lastEventId) } : {}),
    },
    ...(opts.body !== undefined ? { body: JSON.stringify(opts.body) } : {}),
  });
  if (!res.ok) return { status: res.status, events: [], comments: 0, body: await res.json().catch(() => null) };
  const events: SseEvent[] = [];
  let comments = 0;
  let buf = '';
  const decoder = new TextDecoder();
  try {
    for await (const chunk of res.body as unknown as AsyncIterable<Uint8Array>) {
      buf += decoder.decode(chunk, { stream: true });
      let cut: number;
      while ((cut = buf.indexOf('\n\n')) >= 0) {
        const block = buf.slice(0, cut);
        buf = buf.slice(cut + 2);
        let event = 'message';
        let data = '';
        let id: number | null = null;
        let comment = false;
        for (const line of block.split('\n')) {
          if (line.startsWith(':')) comment = true;
          else if (line.startsWith('event: ')) event = line.slice(7);
          else if (line.startsWith('data: ')) data += line.slice(6);
          else if (line.startsWith('id: ')) id = Number(line.slice(4));
        }
        if (comment && !data) comments++;
        else events.push({ id, event, data: data ? JSON.parse(data) : null });
      }
      if (opts.until?.(events)) {
        abort.abort();
        break;
      }
    }
  } catch (err) {
    if (!abort.signal.aborted) throw err;
  }
  return { status: res.status, events, comments };
}

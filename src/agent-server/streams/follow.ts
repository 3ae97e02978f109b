// Following a run's (or a thread's) stream: pages of its durable log (StreamEventStore) from a cursor, live as
// new events are written by whichever process executes the run, until the run has ended and everything it
// wrote was read. Pull-based: the next page is read only when the consumer asks for it, so a slow client holds
// one page in memory, never a backlog.
import type { StoredStreamEvent, StreamEventStore } from '../storage/types.ts';

export interface FollowOptions {
  streams: StreamEventStore;
  key: { run_id: string } | { thread_id: string };
  /** Events with a greater id are read (-1: from the start). */
  afterId: number;
  /** Resolves once nothing more will be written (the run is terminal); never for a thread's stream. */
  ended: Promise<unknown>;
  signal: AbortSignal;
  pageSize?: number;
}

export async function* followStream(o: FollowOptions): AsyncGenerator<StoredStreamEvent[]> {
  const page = o.pageSize ?? 200;
  let cursor = o.afterId;
  let ended = false;
  // Set by every wake-up: whatever arrives between a read and the wait is not slept through.
  let dirty: boolean;
  let wake: (() => void) | null = null;
  const poke = () => {
    dirty = true;
    wake?.();
  };
  const unwatch = o.streams.watch(o.key, poke);
  void o.ended.then(() => {
    ended = true;
    poke();
  }, poke);
  o.signal.addEventListener('abort', poke, { once: true });
  try {
    while (!o.signal.aborted) {
      // Ended before this read began: the read sees every event (the engine stores them before finishing).
      const final = ended;
      dirty = false;
      const events =
        'run_id' in o.key
          ? await o.streams.read(o.key.run_id, cursor, page, final)
          : await o.streams.readThread(o.key.thread_id, cursor, page);
      if (events.length) {
        cursor = events[events.length - 1]!.id;
        yield events;
        if (events.length === page) continue;
      }
      if (final) return;
      if (dirty || o.signal.aborted) continue;
      await new Promise<void>((resolve) => {
        wake = resolve;
      });
      wake = null;
    }
  } finally {
    unwatch();
    o.signal.removeEventListener('abort', poke);
  }
}

/** Whether an event belongs to the stream modes a joining client asked for (metadata, error, feedback: always). */
/** Events of the run as a whole, whatever namespaces a stream asked for. */
const RUN_LEVEL_EVENTS = new Set(['metadata', 'error', 'feedback', 'end']);

/**
 * Only the events of these namespaces ("" the root graph), each without the subgraphs below it; null when none are
 * named. A namespace matches with its task ids (`node:task|node:task`, as event names carry it) or without them.
 */
export function namespaceFilter(namespaces: string[] | undefined): ((event: string) => boolean) | null {
  if (!namespaces?.length) return null;
  const wanted = new Set(namespaces);
  const nodesOnly = (ns: string) =>
    ns
      .split('|')
      .map((seg) => seg.split(':')[0])
      .join('|');
  return (event) => {
    const bar = event.indexOf('|');
    if (bar < 0) return RUN_LEVEL_EVENTS.has(event) || wanted.has('');
    const ns = event.slice(bar + 1);
    return wanted.has(ns) || wanted.has(nodesOnly(ns));
  };
}

export function eventFilter(modes: string[] | undefined): ((event: string) => boolean) | null {
  if (!modes?.length) return null;
  const names = new Set(['metadata', 'error', 'feedback']);
  for (const m of modes) {
    if (m === 'messages-tuple') names.add('messages');
    else if (m === 'messages') {
      for (const n of ['messages', 'messages/metadata', 'messages/partial', 'messages/complete']) names.add(n);
    } else names.add(m);
  }
  return (event) => {
    const bar = event.indexOf('|');
    return names.has(bar < 0 ? event : event.slice(0, bar));
  };
}

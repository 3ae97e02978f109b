// The newest events the Redis stream-events store (stream-events.ts) read per run, shared by the run's readers.
import type { StoredStreamEvent } from '../types.ts';

/** Recently read events kept per run so readers share them (count, bytes), and how long an unread run's stay. */
const RECENT_MAX = 5_000;
const RECENT_MAX_BYTES = 8 * 1024 * 1024;
const RECENT_IDLE_MS = 30_000;

/** The run's events after `afterId`, at most `limit`: one XRANGE of the run's stream. */
type Range = (runId: string, afterId: number, limit: number) => Promise<StoredStreamEvent[]>;

/** Reads of runs' events through the windows below; `range` reads what they do not hold. */
export function recentEvents(range: Range) {
  // The newest events read per run, as one window that holds every event of the run with lo < id <= hi (an
  // XRANGE answer is complete from its start, and a run's ids become visible in order). Readers whose cursor lies
  // in the window are served from it without a Redis round trip, and every reader gets the same object for the
  // same event (SSE frames are encoded once per object, see routes/stream.ts). Bounded; dropped when idle.
  interface Window {
    events: StoredStreamEvent[];
    lo: number;
    hi: number;
    bytes: number;
    usedAt: number;
  }
  const windows = new Map<string, Window>();
  /** Index of the first event with an id above `id`. */
  const after = (events: StoredStreamEvent[], id: number): number => {
    let a = 0;
    let b = events.length;
    while (a < b) {
      const m = (a + b) >>> 1;
      if (events[m]!.id <= id) a = m + 1;
      else b = m;
    }
    return a;
  };
  const trim = (w: Window): void => {
    let drop = 0;
    while (drop < w.events.length && (w.events.length - drop > RECENT_MAX || w.bytes > RECENT_MAX_BYTES)) {
      w.bytes -= w.events[drop]!.data.length;
      drop++;
    }
    if (!drop) return;
    w.lo = w.events[drop - 1]!.id;
    w.events.splice(0, drop);
  };
  /** Takes in what XRANGE answered after `afterId`; returns the events as the window's objects. */
  const absorb = (runId: string, afterId: number, events: StoredStreamEvent[]): StoredStreamEvent[] => {
    if (!events.length) return events;
    const last = events[events.length - 1]!.id;
    let w = windows.get(runId);
    if (!w || afterId > w.hi) {
      // No window yet, or this read starts past it (its readers moved on): the read becomes the window.
      windows.set(runId, (w = { events: [...events], lo: afterId, hi: last, bytes: 0, usedAt: Date.now() }));
      for (const e of events) w.bytes += e.data.length;
      trim(w);
      return events;
    }
    w.usedAt = Date.now();
    // Known events are answered with the window's objects; those past hi extend it when the read began inside it.
    const out = events.map((e) => {
      if (e.id <= w.lo || e.id > w.hi) return e;
      const known = w.events[after(w.events, e.id - 1)];
      return known?.id === e.id ? known : e;
    });
    if (afterId >= w.lo && last > w.hi) {
      for (const e of events.slice(after(events, w.hi))) {
        w.events.push(e);
        w.bytes += e.data.length;
      }
      w.hi = last;
      trim(w);
    }
    return out;
  };
  const sweepRecent = setInterval(() => {
    const old = Date.now() - RECENT_IDLE_MS;
    for (const [runId, w] of windows) if (w.usedAt < old) windows.delete(runId);
  }, RECENT_IDLE_MS / 2).unref();

  // Readers in step (many clients of one run, woken together) share one XRANGE.
  const inFlight = new Map<string, Promise<StoredStreamEvent[]>>();
  function fetch(runId: string, afterId: number, limit: number): Promise<StoredStreamEvent[]> {
    const key = `${runId}|${afterId}|${limit}`;
    let pending = inFlight.get(key);
    if (!pending) {
      pending = range(runId, afterId, limit)
        .then((events) => absorb(runId, afterId, events))
        .finally(() => inFlight.delete(key));
      inFlight.set(key, pending);
    }
    return pending;
  }
  async function read(runId: string, afterId: number, limit: number): Promise<StoredStreamEvent[]> {
    const w = windows.get(runId);
    if (!w || afterId < w.lo || afterId >= w.hi) return fetch(runId, afterId, limit);
    w.usedAt = Date.now();
    const from = after(w.events, afterId);
    const known = w.events.slice(from, from + limit);
    if (known.length === limit) return known;
    // The window ends before the page does: what came after it is asked for, so a short page still means
    // "nothing more yet" to the reader.
    const hi = w.hi;
    return known.concat(await fetch(runId, hi, limit - known.length));
  }

  return {
    read,
    /** Drops every window and stops their idle sweep. */
    close(): void {
      clearInterval(sweepRecent);
      windows.clear();
    },
  };
}

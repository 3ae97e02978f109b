// Stream events of the embedded store: one process owns the store, so the log lives in its memory (per run, in
// id order) with the same semantics as the Postgres table: one id counter, readable from any point, kept for the
// retention after the run's newest event. A restart starts an empty log. Memory is bounded: past `maxBytes` of
// event data the logs of the least recently written runs go first (a busy server keeps minutes, not hours).
import type { StoredStreamEvent, StreamEventStore } from '../types.ts';

interface RunLog {
  threadId: string;
  events: StoredStreamEvent[];
  bytes: number;
  lastAt: number;
}

const DEFAULT_MAX_BYTES = 256 * 1024 * 1024;

export function embeddedStreamEvents(opts: {
  retentionMs: number;
  maxBytes?: number;
}): StreamEventStore & { close(): Promise<void> } {
  const maxBytes = opts.maxBytes ?? DEFAULT_MAX_BYTES;
  /** By run id, least recently written first (a run moves to the end when written). */
  const runs = new Map<string, RunLog>();
  let totalBytes = 0;
  const threads = new Map<string, Set<string>>();
  const watchers = new Map<string, Set<() => void>>();
  let nextId = 1;
  let pendingWake = new Set<string>();
  let scheduled = false;

  const wake = (key: string) => {
    for (const fn of watchers.get(key) ?? []) fn();
  };
  // Readers are woken once per event-loop turn, like the Postgres store's batched writes.
  const flushWakes = () => {
    scheduled = false;
    const keys = pendingWake;
    pendingWake = new Set();
    for (const k of keys) wake(k);
  };

  const drop = (runId: string, log: RunLog) => {
    runs.delete(runId);
    totalBytes -= log.bytes;
    const set = threads.get(log.threadId);
    set?.delete(runId);
    if (set && !set.size) threads.delete(log.threadId);
  };

  /** First index with id > afterId. */
  const after = (events: StoredStreamEvent[], afterId: number): number => {
    let lo = 0;
    let hi = events.length;
    while (lo < hi) {
      const mid = (lo + hi) >> 1;
      if (events[mid]!.id <= afterId) lo = mid + 1;
      else hi = mid;
    }
    return lo;
  };

  return {
    append(runId, threadId, event, data) {
      let log = runs.get(runId);
      if (!log) {
        log = { threadId, events: [], bytes: 0, lastAt: 0 };
        let set = threads.get(threadId);
        if (!set) threads.set(threadId, (set = new Set()));
        set.add(runId);
      } else runs.delete(runId);
      runs.set(runId, log);
      log.events.push({ id: nextId++, run_id: runId, event, data });
      log.bytes += data.length;
      totalBytes += data.length;
      log.lastAt = Date.now();
      for (const [id, old] of runs) {
        if (totalBytes <= maxBytes || id === runId) break;
        drop(id, old);
      }
      pendingWake.add(runId);
      pendingWake.add(`t:${threadId}`);
      if (!scheduled) {
        scheduled = true;
        setImmediate(flushWakes);
      }
    },
    async flush() {},
    async read(runId, afterId, limit) {
      const events = runs.get(runId)?.events ?? [];
      const from = after(events, afterId);
      return events.slice(from, from + limit);
    },
    async readThread(threadId, afterId, limit) {
      // A thread's runs run one after another, so their logs do not interleave: merge by id anyway.
      const all: StoredStreamEvent[] = [];
      for (const runId of threads.get(threadId) ?? []) {
        const events = runs.get(runId)!.events;
        const from = after(events, afterId);
        for (let i = from; i < events.length && i < from + limit; i++) all.push(events[i]!);
      }
      return all.sort((a, b) => a.id - b.id).slice(0, limit);
    },
    async lastId() {
      return nextId - 1;
    },
    watch(key, fn) {
      const k = 'run_id' in key ? key.run_id : `t:${key.thread_id}`;
      let set = watchers.get(k);
      if (!set) watchers.set(k, (set = new Set()));
      set.add(fn);
      return () => {
        set.delete(fn);
        if (!set.size) watchers.delete(k);
      };
    },
    async sweep() {
      const old = Date.now() - opts.retentionMs;
      let n = 0;
      for (const [runId, log] of runs) {
        if (log.lastAt >= old) break;
        n += log.events.length;
        drop(runId, log);
      }
      return n;
    },
    async close() {
      runs.clear();
      threads.clear();
    },
  };
}

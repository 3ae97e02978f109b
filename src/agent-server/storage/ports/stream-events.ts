// The stream-events port: every run's stream events as one durable, ordered log (StreamEventStore).

/** Stream events stay readable this long after a run's newest one. */
export const DEFAULT_STREAM_RETENTION_MS = 10 * 60_000;

/** One event of a run's stream as stored: `data` is its JSON text, `id` grows strictly with every event. */
export interface StoredStreamEvent {
  id: number;
  run_id: string;
  event: string;
  data: string;
}

/**
 * Every run's stream events as one durable, ordered log readable by any process sharing the store, live and for
 * `retentionMs` after they were written (then swept). Ids come from one counter per store, so they grow across
 * runs and attempts: the events of a thread, read in id order, are its runs' events in the order they happened.
 * Only the process executing a run appends to it, and its appends become readable in order (one write at a time).
 */
export interface StreamEventStore {
  /** Queues an event; it is written with the others of this event-loop turn. `data` is JSON text. */
  append(runId: string, threadId: string, event: string, data: string): void;
  /** Resolves once every event queued so far is written (and readable everywhere); rejects if the write failed. */
  flush(): Promise<void>;
  /**
   * Events of the run with id > afterId, oldest first, at most `limit`. `fresh`: bypass what this process may
   * cache and look at the log itself (after the run ended, for its last events).
   */
  read(runId: string, afterId: number, limit: number, fresh?: boolean): Promise<StoredStreamEvent[]>;
  /** Events of every run of the thread with id > afterId, oldest first, at most `limit`. */
  readThread(threadId: string, afterId: number, limit: number): Promise<StoredStreamEvent[]>;
  /** The highest id written so far in this store (0 when none). */
  lastId(): Promise<number>;
  /** Calls `fn` whenever new events of this run or thread may be readable (from any process). */
  watch(key: { run_id: string } | { thread_id: string }, fn: () => void): () => void;
  /** Deletes the events of runs whose newest event is older than the retention; returns how many. */
  sweep(): Promise<number>;
}

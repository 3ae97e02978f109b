// The threads port: a thread's record (with the copy of its state's values written at the end of each run), the
// queries over threads, and their two ways to go (TTL sweep, prune).
import type { IfExists, Json, SortOrder } from './common.ts';

export type ThreadStatus = 'idle' | 'busy' | 'interrupted' | 'error';

/** POST /threads/prune: remove the threads, or every checkpoint of them but the latest of each namespace. */
export type PruneStrategy = 'delete' | 'keep_latest';

export interface Thread {
  thread_id: string;
  created_at: string;
  updated_at: string;
  state_updated_at: string;
  metadata: Json;
  status: ThreadStatus;
  config: Json;
  values: Json | null;
  interrupts: Json;
  error: Json | null;
}

export interface ThreadQuery {
  ids?: string[];
  metadata?: Json;
  values?: Json;
  status?: ThreadStatus;
  limit?: number;
  offset?: number;
  sort_by?: 'thread_id' | 'status' | 'created_at' | 'updated_at' | 'state_updated_at';
  sort_order?: SortOrder;
}

export interface NewThread {
  thread_id: string;
  metadata: Json;
  /** Minutes of inactivity after which the sweeper deletes the thread; absent: the store's default (see thread-ttl.ts). */
  ttl_minutes?: number | null;
}

/**
 * A thread without its copy of the state's values: what a read needs that takes the state from the checkpoints
 * (GET state). The values are written at the end of every run and can be megabytes; reading them there to drop
 * them cost a read and a parse per request (twice on Postgres, once per checkpoint row).
 */
export type ThreadHead = Omit<Thread, 'values'>;

export interface ThreadStore {
  create(t: NewThread, ifExists: IfExists): Promise<Thread>;
  get(id: string): Promise<Thread | null>;
  /**
   * get() without the values (ThreadHead), reading in the same statement the thread's newest two root checkpoints
   * for GET state: the store's checkpointer hands them to the reads that carry `token` under READ_AHEAD_KEY (see the
   * Postgres saver's readAhead). `release` drops what was not taken.
   */
  getReadingAhead(id: string, token: string): Promise<{ thread: ThreadHead | null; release: () => void }>;
  /**
   * A thread's metadata alone (null: no such thread): what the A2A push notifier reads as each A2A run starts and
   * ends, without the values the last run wrote (megabytes in a long conversation, decrypted and parsed by get()).
   */
  metadata(id: string): Promise<Json | null>;
  /** Merges metadata; a `ttl_minutes` replaces the thread's TTL. */
  patch(id: string, patch: { metadata?: Json; ttl_minutes?: number }): Promise<Thread>;
  /** Deletes the thread, its runs and its checkpoints; NotFoundError when unknown. */
  delete(id: string): Promise<void>;
  search(q: ThreadQuery): Promise<Thread[]>;
  count(q: ThreadQuery): Promise<number>;
  /** A new thread with the same metadata (plus its own `thread_id`, as the platform's) and a copy of every checkpoint. */
  copy(id: string, newId: string): Promise<Thread>;
  /** After a state update outside a run: store the new values and status unless a run is in flight. */
  setState(id: string, values: Json | null, interrupted: boolean, interrupts: Json): Promise<void>;
  /**
   * Up to `limit` threads whose TTL has run out since their last update and that have no run pending or running:
   * those with strategy "delete" are deleted (with their runs and checkpoints), those with "keep_latest" are
   * pruned as prune(ids, 'keep_latest') does, once per update. Returns the ids of each. See thread-ttl.ts.
   */
  sweepExpired(limit: number): Promise<{ deleted: string[]; pruned: string[] }>;
  /**
   * POST /threads/prune, in one transaction; returns the ids of the threads that exist (the ones pruned), unknown
   * ids are skipped. `delete`: each thread goes as with delete() (runs, checkpoints; running runs are told to stop).
   * `keep_latest`: every checkpoint but the latest of each namespace (root and subgraphs) is deleted with its
   * writes (and, in Postgres, the blobs no kept checkpoint references); a legacy (v < 4) latest checkpoint keeps
   * its parent, whose writes carry its pending sends; a kept checkpoint whose parent went becomes a root (parent
   * null). Threads, runs and values stay. ConflictError naming the threads with a run pending or running (nothing
   * is pruned then): their runs write checkpoints on top of the ones it would delete.
   */
  prune(ids: string[], strategy: PruneStrategy): Promise<string[]>;
}

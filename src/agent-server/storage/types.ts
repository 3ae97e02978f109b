// The storage port: everything durable the agent server keeps (assistants, threads, runs, the long-term memory
// store's items and, through `checkpointer`, graph checkpoints). Two adapters implement it (postgres/,
// embedded/); routes and the run engine only see this interface. Storage throws the typed errors of
// src/lib/errors.ts, never HTTP replies. The run-lifecycle rules both adapters follow are in run-rules.ts.
import type { BaseCheckpointSaver, BaseStore } from '@langchain/langgraph-checkpoint';

/** What a store needs to know, in a form that crosses to executor threads (the embed function is a path). */
export interface ItemsConfig {
  /** langgraph.json's folder: `index.embed` is relative to it. */
  projectDir?: string;
  index?: { embed: string; dims: number; fields: string[] };
  ttl: { defaultMinutes: number | null; refreshOnRead: boolean; sweepMinutes: number | null };
}

export type Json = Record<string, unknown>;

export type ThreadStatus = 'idle' | 'busy' | 'interrupted' | 'error';
export type RunStatus = 'pending' | 'running' | 'error' | 'success' | 'timeout' | 'interrupted';
export type MultitaskStrategy = 'reject' | 'interrupt' | 'rollback' | 'enqueue';
export type CancelAction = 'interrupt' | 'rollback';
export type IfExists = 'raise' | 'do_nothing';
/** POST /threads/prune: remove the threads, or every checkpoint of them but the latest of each namespace. */
export type PruneStrategy = 'delete' | 'keep_latest';

export const TERMINAL_RUN_STATUSES: ReadonlySet<RunStatus> = new Set(['error', 'success', 'timeout', 'interrupted']);
export const MAX_ATTEMPTS = 3;
/** Stream events stay readable this long after a run's newest one. */
export const DEFAULT_STREAM_RETENTION_MS = 10 * 60_000;

export interface Assistant {
  assistant_id: string;
  graph_id: string;
  config: Json;
  context: Json;
  metadata: Json;
  name: string;
  description: string | null;
  version: number;
  created_at: string;
  updated_at: string;
}

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

export interface Run {
  run_id: string;
  thread_id: string;
  assistant_id: string;
  created_at: string;
  updated_at: string;
  metadata: Json;
  status: RunStatus;
  kwargs: Json;
  multitask_strategy: MultitaskStrategy;
  /** Why the run was cancelled, when the canceller said (`taken:…`: its input was taken into another run). */
  cancel_reason: string | null;
}

/** A run as the engine sees it: the public record plus the bookkeeping columns. */
export interface RunRecord extends Run {
  attempt: number;
  worker_id: string | null;
  cancel_action: CancelAction | null;
  /** {error, message} of a failed run. */
  error: Json | null;
  /**
   * Only on a record a claim returns (create with a claim, claim, finishAndClaim), never stored: the thread had no
   * root checkpoint then, and nothing else writes it while this run is in flight on it, so the run's first read of
   * its latest checkpoint can be skipped (NO_CHECKPOINT_KEY). Stores may leave it out.
   */
  no_checkpoint?: true;
}

export type SortOrder = 'asc' | 'desc';

export interface AssistantQuery {
  graph_id?: string;
  name?: string;
  metadata?: Json;
  limit?: number;
  offset?: number;
  sort_by?: 'assistant_id' | 'graph_id' | 'name' | 'created_at' | 'updated_at';
  sort_order?: SortOrder;
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

export interface NewAssistant {
  assistant_id: string;
  graph_id: string;
  config: Json;
  context: Json;
  metadata: Json;
  name: string;
  description: string | null;
}

export interface AssistantPatch {
  graph_id?: string;
  config?: Json;
  context?: Json;
  metadata?: Json;
  name?: string;
  description?: string | null;
}

export interface NewThread {
  thread_id: string;
  metadata: Json;
  /** Minutes of inactivity after which the sweeper deletes the thread; absent: the store's default (see thread-ttl.ts). */
  ttl_minutes?: number | null;
}

export interface NewRun {
  run_id: string;
  thread_id: string;
  assistant_id: string;
  metadata: Json;
  kwargs: Json;
  multitask_strategy: MultitaskStrategy;
  /** create: make the thread when it does not exist (stateless runs, if_not_exists=create). */
  if_not_exists: 'create' | 'reject';
  /** Merged into the thread's metadata (graph_id, assistant_id), as clients filter threads by them. */
  thread_metadata: Json;
  /** after_seconds: the run is not claimed before this delay has passed. */
  delay_ms?: number;
  /**
   * The token of the assistant row the run was built from (AssistantStore.getVersioned): the create stores the run
   * only while the row still has it, else throws StaleAssistantError and stores nothing. Unset: no such check
   * (only stores with getVersioned are given one).
   */
  assistant_token?: string;
}

export interface RunOutcome {
  status: Exclude<RunStatus, 'pending' | 'running'>;
  error?: Json | null;
  /** The thread's values after the run (already JSON-ready); undefined leaves them unchanged. */
  values?: Json | null;
  /** The same as JSON text (what the executor serialised for the stream); when set, it wins over `values`. */
  valuesJson?: string;
  /** True when the last checkpoint has a non-empty `next` (human in the loop). */
  interrupted?: boolean;
  interrupts?: Json;
  /**
   * The run was refused before running anything (strict_resume naming an interrupt no longer waiting): it ends in
   * `error` but its thread keeps the status, interrupts and error it had (`interrupted` and `interrupts` say them).
   */
  refused?: boolean;
}

export interface SweepResult {
  requeued: string[];
  failed: string[];
}

export interface AssistantStore {
  /** Creates or, with if_exists do_nothing, returns the existing one; raise → ConflictError. */
  create(a: NewAssistant, ifExists: IfExists): Promise<Assistant>;
  /** Inserts or replaces the graph's system assistant (idempotent at every start). */
  upsertSystem(a: NewAssistant): Promise<Assistant>;
  get(id: string): Promise<Assistant | null>;
  /**
   * get() with a token that changes whenever the assistant's row does (a run create can then check that the row it
   * was built from is still the current one: NewRun.assistant_token). Stores whose reads cost little leave it out.
   */
  getVersioned?(id: string): Promise<{ assistant: Assistant; token: string } | null>;
  patch(id: string, patch: AssistantPatch): Promise<Assistant>;
  delete(id: string): Promise<void>;
  search(q: AssistantQuery): Promise<Assistant[]>;
  count(q: AssistantQuery): Promise<number>;
  /**
   * Every version the assistant has had, newest first (create is version 1, each patch adds max + 1); `metadata`
   * filters by containment. NotFoundError when the assistant is unknown.
   */
  listVersions(id: string, q: { metadata?: Json; limit: number; offset: number }): Promise<AssistantVersion[]>;
  /** Makes an earlier (or later) version the assistant's current one; NotFoundError for an unknown version. */
  setLatest(id: string, version: number): Promise<Assistant>;
}

/** One version of an assistant: its fields as they were when the version was made (`created_at`: when that was). */
export type AssistantVersion = Omit<Assistant, 'updated_at'>;

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
   * Postgres saver's readAhead). `release` drops what was not taken. Stores without it read the thread and the checkpoints apart.
   */
  getReadingAhead?(id: string, token: string): Promise<{ thread: ThreadHead | null; release: () => void }>;
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

export interface RunStore {
  /**
   * Creates a pending run, applying the multitask strategy atomically against in-flight runs. With `claim`, the
   * same write also claims the new run for that worker when a claim made right after would take it (no delay,
   * nothing in flight on its thread, no other run waiting to be claimed); the record says so (status running).
   */
  create(run: NewRun, claim?: { workerId: string; leaseMs: number }): Promise<RunRecord>;
  get(threadId: string, runId: string): Promise<RunRecord | null>;
  /**
   * get(), and in the same read its thread's values when the run has ended (what a join answers; null when the
   * thread has none); `values` is undefined while the run is pending or running. Optional: without it a join of
   * an ended run reads the run, then the thread.
   */
  getWithValues?(threadId: string, runId: string): Promise<{ run: RunRecord; values?: Json | null } | null>;
  getById(runId: string): Promise<RunRecord | null>;
  list(threadId: string, q: { limit: number; offset: number; status?: RunStatus }): Promise<RunRecord[]>;
  /** Deletes a run that is not running; ConflictError while running. */
  delete(threadId: string, runId: string): Promise<void>;
  /** Takes the oldest pending run whose thread has no running run; at most one claimer gets it. */
  claim(workerId: string, leaseMs: number): Promise<RunRecord | null>;
  /** Extends the lease of runs this worker holds; returns the ids whose lease it still holds. */
  heartbeat(workerId: string, runIds: string[], leaseMs: number): Promise<string[]>;
  /** Ends a claimed run and settles the thread status; false when the lease was lost to someone else. */
  finish(runId: string, workerId: string, outcome: RunOutcome): Promise<boolean>;
  /**
   * finish(), then in the same write the claim() the freed slot would send next, for the same worker (`next`: the
   * run claimed, or null). Optional: a store without it gets finish() and a separate claim().
   */
  finishAndClaim?(
    runId: string,
    workerId: string,
    outcome: RunOutcome,
    leaseMs: number,
  ): Promise<{ finished: boolean; next: RunRecord | null }>;
  /** Ends a run cancelled with action rollback: deletes it and the checkpoints it wrote. */
  rollback(runId: string, workerId: string | null): Promise<void>;
  /** Gives runs back to the queue on graceful shutdown (the attempt does not count). */
  release(workerId: string, runIds: string[]): Promise<void>;
  /** Cancels a run: a pending one ends at once, a running one is flagged and its worker told. */
  cancel(threadId: string, runId: string, action: CancelAction, reason?: string | null): Promise<RunRecord>;
  /**
   * Cancels these runs of the thread (as cancel() each) in one transaction: NotFoundError, and nothing cancelled,
   * when one of them is not a run of the thread; finished runs are left as they are.
   */
  cancelMany(threadId: string, runIds: string[], action: CancelAction): Promise<RunRecord[]>;
  /** The runs of every thread in these statuses (POST /runs/cancel with `status`), oldest first. */
  listByStatus(statuses: Array<'pending' | 'running'>): Promise<RunRecord[]>;
  /** Cancel actions requested for some of these (running) runs. */
  cancelRequests(runIds: string[]): Promise<Map<string, CancelAction>>;
  /** Requeues running runs whose lease expired (attempt < max) or ends them in error. */
  sweep(maxAttempts: number): Promise<SweepResult>;
}

/** An item of the long-term memory store, in the platform's shape. */
export interface StoreItem {
  namespace: string[];
  key: string;
  value: Json;
  created_at: string;
  updated_at: string;
  /** Similarity to the search query (semantic search only). */
  score?: number | null;
}

export interface ItemSearch {
  namespace_prefix: string[];
  filter?: Json;
  limit: number;
  offset: number;
  query?: string;
  refresh_ttl?: boolean;
}

export interface NamespaceQuery {
  prefix?: string[];
  suffix?: string[];
  max_depth?: number;
  limit: number;
  offset: number;
}

/**
 * LangGraph's long-term memory store. Namespaces are validated by the caller (routes) or by `store` (graphs);
 * expired items are never returned; TTLs are in minutes.
 */
export interface ItemStore {
  /** Inserts or replaces; ttl null or undefined: the configured default TTL (none without one). */
  put(
    namespace: string[],
    key: string,
    value: Json,
    opts?: { index?: false | string[]; ttl?: number | null },
  ): Promise<void>;
  /** refresh_ttl (default: the configured refresh_on_read) restarts the item's TTL. */
  get(namespace: string[], key: string, opts?: { refresh_ttl?: boolean }): Promise<StoreItem | null>;
  delete(namespace: string[], key: string): Promise<void>;
  /** Items under the prefix (label-wise), newest first; by similarity when `query` is given and an index exists. */
  search(q: ItemSearch): Promise<StoreItem[]>;
  listNamespaces(q: NamespaceQuery): Promise<string[][]>;
  /** Deletes expired items; returns how many. */
  sweep(): Promise<number>;
  /** The same items as a LangGraph BaseStore, attached to every run (config.store / getStore()). */
  readonly store: BaseStore;
  /** Whether `query` searches by meaning (an embeddings index is configured and usable). */
  readonly semantic: boolean;
}

/** A scheduled run (client.crons.*): a run made from `payload` at every tick of `schedule`. */
export interface Cron {
  cron_id: string;
  assistant_id: string;
  /** null: stateless, every tick runs on a new thread. */
  thread_id: string | null;
  on_run_completed: 'delete' | 'keep' | null;
  end_time: string | null;
  schedule: string;
  /** IANA time zone the schedule is read in (UTC when null). */
  timezone: string | null;
  created_at: string;
  updated_at: string;
  /** The run-create body each tick's run is made from. */
  payload: Json;
  user_id: string | null;
  /** The next tick; null once end_time is passed. */
  next_run_date: string | null;
  metadata: Json;
  enabled: boolean;
}

/**
 * A cron as stored: the public record plus, never shown, what custom auth said about its creator: the metadata their
 * records carry and who they are (each tick's run sees them, as the creator's own runs do).
 */
export interface CronRecord extends Cron {
  owner_metadata: Json;
  owner_auth: Json | null;
}

export type NewCron = Omit<CronRecord, 'created_at' | 'updated_at'>;

export type CronPatch = Partial<
  Pick<
    Cron,
    'schedule' | 'timezone' | 'end_time' | 'payload' | 'metadata' | 'enabled' | 'on_run_completed' | 'next_run_date'
  >
>;

export interface CronQuery {
  assistant_id?: string;
  thread_id?: string;
  enabled?: boolean;
  /** Containment filter on metadata (custom auth's equality conditions). */
  metadata?: Json;
  limit?: number;
  offset?: number;
  sort_by?: 'cron_id' | 'assistant_id' | 'thread_id' | 'created_at' | 'updated_at' | 'next_run_date';
  sort_order?: SortOrder;
}

/**
 * One tick to fire: the cron's tick as read (`due`), the tick after it, and the run to create for it (null: the
 * run cannot be made, e.g. its assistant was deleted; `reason` says why and the tick is skipped).
 */
export interface CronTick {
  cron_id: string;
  due: string;
  next: string | null;
  run: NewRun | null;
  reason?: string;
}

export type CronTickResult =
  /** This caller claimed the tick and created its run. */
  | { kind: 'fired'; run: RunRecord }
  /** This caller claimed the tick but the run was refused (busy thread with reject, thread gone): tick skipped. */
  | { kind: 'skipped'; reason: string }
  /** Someone else has the tick, or it changed (patched, disabled, deleted) since it was read. */
  | { kind: 'taken' };

export interface CronStore {
  create(c: NewCron): Promise<CronRecord>;
  get(id: string): Promise<CronRecord | null>;
  /** NotFoundError when unknown. */
  patch(id: string, patch: CronPatch): Promise<CronRecord>;
  /** NotFoundError when unknown. */
  delete(id: string): Promise<void>;
  search(q: CronQuery): Promise<CronRecord[]>;
  count(q: CronQuery): Promise<number>;
  /** Enabled crons whose next tick is at or before now, earliest first. */
  due(limit: number): Promise<CronRecord[]>;
  /**
   * Claims the tick and creates its run in one transaction: of all processes firing the same tick, exactly one
   * gets `fired` (or `skipped`), and the tick is never claimed without its run (or the reason it has none).
   */
  fire(tick: CronTick): Promise<CronTickResult>;
}

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

export type StorageEvent =
  { type: 'wake' } | { type: 'run_done'; run_id: string } | { type: 'cancel'; run_id: string; action: CancelAction };

/** How another thread opens its own connection to this store's checkpoints (see openCheckpointer). */
export type CheckpointerSource =
  /** writeLock: the buffer of the WriteLock the owning process's threads share for the file (write-lock.ts). */
  (
    | { kind: 'embedded'; file: string; items?: ItemsConfig; writeLock?: SharedArrayBuffer }
    | { kind: 'postgres'; databaseUrl: string; schema: string; items?: ItemsConfig; semantic?: boolean }
  ) & {
    /** The data keys (DataKeyring.material(), current first) when agent data is encrypted at rest. */
    dataKeys?: Uint8Array[];
  };

export interface Storage {
  readonly kind: 'postgres' | 'embedded';
  readonly checkpointer: BaseCheckpointSaver;
  readonly checkpointerSource: CheckpointerSource;
  readonly assistants: AssistantStore;
  readonly threads: ThreadStore;
  readonly runs: RunStore;
  readonly items: ItemStore;
  readonly crons: CronStore;
  readonly streams: StreamEventStore;
  /** Wake-ups across every process that shares this store. Returns an unsubscribe function. */
  subscribe(listener: (e: StorageEvent) => void): () => void;
  /**
   * With data keys: seals every stored value that is not sealed under the current key (data from before a rotation
   * or from before encryption) under it, in the background of a running store; counts what it did.
   */
  reseal?(signal?: AbortSignal): Promise<{ resealed: number; failed: number }>;
  /** One round trip to the database (GET /ok?check_db=1); rejects when it does not answer. */
  ping(): Promise<void>;
  close(): Promise<void>;
}

/**
 * The configurable key under which a checkpoint read names the tuples a saver read ahead for it (the Postgres
 * saver's readAhead: GET state's latest checkpoint and its parent in one statement).
 */
export const READ_AHEAD_KEY = '__agentplane_read_ahead';

/**
 * The configurable key of a run's first execution whose thread had no root checkpoint when the run was created and
 * claimed (RunRecord.no_checkpoint); its value is a token for that execution. A saver that knows it answers that
 * execution's first read of the latest root checkpoint with none, without reading.
 */
export const NO_CHECKPOINT_KEY = '__agentplane_no_checkpoint';

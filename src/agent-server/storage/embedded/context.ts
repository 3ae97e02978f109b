// What the embedded store's aggregates share: the connection, its statement cache, the write transaction, the
// in-process event emitter, row codecs and the few helpers several aggregates use.
import type { EventEmitter } from 'node:events';
import Database from 'better-sqlite3';
import { NotFoundError } from '../../../lib/errors.ts';
import { enableWal } from '../../../lib/sqlite-wal.ts';
import { encryptedValuesFilter, isoNow, outcomeValuesText } from '../common.ts';
import { threadErrorAfter, threadStatusAfter } from '../run-rules.ts';
import type { JsonCodec } from '../data-cipher.ts';
import type { WriteLock } from './write-lock.ts';
import type {
  Assistant,
  AssistantQuery,
  CancelAction,
  Json,
  PruneStrategy,
  RunOutcome,
  RunRecord,
  RunStatus,
  StorageEvent,
  Thread,
  ThreadQuery,
} from '../types.ts';

export type Row = Record<string, unknown>;

export const j = (v: unknown): string => JSON.stringify(v ?? {});
export const pj = (v: unknown): Json => (typeof v === 'string' ? (JSON.parse(v) as Json) : {});
export const pjn = (v: unknown): Json | null => (typeof v === 'string' ? (JSON.parse(v) as Json) : null);

export function toAssistant(r: Row): Assistant {
  return {
    assistant_id: r.assistant_id as string,
    graph_id: r.graph_id as string,
    config: pj(r.config),
    context: pj(r.context),
    metadata: pj(r.metadata),
    name: r.name as string,
    description: (r.description as string | null) ?? null,
    version: r.version as number,
    created_at: r.created_at as string,
    updated_at: r.updated_at as string,
  };
}

/** Row codecs that read the encrypted columns (thread values, run kwargs) through `codec`. */
export function rowReaders(codec: JsonCodec) {
  return {
    toThread: (r: Row): Thread => toThread(r, codec),
    toRun: (r: Row): RunRecord => toRun(r, codec),
    /** A stored text of an encrypted column, or null. */
    readNullable: (v: unknown): Json | null => (typeof v === 'string' ? codec.read<Json>(v) : null),
  };
}

function toThread(r: Row, codec: JsonCodec): Thread {
  return {
    thread_id: r.thread_id as string,
    created_at: r.created_at as string,
    updated_at: r.updated_at as string,
    state_updated_at: r.state_updated_at as string,
    metadata: pj(r.metadata),
    status: r.status as Thread['status'],
    config: pj(r.config),
    values: typeof r.values === 'string' ? codec.read<Json>(r.values) : null,
    interrupts: pj(r.interrupts),
    error: pjn(r.error),
  };
}

function toRun(r: Row, codec: JsonCodec): RunRecord {
  return {
    run_id: r.run_id as string,
    thread_id: r.thread_id as string,
    assistant_id: r.assistant_id as string,
    created_at: r.created_at as string,
    updated_at: r.updated_at as string,
    metadata: pj(r.metadata),
    status: r.status as RunStatus,
    kwargs: typeof r.kwargs === 'string' ? codec.read<Json>(r.kwargs) : {},
    multitask_strategy: r.multitask_strategy as RunRecord['multitask_strategy'],
    attempt: r.attempt as number,
    worker_id: (r.worker_id as string | null) ?? null,
    cancel_action: (r.cancel_action as CancelAction | null) ?? null,
    cancel_reason: (r.cancel_reason as string | null | undefined) ?? null,
    error: pjn(r.error),
  };
}

/** JSON containment for flat filters: each key must equal the given value. */
export function jsonFilter(column: string, filter: Json | undefined, params: unknown[]): string[] {
  const clauses: string[] = [];
  for (const [k, v] of Object.entries(filter ?? {})) {
    const path = `$."${k.replace(/"/g, '""')}"`;
    clauses.push(`json_extract(${column}, ?) IS json_extract(?, '$')`);
    params.push(path, JSON.stringify(v));
  }
  return clauses;
}

const writeLocks = new WeakMap<Database.Database, WriteLock>();

/** A connection; `lock`: the write lock this process's connections to `file` share (see write-lock.ts). */
export function openDatabase(file: string, lock?: WriteLock): Database.Database {
  const db = new Database(file);
  // The lock wait first: the switch to WAL and the first reads may meet another process opening the same file.
  db.pragma('busy_timeout = 5000');
  enableWal(db);
  db.pragma('synchronous = NORMAL');
  if (lock) writeLocks.set(db, lock);
  return db;
}

/** The write lock openDatabase gave the connection, if any. */
export function writeLockOf(db: Database.Database): WriteLock | undefined {
  return writeLocks.get(db);
}

/** Runs `fn`, a synchronous write transaction on `db` (`tx.immediate(...)`), under the connection's write lock. */
export function underWriteLock<T>(db: Database.Database, fn: () => T): T {
  const lock = writeLocks.get(db);
  return lock ? lock.write(fn) : fn();
}

export function statementCache(db: Database.Database): (text: string) => Database.Statement {
  const statements = new Map<string, Database.Statement>();
  return (text) => {
    let s = statements.get(text);
    if (!s) {
      if (statements.size > 500) statements.clear();
      s = db.prepare(text);
      statements.set(text, s);
    }
    return s;
  };
}

export interface EmbeddedContext extends ReturnType<typeof rowReaders> {
  db: Database.Database;
  /** How the encrypted columns (thread values, run kwargs, store items) are written and read. */
  codec: JsonCodec;
  /** The connection's statement cache: one prepared statement per SQL text. */
  sql: (text: string) => Database.Statement;
  /** A write transaction (IMMEDIATE: see openContext). */
  inTx: <T>(fn: () => T) => T;
  /** Events go out after the current synchronous work (and so after its commit). */
  emit: (e: StorageEvent) => void;
  st: ReturnType<typeof hotStatements>;
  now: () => string;
  requireThread(id: string): Row;
  /** Sets the thread's status, values, interrupts and error after a run ended. */
  settleThread(threadId: string, outcome: RunOutcome): void;
  /** Deletes a run's checkpoints (and everything after them) so the thread is as before the run. */
  rollbackCheckpoints(threadId: string, runId: string): void;
  searchWhere(
    table: 'a' | 't',
    q: Omit<AssistantQuery, 'sort_by'> & Omit<ThreadQuery, 'sort_by'>,
    params: unknown[],
  ): string;
  orderBy(q: { sort_by?: string; sort_order?: string }, allowed: Set<string>): string;
}

/**
 * `threadTtl`: ttl_minutes of threads inserted without one (a number checked by the caller, or null); `strategy`:
 * their ttl_strategy (NULL stands for "delete").
 */
function hotStatements(sql: (text: string) => Database.Statement, threadTtl: number | null, strategy: PruneStrategy) {
  const ttl = threadTtl === null || !Number.isFinite(threadTtl) ? 'NULL' : String(threadTtl);
  const ttlStrategy = ttl !== 'NULL' && strategy === 'keep_latest' ? `'keep_latest'` : 'NULL';
  return {
    getAssistant: sql('SELECT * FROM ap_assistants WHERE assistant_id = ?'),
    getThread: sql('SELECT * FROM ap_threads WHERE thread_id = ?'),
    // What a new run needs of its thread: not its values, which a long conversation makes megabytes (reading them
    // took 250 µs a run at 200 KB, inside the write transaction).
    threadMetadata: sql('SELECT thread_id, metadata FROM ap_threads WHERE thread_id = ?'),
    getRun: sql('SELECT * FROM ap_runs WHERE run_id = ?'),
    inflight: sql(`SELECT * FROM ap_runs WHERE thread_id = ? AND status IN ('pending','running') ORDER BY seq`),
    hasPending: sql(`SELECT 1 FROM ap_runs WHERE thread_id = ? AND status = 'pending' LIMIT 1`),
    insertThread: sql(`INSERT INTO ap_threads (thread_id, created_at, updated_at, state_updated_at, metadata,
      status, config, "values", interrupts, error, ttl_minutes, ttl_strategy)
      VALUES (?, ?, ?, ?, ?, 'idle', '{}', NULL, '{}', NULL, ${ttl}, ${ttlStrategy})`),
    insertRun: sql(`INSERT INTO ap_runs (run_id, thread_id, assistant_id, created_at, updated_at, metadata,
      status, kwargs, multitask_strategy, not_before) VALUES (?, ?, ?, ?, ?, ?, 'pending', ?, ?, ?)`),
    claimable: sql(`SELECT r.* FROM ap_runs r WHERE r.status = 'pending'
      AND (r.not_before IS NULL OR r.not_before <= ?) AND NOT EXISTS
      (SELECT 1 FROM ap_runs x WHERE x.thread_id = r.thread_id AND x.status = 'running') ORDER BY r.seq LIMIT 1`),
    setRunning: sql(`UPDATE ap_runs SET status = 'running', attempt = attempt + 1, worker_id = ?,
      lease_expires_at = ?, updated_at = ? WHERE run_id = ?`),
    threadBusy: sql(`UPDATE ap_threads SET status = 'busy', updated_at = ? WHERE thread_id = ?`),
    threadStatus: sql(`UPDATE ap_threads SET status = ?, updated_at = ? WHERE thread_id = ?`),
    deleteRun: sql('DELETE FROM ap_runs WHERE run_id = ?'),
    firstCheckpointOfRun: sql(`SELECT checkpoint_id FROM checkpoints WHERE thread_id = ? AND checkpoint_ns = ''
      AND json_extract(CAST(metadata AS TEXT), '$.run_id') = ? ORDER BY checkpoint_id LIMIT 1`),
    deleteCheckpointsFrom: sql('DELETE FROM checkpoints WHERE thread_id = ? AND checkpoint_id >= ?'),
    deleteWritesFrom: sql('DELETE FROM writes WHERE thread_id = ? AND checkpoint_id >= ?'),
  };
}

/** The shared context over an open connection whose schema (ours and the saver's) exists. */
export function openContext(
  db: Database.Database,
  sql: (text: string) => Database.Statement,
  emitter: EventEmitter,
  codec: JsonCodec,
  threadTtlDefault: number | null = null,
  threadTtlStrategy: PruneStrategy = 'delete',
): EmbeddedContext {
  // IMMEDIATE: take the write lock up front. A transaction that reads and then writes could otherwise fail at once
  // (SQLITE_BUSY, no busy wait) when an executor thread's connection committed checkpoints in between.
  const txFn = db.transaction((fn: () => unknown) => fn());
  const lock = writeLockOf(db);
  const inTx = lock
    ? <T>(fn: () => T): T => lock.write(() => txFn.immediate(fn) as T)
    : <T>(fn: () => T): T => txFn.immediate(fn) as T;
  const emit = (e: StorageEvent) => queueMicrotask(() => emitter.emit('event', e));
  const st = hotStatements(sql, threadTtlDefault, threadTtlStrategy);
  const now = () => isoNow();

  function requireThread(id: string): Row {
    const row = st.getThread.get(id) as Row | undefined;
    if (!row) throw new NotFoundError(`Thread with ID ${id} not found`);
    return row;
  }

  function settleThread(threadId: string, outcome: RunOutcome): void {
    const status = threadStatusAfter(outcome, !!st.hasPending.get(threadId));
    const t = now();
    const sets = ['status = ?', 'updated_at = ?'];
    const params: unknown[] = [status, t];
    const values = outcomeValuesText(outcome);
    if (values !== undefined) {
      sets.push('"values" = ?', 'state_updated_at = ?');
      params.push(values === null ? null : codec.write(values, true), t);
    }
    const error = threadErrorAfter(outcome);
    sets.push('interrupts = ?', 'error = ?');
    params.push(j(outcome.interrupts ?? {}), error === null ? null : j(error));
    sql(`UPDATE ap_threads SET ${sets.join(', ')} WHERE thread_id = ?`).run(...params, threadId);
  }

  function rollbackCheckpoints(threadId: string, runId: string): void {
    const first = st.firstCheckpointOfRun.get(threadId, runId) as Row | undefined;
    if (!first) return;
    st.deleteWritesFrom.run(threadId, first.checkpoint_id);
    st.deleteCheckpointsFrom.run(threadId, first.checkpoint_id);
  }

  function searchWhere(
    table: 'a' | 't',
    q: Omit<AssistantQuery, 'sort_by'> & Omit<ThreadQuery, 'sort_by'>,
    params: unknown[],
  ): string {
    const clauses: string[] = [];
    if (table === 'a') {
      if (q.graph_id) {
        clauses.push('graph_id = ?');
        params.push(q.graph_id);
      }
      if (q.name) {
        clauses.push('name LIKE ?');
        params.push(`%${q.name}%`);
      }
    } else {
      if (q.ids?.length) {
        clauses.push(`thread_id IN (${q.ids.map(() => '?').join(',')})`);
        params.push(...q.ids);
      }
      if (q.status) {
        clauses.push('status = ?');
        params.push(q.status);
      }
      if (codec.keyring && q.values && Object.keys(q.values).length) throw encryptedValuesFilter();
      clauses.push(...jsonFilter('"values"', q.values, params));
    }
    clauses.push(...jsonFilter('metadata', q.metadata, params));
    return clauses.length ? `WHERE ${clauses.join(' AND ')}` : '';
  }

  function orderBy(q: { sort_by?: string; sort_order?: string }, allowed: Set<string>): string {
    const by = q.sort_by && allowed.has(q.sort_by) ? q.sort_by : 'created_at';
    return `ORDER BY ${by} ${q.sort_order === 'asc' ? 'ASC' : 'DESC'}, rowid DESC`;
  }

  return {
    db,
    codec,
    ...rowReaders(codec),
    sql,
    inTx,
    emit,
    st,
    now,
    requireThread,
    settleThread,
    rollbackCheckpoints,
    searchWhere,
    orderBy,
  };
}

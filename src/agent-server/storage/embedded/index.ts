// Embedded store: one SQLite file (WAL) under the data dir holds our tables and, through SqliteSaver, the
// checkpoints. One process owns the file, so every method runs synchronously inside one transaction and
// wake-ups travel on an in-process emitter.
import { EventEmitter } from 'node:events';
import { mkdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import Database from 'better-sqlite3';
import type { BaseCheckpointSaver } from '@langchain/langgraph-checkpoint';
import { SqliteSaver } from '@langchain/langgraph-checkpoint-sqlite';
import { ConflictError, NotFoundError } from '../../../lib/errors.ts';
import { ASSISTANT_SORT, BUSY_THREAD_DETAIL, THREAD_SORT, isoNow, threadStatusAfter } from '../common.ts';
import type {
  Assistant,
  AssistantPatch,
  AssistantQuery,
  CancelAction,
  IfExists,
  Json,
  NewAssistant,
  NewRun,
  NewThread,
  RunOutcome,
  RunRecord,
  RunStatus,
  Storage,
  StorageEvent,
  SweepResult,
  Thread,
  ThreadQuery,
} from '../types.ts';

type Row = Record<string, unknown>;

const SCHEMA = `
CREATE TABLE IF NOT EXISTS ap_assistants (
  assistant_id TEXT PRIMARY KEY, graph_id TEXT NOT NULL, config TEXT NOT NULL, context TEXT NOT NULL,
  metadata TEXT NOT NULL, name TEXT NOT NULL, description TEXT, version INTEGER NOT NULL,
  created_at TEXT NOT NULL, updated_at TEXT NOT NULL);
CREATE TABLE IF NOT EXISTS ap_threads (
  thread_id TEXT PRIMARY KEY, created_at TEXT NOT NULL, updated_at TEXT NOT NULL, state_updated_at TEXT NOT NULL,
  metadata TEXT NOT NULL, status TEXT NOT NULL, config TEXT NOT NULL, "values" TEXT, interrupts TEXT NOT NULL,
  error TEXT);
CREATE TABLE IF NOT EXISTS ap_runs (
  seq INTEGER PRIMARY KEY AUTOINCREMENT, run_id TEXT NOT NULL UNIQUE, thread_id TEXT NOT NULL,
  assistant_id TEXT NOT NULL, created_at TEXT NOT NULL, updated_at TEXT NOT NULL, metadata TEXT NOT NULL,
  status TEXT NOT NULL, kwargs TEXT NOT NULL, multitask_strategy TEXT NOT NULL, attempt INTEGER NOT NULL DEFAULT 0,
  worker_id TEXT, lease_expires_at INTEGER, cancel_action TEXT, error TEXT);
CREATE INDEX IF NOT EXISTS ap_runs_thread ON ap_runs (thread_id, status);
CREATE INDEX IF NOT EXISTS ap_runs_status ON ap_runs (status, seq);
`;

const j = (v: unknown): string => JSON.stringify(v ?? {});
const pj = (v: unknown): Json => (typeof v === 'string' ? (JSON.parse(v) as Json) : {});
const pjn = (v: unknown): Json | null => (typeof v === 'string' ? (JSON.parse(v) as Json) : null);

function toAssistant(r: Row): Assistant {
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

function toThread(r: Row): Thread {
  return {
    thread_id: r.thread_id as string,
    created_at: r.created_at as string,
    updated_at: r.updated_at as string,
    state_updated_at: r.state_updated_at as string,
    metadata: pj(r.metadata),
    status: r.status as Thread['status'],
    config: pj(r.config),
    values: pjn(r.values),
    interrupts: pj(r.interrupts),
    error: pjn(r.error),
  };
}

function toRun(r: Row): RunRecord {
  return {
    run_id: r.run_id as string,
    thread_id: r.thread_id as string,
    assistant_id: r.assistant_id as string,
    created_at: r.created_at as string,
    updated_at: r.updated_at as string,
    metadata: pj(r.metadata),
    status: r.status as RunStatus,
    kwargs: pj(r.kwargs),
    multitask_strategy: r.multitask_strategy as RunRecord['multitask_strategy'],
    attempt: r.attempt as number,
    worker_id: (r.worker_id as string | null) ?? null,
    cancel_action: (r.cancel_action as CancelAction | null) ?? null,
    error: pjn(r.error),
  };
}

/** JSON containment for flat filters: each key must equal the given value. */
function jsonFilter(column: string, filter: Json | undefined, params: unknown[]): string[] {
  const clauses: string[] = [];
  for (const [k, v] of Object.entries(filter ?? {})) {
    const path = `$."${k.replace(/"/g, '""')}"`;
    clauses.push(`json_extract(${column}, ?) IS json_extract(?, '$')`);
    params.push(path, JSON.stringify(v));
  }
  return clauses;
}

class CheckpointSaver extends SqliteSaver {
  /** Creates the saver's tables now, so our own SQL (copy, rollback) can rely on them. */
  init(): void {
    this.setup();
  }
}

export interface EmbeddedOptions {
  dataDir: string;
  /** Test hook: use an existing file name instead of the default. */
  fileName?: string;
}

/**
 * One live process per data dir: a second one would take the first one's running runs for abandoned ones.
 * A pid file is enough (no flock in Node); a pid that no longer runs is a crashed owner and is taken over.
 */
function takeOwnership(dataDir: string): () => void {
  const file = join(dataDir, 'owner.pid');
  let other: number | null = null;
  try {
    other = Number(readFileSync(file, 'utf8').trim()) || null;
  } catch {
    /* no owner yet */
  }
  if (other && other !== process.pid) {
    let alive = true;
    try {
      process.kill(other, 0);
    } catch (err) {
      alive = (err as NodeJS.ErrnoException).code === 'EPERM';
    }
    if (alive) {
      throw new Error(`data dir ${dataDir} is in use by process ${other}; give each agent-server its own --data-dir or use Postgres`);
    }
  }
  writeFileSync(file, String(process.pid));
  return () => rmSync(file, { force: true });
}

function openDatabase(file: string): Database.Database {
  const db = new Database(file);
  db.pragma('journal_mode = WAL');
  db.pragma('synchronous = NORMAL');
  db.pragma('busy_timeout = 5000');
  return db;
}

function statementCache(db: Database.Database): (text: string) => Database.Statement {
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

/**
 * SqliteSaver prepares its INSERTs on every put/putWrites; it gets the connection's statement cache (all its
 * statements run synchronously, so sharing one is safe).
 */
function checkpointSaver(db: Database.Database, sql: (text: string) => Database.Statement): CheckpointSaver {
  const saverDb = new Proxy(db, {
    get(target, prop) {
      if (prop === 'prepare') return sql;
      const v = Reflect.get(target, prop, target) as unknown;
      return typeof v === 'function' ? (v as (...a: unknown[]) => unknown).bind(target) : v;
    },
  });
  return new CheckpointSaver(saverDb);
}

/**
 * The checkpoints of an embedded store through a connection of their own, for graphs executing on another thread
 * of the owning process (SQLite's WAL lets it write beside the store's connection; busy_timeout covers the lock).
 */
export function openEmbeddedCheckpointer(file: string): { saver: BaseCheckpointSaver; close(): void } {
  const db = openDatabase(file);
  const saver = checkpointSaver(db, statementCache(db));
  return { saver, close: () => db.close() };
}

export function openEmbeddedStorage(opts: EmbeddedOptions): Storage {
  mkdirSync(opts.dataDir, { recursive: true });
  const releaseOwnership = takeOwnership(opts.dataDir);
  const file = join(opts.dataDir, opts.fileName ?? 'agentplane.sqlite');
  const db = openDatabase(file);
  db.exec(SCHEMA);
  // Files made before after_seconds support lack the column.
  if (!(db.prepare(`PRAGMA table_info(ap_runs)`).all() as Row[]).some((c) => c.name === 'not_before')) {
    db.exec('ALTER TABLE ap_runs ADD COLUMN not_before INTEGER');
  }
  // One process owns the file: anything still running was left by a process that is gone.
  db.prepare(`UPDATE ap_runs SET lease_expires_at = 0 WHERE status = 'running'`).run();

  // Statements are prepared once per SQL text and transactions wrap a reused function: both show in profiles.
  const sql = statementCache(db);
  // IMMEDIATE: take the write lock up front. A transaction that reads and then writes could otherwise fail at once
  // (SQLITE_BUSY, no busy wait) when an executor thread's connection committed checkpoints in between.
  const txFn = db.transaction((fn: () => unknown) => fn());
  const inTx = <T>(fn: () => T): T => txFn.immediate(fn) as T;
  const saver = checkpointSaver(db, sql);
  saver.init();

  const emitter = new EventEmitter();
  emitter.setMaxListeners(0);
  const emit = (e: StorageEvent) => queueMicrotask(() => emitter.emit('event', e));

  const st = {
    getAssistant: sql('SELECT * FROM ap_assistants WHERE assistant_id = ?'),
    getThread: sql('SELECT * FROM ap_threads WHERE thread_id = ?'),
    getRun: sql('SELECT * FROM ap_runs WHERE run_id = ?'),
    inflight: sql(`SELECT * FROM ap_runs WHERE thread_id = ? AND status IN ('pending','running') ORDER BY seq`),
    hasPending: sql(`SELECT 1 FROM ap_runs WHERE thread_id = ? AND status = 'pending' LIMIT 1`),
    insertThread: sql(`INSERT INTO ap_threads (thread_id, created_at, updated_at, state_updated_at, metadata,
      status, config, "values", interrupts, error) VALUES (?, ?, ?, ?, ?, 'idle', '{}', NULL, '{}', NULL)`),
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

  const now = () => isoNow();

  function requireThread(id: string): Row {
    const row = st.getThread.get(id) as Row | undefined;
    if (!row) throw new NotFoundError(`Thread with ID ${id} not found`);
    return row;
  }

  function settleThread(threadId: string, outcome: RunOutcome): void {
    const more = !!st.hasPending.get(threadId);
    const status = threadStatusAfter(outcome, more);
    const t = now();
    const sets = ['status = ?', 'updated_at = ?'];
    const params: unknown[] = [status, t];
    if (outcome.values !== undefined) {
      sets.push('"values" = ?', 'state_updated_at = ?');
      params.push(outcome.values === null ? null : JSON.stringify(outcome.values), t);
    }
    sets.push('interrupts = ?', 'error = ?');
    params.push(j(outcome.interrupts ?? {}), outcome.status === 'error' ? j(outcome.error) : null);
    sql(`UPDATE ap_threads SET ${sets.join(', ')} WHERE thread_id = ?`).run(...params, threadId);
  }

  /** Deletes a run's checkpoints (and everything after them) so the thread is as before the run. */
  function rollbackCheckpoints(threadId: string, runId: string): void {
    const first = st.firstCheckpointOfRun.get(threadId, runId) as Row | undefined;
    if (!first) return;
    st.deleteWritesFrom.run(threadId, first.checkpoint_id);
    st.deleteCheckpointsFrom.run(threadId, first.checkpoint_id);
  }

  function searchWhere(table: 'a' | 't', q: Omit<AssistantQuery, 'sort_by'> & Omit<ThreadQuery, 'sort_by'>, params: unknown[]): string {
    const clauses: string[] = [];
    if (table === 'a') {
      if (q.graph_id) (clauses.push('graph_id = ?'), params.push(q.graph_id));
      if (q.name) (clauses.push('name LIKE ?'), params.push(`%${q.name}%`));
    } else {
      if (q.ids?.length) (clauses.push(`thread_id IN (${q.ids.map(() => '?').join(',')})`), params.push(...q.ids));
      if (q.status) (clauses.push('status = ?'), params.push(q.status));
      clauses.push(...jsonFilter('"values"', q.values, params));
    }
    clauses.push(...jsonFilter('metadata', q.metadata, params));
    return clauses.length ? `WHERE ${clauses.join(' AND ')}` : '';
  }

  function orderBy(q: { sort_by?: string; sort_order?: string }, allowed: Set<string>): string {
    const by = q.sort_by && allowed.has(q.sort_by) ? q.sort_by : 'created_at';
    return `ORDER BY ${by} ${q.sort_order === 'asc' ? 'ASC' : 'DESC'}, rowid DESC`;
  }

  const storage: Storage = {
    kind: 'embedded',
    checkpointer: saver,
    checkpointerSource: { kind: 'embedded', file },

    assistants: {
      async create(a: NewAssistant, ifExists: IfExists) {
        return inTx(() => {
          const existing = st.getAssistant.get(a.assistant_id) as Row | undefined;
          if (existing) {
            if (ifExists === 'do_nothing') return toAssistant(existing);
            throw new ConflictError(`Assistant ${a.assistant_id} already exists`);
          }
          const t = now();
          sql(`INSERT INTO ap_assistants VALUES (?, ?, ?, ?, ?, ?, ?, 1, ?, ?)`).run(
            a.assistant_id, a.graph_id, j(a.config), j(a.context), j(a.metadata), a.name, a.description, t, t);
          return toAssistant(st.getAssistant.get(a.assistant_id) as Row);
        });
      },
      async upsertSystem(a: NewAssistant) {
        const t = now();
        sql(`INSERT INTO ap_assistants VALUES (?, ?, ?, ?, ?, ?, ?, 1, ?, ?)
          ON CONFLICT (assistant_id) DO UPDATE SET graph_id = excluded.graph_id, metadata = excluded.metadata`).run(
          a.assistant_id, a.graph_id, j(a.config), j(a.context), j(a.metadata), a.name, a.description, t, t);
        return toAssistant(st.getAssistant.get(a.assistant_id) as Row);
      },
      async get(id: string) {
        const r = st.getAssistant.get(id) as Row | undefined;
        return r ? toAssistant(r) : null;
      },
      async patch(id: string, p: AssistantPatch) {
        return inTx(() => {
          const r = st.getAssistant.get(id) as Row | undefined;
          if (!r) throw new NotFoundError(`Assistant ${id} not found`);
          const cur = toAssistant(r);
          sql(`UPDATE ap_assistants SET graph_id = ?, config = ?, context = ?, metadata = ?, name = ?,
            description = ?, version = version + 1, updated_at = ? WHERE assistant_id = ?`).run(
            p.graph_id ?? cur.graph_id, j(p.config ?? cur.config), j(p.context ?? cur.context),
            j({ ...cur.metadata, ...p.metadata }), p.name ?? cur.name,
            p.description === undefined ? cur.description : p.description, now(), id);
          return toAssistant(st.getAssistant.get(id) as Row);
        });
      },
      async delete(id: string) {
        const res = sql('DELETE FROM ap_assistants WHERE assistant_id = ?').run(id);
        if (res.changes === 0) throw new NotFoundError(`Assistant ${id} not found`);
      },
      async search(q: AssistantQuery) {
        const params: unknown[] = [];
        const text = `SELECT * FROM ap_assistants ${searchWhere('a', q, params)} ${orderBy(q, ASSISTANT_SORT)}
          LIMIT ? OFFSET ?`;
        return (sql(text).all(...params, q.limit ?? 10, q.offset ?? 0) as Row[]).map(toAssistant);
      },
      async count(q: AssistantQuery) {
        const params: unknown[] = [];
        const r = sql(`SELECT count(*) AS n FROM ap_assistants ${searchWhere('a', q, params)}`).get(...params);
        return (r as Row).n as number;
      },
    },

    threads: {
      async create(t: NewThread, ifExists: IfExists) {
        return inTx(() => {
          const existing = st.getThread.get(t.thread_id) as Row | undefined;
          if (existing) {
            if (ifExists === 'do_nothing') return toThread(existing);
            throw new ConflictError(`Thread ${t.thread_id} already exists`);
          }
          const ts = now();
          st.insertThread.run(t.thread_id, ts, ts, ts, j(t.metadata));
          return toThread(st.getThread.get(t.thread_id) as Row);
        });
      },
      async get(id: string) {
        const r = st.getThread.get(id) as Row | undefined;
        return r ? toThread(r) : null;
      },
      async patch(id: string, p: { metadata?: Json }) {
        return inTx(() => {
          const cur = toThread(requireThread(id));
          sql('UPDATE ap_threads SET metadata = ?, updated_at = ? WHERE thread_id = ?').run(
            j({ ...cur.metadata, ...p.metadata }), now(), id);
          return toThread(st.getThread.get(id) as Row);
        });
      },
      async delete(id: string) {
        let deleted: string[] = [];
        const running = inTx(() => {
          requireThread(id);
          const all = sql(`SELECT run_id, status FROM ap_runs WHERE thread_id = ?`).all(id) as Row[];
          const ids = all.filter((r) => r.status === 'running').map((r) => r.run_id as string);
          deleted = all.map((r) => r.run_id as string);
          sql('DELETE FROM ap_runs WHERE thread_id = ?').run(id);
          sql('DELETE FROM ap_threads WHERE thread_id = ?').run(id);
          sql('DELETE FROM writes WHERE thread_id = ?').run(id);
          sql('DELETE FROM checkpoints WHERE thread_id = ?').run(id);
          return ids;
        });
        // Workers holding a deleted run stop it; their finish() then finds nothing to update.
        for (const run_id of running) emit({ type: 'cancel', run_id, action: 'interrupt' });
        for (const run_id of deleted) emit({ type: 'run_done', run_id });
      },
      async search(q: ThreadQuery) {
        const params: unknown[] = [];
        const text = `SELECT * FROM ap_threads ${searchWhere('t', q, params)} ${orderBy(q, THREAD_SORT)} LIMIT ? OFFSET ?`;
        return (sql(text).all(...params, q.limit ?? 10, q.offset ?? 0) as Row[]).map(toThread);
      },
      async count(q: ThreadQuery) {
        const params: unknown[] = [];
        const r = sql(`SELECT count(*) AS n FROM ap_threads ${searchWhere('t', q, params)}`).get(...params);
        return (r as Row).n as number;
      },
      async copy(id: string, newId: string) {
        return inTx(() => {
          const src = toThread(requireThread(id));
          const ts = now();
          sql(`INSERT INTO ap_threads (thread_id, created_at, updated_at, state_updated_at, metadata, status,
            config, "values", interrupts, error) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?)`).run(
            newId, ts, ts, ts, j(src.metadata), src.status === 'busy' ? 'idle' : src.status, j(src.config),
            src.values === null ? null : JSON.stringify(src.values), j(src.interrupts),
            src.error === null ? null : j(src.error));
          sql(`INSERT INTO checkpoints SELECT ?, checkpoint_ns, checkpoint_id, parent_checkpoint_id, type,
            checkpoint, metadata FROM checkpoints WHERE thread_id = ?`).run(newId, id);
          sql(`INSERT INTO writes SELECT ?, checkpoint_ns, checkpoint_id, task_id, idx, channel, type, value
            FROM writes WHERE thread_id = ?`).run(newId, id);
          return toThread(st.getThread.get(newId) as Row);
        });
      },
      async setState(id: string, values: Json | null, interrupted: boolean, interrupts: Json) {
        inTx(() => {
          requireThread(id);
          const inflight = (st.inflight.all(id) as Row[]).length > 0;
          const ts = now();
          sql(`UPDATE ap_threads SET "values" = ?, interrupts = ?, state_updated_at = ?, updated_at = ?,
            status = CASE WHEN ? THEN status ELSE ? END WHERE thread_id = ?`).run(
            values === null ? null : JSON.stringify(values), j(interrupts), ts, ts, inflight ? 1 : 0,
            interrupted ? 'interrupted' : 'idle', id);
        });
      },
    },

    runs: {
      async create(run: NewRun) {
        const cancelled: Array<{ run_id: string; action: CancelAction }> = [];
        const created = inTx(() => {
          const ts = now();
          let thread = st.getThread.get(run.thread_id) as Row | undefined;
          if (!thread) {
            if (run.if_not_exists !== 'create') throw new NotFoundError(`Thread with ID ${run.thread_id} not found`);
            st.insertThread.run(run.thread_id, ts, ts, ts, j(run.thread_metadata));
            thread = st.getThread.get(run.thread_id) as Row;
          }
          const inflight = (st.inflight.all(run.thread_id) as Row[]).map(toRun);
          if (inflight.length && run.multitask_strategy === 'reject') throw new ConflictError(BUSY_THREAD_DETAIL);
          if (run.multitask_strategy === 'interrupt' || run.multitask_strategy === 'rollback') {
            const action: CancelAction = run.multitask_strategy;
            for (const r of inflight) {
              if (r.status === 'pending') {
                if (action === 'rollback') st.deleteRun.run(r.run_id);
                else sql(`UPDATE ap_runs SET status = 'interrupted', updated_at = ? WHERE run_id = ?`).run(ts, r.run_id);
                cancelled.push({ run_id: r.run_id, action });
              } else {
                sql('UPDATE ap_runs SET cancel_action = ? WHERE run_id = ?').run(action, r.run_id);
                cancelled.push({ run_id: r.run_id, action });
              }
            }
          }
          st.insertRun.run(run.run_id, run.thread_id, run.assistant_id, ts, ts, j(run.metadata), j(run.kwargs),
            run.multitask_strategy, run.delay_ms ? Date.now() + run.delay_ms : null);
          const meta = { ...pj(thread.metadata), ...run.thread_metadata };
          sql(`UPDATE ap_threads SET status = 'busy', metadata = ?, updated_at = ? WHERE thread_id = ?`).run(
            j(meta), ts, run.thread_id);
          return toRun(st.getRun.get(run.run_id) as Row);
        });
        for (const c of cancelled) emit({ type: 'cancel', ...c });
        for (const c of cancelled) emit({ type: 'run_done', run_id: c.run_id });
        emit({ type: 'wake' });
        return created;
      },
      async get(threadId: string, runId: string) {
        const r = st.getRun.get(runId) as Row | undefined;
        return r && r.thread_id === threadId ? toRun(r) : null;
      },
      async getById(runId: string) {
        const r = st.getRun.get(runId) as Row | undefined;
        return r ? toRun(r) : null;
      },
      async list(threadId: string, q: { limit: number; offset: number; status?: RunStatus }) {
        const params: unknown[] = [threadId];
        let where = 'thread_id = ?';
        if (q.status) (where += ' AND status = ?'), params.push(q.status);
        return (sql(`SELECT * FROM ap_runs WHERE ${where} ORDER BY seq DESC LIMIT ? OFFSET ?`)
          .all(...params, q.limit, q.offset) as Row[]).map(toRun);
      },
      async delete(threadId: string, runId: string) {
        inTx(() => {
          const r = st.getRun.get(runId) as Row | undefined;
          if (!r || r.thread_id !== threadId) throw new NotFoundError(`Run ${runId} not found`);
          if (r.status === 'running') throw new ConflictError(`Run ${runId} is running; cancel it first`);
          st.deleteRun.run(runId);
          if (r.status === 'pending' && !st.inflight.get(threadId)) {
            st.threadStatus.run('idle', now(), threadId);
          }
        });
        emit({ type: 'run_done', run_id: runId });
      },
      async claim(workerId: string, leaseMs: number) {
        return inTx(() => {
          const r = st.claimable.get(Date.now()) as Row | undefined;
          if (!r) return null;
          const ts = now();
          st.setRunning.run(workerId, Date.now() + leaseMs, ts, r.run_id);
          st.threadBusy.run(ts, r.thread_id);
          return toRun(st.getRun.get(r.run_id as string) as Row);
        });
      },
      async heartbeat(workerId: string, runIds: string[], leaseMs: number) {
        if (!runIds.length) return [];
        const held: string[] = [];
        const upd = sql(`UPDATE ap_runs SET lease_expires_at = ? WHERE run_id = ? AND worker_id = ?
          AND status = 'running'`);
        inTx(() => {
          for (const id of runIds) if (upd.run(Date.now() + leaseMs, id, workerId).changes) held.push(id);
        });
        return held;
      },
      async finish(runId: string, workerId: string, outcome: RunOutcome) {
        const ok = inTx(() => {
          const r = st.getRun.get(runId) as Row | undefined;
          if (!r || r.status !== 'running' || r.worker_id !== workerId) return false;
          sql(`UPDATE ap_runs SET status = ?, error = ?, updated_at = ?, worker_id = NULL,
            lease_expires_at = NULL WHERE run_id = ?`).run(
            outcome.status, outcome.error ? j(outcome.error) : null, now(), runId);
          settleThread(r.thread_id as string, outcome);
          return true;
        });
        if (ok) {
          emit({ type: 'run_done', run_id: runId });
          emit({ type: 'wake' });
        }
        return ok;
      },
      async rollback(runId: string, workerId: string | null) {
        const done = inTx(() => {
          const r = st.getRun.get(runId) as Row | undefined;
          if (!r) return false;
          if (workerId !== null && r.worker_id !== workerId) return false;
          const threadId = r.thread_id as string;
          rollbackCheckpoints(threadId, runId);
          st.deleteRun.run(runId);
          const more = !!st.hasPending.get(threadId);
          st.threadStatus.run(more ? 'busy' : 'idle', now(), threadId);
          return true;
        });
        if (done) {
          emit({ type: 'run_done', run_id: runId });
          emit({ type: 'wake' });
        }
      },
      async release(workerId: string, runIds: string[]) {
        const upd = sql(`UPDATE ap_runs SET status = 'pending', attempt = max(attempt - 1, 0),
          worker_id = NULL, lease_expires_at = NULL WHERE run_id = ? AND worker_id = ? AND status = 'running'`);
        inTx(() => {
          for (const id of runIds) upd.run(id, workerId);
        });
        emit({ type: 'wake' });
      },
      async cancel(threadId: string, runId: string, action: CancelAction) {
        let event: StorageEvent | null = null;
        const result = inTx(() => {
          const r = st.getRun.get(runId) as Row | undefined;
          if (!r || r.thread_id !== threadId) throw new NotFoundError(`Run ${runId} not found`);
          const run = toRun(r);
          if (run.status === 'pending') {
            if (action === 'rollback') st.deleteRun.run(runId);
            else sql(`UPDATE ap_runs SET status = 'interrupted', updated_at = ? WHERE run_id = ?`).run(now(), runId);
            const more = !!st.inflight.get(threadId);
            if (!more) st.threadStatus.run('idle', now(), threadId);
            event = { type: 'run_done', run_id: runId };
            return { ...run, status: action === 'rollback' ? run.status : ('interrupted' as const) };
          }
          if (run.status === 'running') {
            sql('UPDATE ap_runs SET cancel_action = ? WHERE run_id = ?').run(action, runId);
            event = { type: 'cancel', run_id: runId, action };
            return { ...run, cancel_action: action };
          }
          return run;
        });
        if (event) emit(event);
        return result;
      },
      async cancelRequests(runIds: string[]) {
        const out = new Map<string, CancelAction>();
        if (!runIds.length) return out;
        const rows = sql(`SELECT run_id, cancel_action, status FROM ap_runs WHERE run_id IN
          (${runIds.map(() => '?').join(',')})`).all(...runIds) as Row[];
        const found = new Set(rows.map((r) => r.run_id as string));
        for (const r of rows) if (r.cancel_action) out.set(r.run_id as string, r.cancel_action as CancelAction);
        // A run deleted under its worker (thread deleted) must stop too.
        for (const id of runIds) if (!found.has(id)) out.set(id, 'interrupt');
        return out;
      },
      async sweep(maxAttempts: number): Promise<SweepResult> {
        const res: SweepResult = { requeued: [], failed: [] };
        inTx(() => {
          const rows = sql(`SELECT * FROM ap_runs WHERE status = 'running' AND lease_expires_at < ?`)
            .all(Date.now()) as Row[];
          for (const row of rows) {
            const r = toRun(row);
            if (r.cancel_action === 'rollback') {
              rollbackCheckpoints(r.thread_id, r.run_id);
              st.deleteRun.run(r.run_id);
              st.threadStatus.run(st.hasPending.get(r.thread_id) ? 'busy' : 'idle', now(), r.thread_id);
              res.failed.push(r.run_id);
            } else if (r.cancel_action === 'interrupt' || r.attempt >= maxAttempts) {
              const outcome: RunOutcome = r.cancel_action
                ? { status: 'interrupted' }
                : { status: 'error', error: { error: 'WorkerLost', message: `Run abandoned after ${r.attempt} attempts: its worker stopped responding` } };
              sql(`UPDATE ap_runs SET status = ?, error = ?, worker_id = NULL, lease_expires_at = NULL,
                updated_at = ? WHERE run_id = ?`).run(outcome.status, outcome.error ? j(outcome.error) : null, now(), r.run_id);
              settleThread(r.thread_id, outcome);
              res.failed.push(r.run_id);
            } else {
              sql(`UPDATE ap_runs SET status = 'pending', worker_id = NULL, lease_expires_at = NULL,
                updated_at = ? WHERE run_id = ?`).run(now(), r.run_id);
              res.requeued.push(r.run_id);
            }
          }
        });
        for (const run_id of res.failed) emit({ type: 'run_done', run_id });
        if (res.requeued.length) emit({ type: 'wake' });
        return res;
      },
    },

    subscribe(listener) {
      emitter.on('event', listener);
      return () => emitter.off('event', listener);
    },
    async close() {
      emitter.removeAllListeners();
      db.close();
      releaseOwnership();
    },
  };
  return storage;
}

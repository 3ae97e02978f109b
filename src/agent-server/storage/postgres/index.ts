// Postgres store: our tables in one schema, checkpoints through PostgresSaver on the same pool. Several
// processes may share the database: run claims lock the thread row (FOR UPDATE SKIP LOCKED) so one thread
// never runs two runs at once, and LISTEN/NOTIFY carries wake-ups, cancels and completions between them.
// Round trips are the budget (each costs CPU here and in a Postgres backend): the run cycle's statements are
// single statements (run create when the thread is free, claim, finish; checkpoint writes batched per
// event-loop turn, see checkpointer.ts), named so each connection plans them once, and a claim that can find
// nothing new answers without a query (see `changes` below); leases and SKIP LOCKED claims are unchanged.
import { randomUUID } from 'node:crypto';
import { EventEmitter } from 'node:events';
import pg from 'pg';
import type { PostgresSaver } from '@langchain/langgraph-checkpoint-postgres';
import { ConflictError, NotFoundError } from '../../../lib/errors.ts';
import type { Logger } from '../../../lib/logger.ts';
import { FewerTripsPostgresSaver } from './checkpointer.ts';
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
type Q = Pick<pg.PoolClient, 'query'>;

// Arbitrary constant: every agent-server process migrates under this advisory lock.
const MIGRATION_LOCK = 7_316_284_551;

function schemaSql(s: string): string {
  return `
CREATE SCHEMA IF NOT EXISTS ${s};
CREATE TABLE IF NOT EXISTS ${s}.assistants (
  assistant_id uuid PRIMARY KEY, graph_id text NOT NULL, config jsonb NOT NULL, context jsonb NOT NULL,
  metadata jsonb NOT NULL, name text NOT NULL, description text, version integer NOT NULL,
  created_at timestamptz NOT NULL DEFAULT now(), updated_at timestamptz NOT NULL DEFAULT now());
CREATE TABLE IF NOT EXISTS ${s}.threads (
  thread_id uuid PRIMARY KEY, created_at timestamptz NOT NULL DEFAULT now(),
  updated_at timestamptz NOT NULL DEFAULT now(), state_updated_at timestamptz NOT NULL DEFAULT now(),
  metadata jsonb NOT NULL, status text NOT NULL DEFAULT 'idle', config jsonb NOT NULL DEFAULT '{}',
  "values" jsonb, interrupts jsonb NOT NULL DEFAULT '{}', error jsonb);
CREATE TABLE IF NOT EXISTS ${s}.runs (
  seq bigserial UNIQUE, run_id uuid PRIMARY KEY, thread_id uuid NOT NULL, assistant_id uuid NOT NULL,
  created_at timestamptz NOT NULL DEFAULT now(), updated_at timestamptz NOT NULL DEFAULT now(),
  metadata jsonb NOT NULL, status text NOT NULL, kwargs jsonb NOT NULL, multitask_strategy text NOT NULL,
  attempt integer NOT NULL DEFAULT 0, worker_id text, lease_expires_at timestamptz, cancel_action text, error jsonb);
ALTER TABLE ${s}.runs ADD COLUMN IF NOT EXISTS not_before timestamptz;
CREATE INDEX IF NOT EXISTS runs_thread_status ON ${s}.runs (thread_id, status, seq);
CREATE INDEX IF NOT EXISTS runs_pending ON ${s}.runs (seq) WHERE status = 'pending';
CREATE INDEX IF NOT EXISTS runs_running_lease ON ${s}.runs (lease_expires_at) WHERE status = 'running';
`;
}

// Named (prepared) statements list their columns: a column added by a newer process's migration must not change
// the result type of a statement an older process has prepared ("cached plan must not change result type").
const RUN_COLS = `run_id, thread_id, assistant_id, created_at, updated_at, metadata, status, kwargs, multitask_strategy,
  attempt, worker_id, cancel_action, error`;
const THREAD_COLS = `thread_id, created_at, updated_at, state_updated_at, metadata, status, config, "values", interrupts, error`;
const ASSISTANT_COLS = `assistant_id, graph_id, config, context, metadata, name, description, version, created_at, updated_at`;

const ts = (v: unknown): string => (v instanceof Date ? isoNow(v.getTime()) : String(v));

function toAssistant(r: Row): Assistant {
  return {
    assistant_id: r.assistant_id as string,
    graph_id: r.graph_id as string,
    config: r.config as Json,
    context: r.context as Json,
    metadata: r.metadata as Json,
    name: r.name as string,
    description: (r.description as string | null) ?? null,
    version: r.version as number,
    created_at: ts(r.created_at),
    updated_at: ts(r.updated_at),
  };
}

function toThread(r: Row): Thread {
  return {
    thread_id: r.thread_id as string,
    created_at: ts(r.created_at),
    updated_at: ts(r.updated_at),
    state_updated_at: ts(r.state_updated_at),
    metadata: r.metadata as Json,
    status: r.status as Thread['status'],
    config: r.config as Json,
    values: (r.values as Json | null) ?? null,
    interrupts: r.interrupts as Json,
    error: (r.error as Json | null) ?? null,
  };
}

function toRun(r: Row): RunRecord {
  return {
    run_id: r.run_id as string,
    thread_id: r.thread_id as string,
    assistant_id: r.assistant_id as string,
    created_at: ts(r.created_at),
    updated_at: ts(r.updated_at),
    metadata: r.metadata as Json,
    status: r.status as RunStatus,
    kwargs: r.kwargs as Json,
    multitask_strategy: r.multitask_strategy as RunRecord['multitask_strategy'],
    attempt: r.attempt as number,
    worker_id: (r.worker_id as string | null) ?? null,
    cancel_action: (r.cancel_action as CancelAction | null) ?? null,
    error: (r.error as Json | null) ?? null,
  };
}

export interface PostgresOptions {
  databaseUrl: string;
  /** Schema for our tables and the checkpoint tables. */
  schema?: string;
  poolSize?: number;
  logger?: Logger;
}

/**
 * The checkpoints of a Postgres store through a pool of their own (for graphs executing on another thread);
 * the store's migrations have already created the tables.
 */
export function openPostgresCheckpointer(databaseUrl: string, schema: string, poolSize = 10) {
  const pool = new pg.Pool({ connectionString: databaseUrl, max: poolSize });
  pool.on('error', () => undefined);
  const saver = new FewerTripsPostgresSaver(pool, undefined, { schema });
  return { saver, close: () => pool.end() };
}

export async function openPostgresStorage(opts: PostgresOptions): Promise<Storage> {
  const s = opts.schema ?? 'agentplane';
  if (!/^[a-z_][a-z0-9_]*$/.test(s)) throw new Error(`invalid schema name ${s}`);
  const pool = new pg.Pool({ connectionString: opts.databaseUrl, max: opts.poolSize ?? 20 });
  pool.on('error', (err) => opts.logger?.warn({ err }, 'idle postgres client failed'));
  const saver = new FewerTripsPostgresSaver(pool, undefined, { schema: s });
  // One channel per schema, so stores sharing a database do not hear each other.
  const channel = `${s}_events`;

  await migrate(pool, s, saver);

  const emitter = new EventEmitter();
  emitter.setMaxListeners(0);
  // Claim short-cut. The engine claims on every wake-up and after every launch and finish, and most of those
  // claims find nothing. After a claim saw nothing (more) to take, further claims answer null without a query
  // until something may have changed: any event heard (wake, run_done: from this process or, through NOTIFY,
  // any other), a write of this store that can free a run, a sweep (the engine's safety tick, which also covers
  // a thread that was locked when we looked), or the moment the earliest delayed run becomes due. `changes`
  // counts those; a claim records it before its query, so an event arriving meanwhile is never lost.
  // Writes of this store count after they commit; their own NOTIFY echoes (tagged with `origin`) then add
  // nothing, and neither do cancels or a run_done that frees no queued run (more: false).
  let changes = 0;
  let quietAt = -1;
  let dueAt = Infinity;
  const changed = () => void changes++;
  const afterWrite = async <T>(p: Promise<T>): Promise<T> => {
    try {
      return await p;
    } finally {
      changed();
    }
  };
  const origin = randomUUID();
  const local = (e: StorageEvent) => {
    changed();
    queueMicrotask(() => emitter.emit('event', e));
  };
  const listener = await startListener(opts, channel, (tagged) => {
    const { o, more, ...e } = tagged as StorageEvent & { o?: string; more?: boolean };
    if (o !== origin && e.type !== 'cancel' && !(e.type === 'run_done' && more === false)) changed();
    emitter.emit('event', e as StorageEvent);
  });

  /** A transaction; its commit may free or queue runs, so the claim short-cut looks again afterwards. */
  async function tx<T>(fn: (c: pg.PoolClient) => Promise<T>): Promise<T> {
    const c = await pool.connect();
    try {
      await c.query('BEGIN');
      const out = await fn(c);
      await c.query('COMMIT');
      return out;
    } catch (err) {
      await c.query('ROLLBACK').catch(() => undefined);
      throw err;
    } finally {
      c.release();
      changed();
    }
  }

  /** A named statement: each pooled connection parses and plans it once (hot paths only; fixed text). */
  const named = (name: string, text: string, values: unknown[]): pg.QueryConfig => ({ name: `ap_${name}_${s}`, text, values });
  const notify = (c: Q, e: StorageEvent) => c.query('SELECT pg_notify($1, $2)', [channel, JSON.stringify({ ...e, o: origin })]);

  async function requireThread(c: Q, id: string, lock = false): Promise<Row> {
    const { rows } = await c.query(`SELECT * FROM ${s}.threads WHERE thread_id = $1${lock ? ' FOR UPDATE' : ''}`, [id]);
    if (!rows[0]) throw new NotFoundError(`Thread with ID ${id} not found`);
    return rows[0] as Row;
  }

  /** Every transaction that touches a run and its thread locks the thread first (same order as claim). */
  async function lockThreadOfRun(c: Q, runId: string): Promise<void> {
    await c.query(`SELECT 1 FROM ${s}.threads WHERE thread_id = (SELECT thread_id FROM ${s}.runs WHERE run_id = $1)
      FOR UPDATE`, [runId]);
  }

  async function hasPending(c: Q, threadId: string): Promise<boolean> {
    const { rows } = await c.query(`SELECT 1 FROM ${s}.runs WHERE thread_id = $1 AND status = 'pending' LIMIT 1`, [threadId]);
    return rows.length > 0;
  }

  async function settleThread(c: Q, threadId: string, outcome: RunOutcome): Promise<void> {
    const status = threadStatusAfter(outcome, await hasPending(c, threadId));
    const error = outcome.status === 'error' ? JSON.stringify(outcome.error ?? {}) : null;
    if (outcome.values !== undefined) {
      await c.query(`UPDATE ${s}.threads SET status = $2, "values" = $3, state_updated_at = now(), updated_at = now(),
        interrupts = $4, error = $5 WHERE thread_id = $1`,
        [threadId, status, outcome.values === null ? null : JSON.stringify(outcome.values),
          JSON.stringify(outcome.interrupts ?? {}), error]);
    } else {
      await c.query(`UPDATE ${s}.threads SET status = $2, updated_at = now(), interrupts = $3, error = $4
        WHERE thread_id = $1`, [threadId, status, JSON.stringify(outcome.interrupts ?? {}), error]);
    }
  }

  async function rollbackCheckpoints(c: Q, threadId: string, runId: string): Promise<void> {
    const { rows } = await c.query(`SELECT checkpoint_id FROM ${s}.checkpoints WHERE thread_id = $1
      AND checkpoint_ns = '' AND metadata->>'run_id' = $2 ORDER BY checkpoint_id LIMIT 1`, [threadId, runId]);
    const first = rows[0]?.checkpoint_id as string | undefined;
    if (!first) return;
    await c.query(`DELETE FROM ${s}.checkpoint_writes WHERE thread_id = $1 AND checkpoint_id >= $2`, [threadId, first]);
    await c.query(`DELETE FROM ${s}.checkpoints WHERE thread_id = $1 AND checkpoint_id >= $2`, [threadId, first]);
  }

  function where(kind: 'a' | 't', q: Omit<AssistantQuery, 'sort_by'> & Omit<ThreadQuery, 'sort_by'>, params: unknown[]): string {
    const clauses: string[] = [];
    const p = (v: unknown) => (params.push(v), `$${params.length}`);
    if (kind === 'a') {
      if (q.graph_id) clauses.push(`graph_id = ${p(q.graph_id)}`);
      if (q.name) clauses.push(`name ILIKE ${p(`%${q.name}%`)}`);
    } else {
      if (q.ids?.length) clauses.push(`thread_id = ANY(${p(q.ids)}::uuid[])`);
      if (q.status) clauses.push(`status = ${p(q.status)}`);
      if (q.values && Object.keys(q.values).length) clauses.push(`"values" @> ${p(JSON.stringify(q.values))}::jsonb`);
    }
    if (q.metadata && Object.keys(q.metadata).length) clauses.push(`metadata @> ${p(JSON.stringify(q.metadata))}::jsonb`);
    return clauses.length ? `WHERE ${clauses.join(' AND ')}` : '';
  }

  function orderBy(q: { sort_by?: string; sort_order?: string }, allowed: Set<string>): string {
    const by = q.sort_by && allowed.has(q.sort_by) ? q.sort_by : 'created_at';
    return `ORDER BY ${by} ${q.sort_order === 'asc' ? 'ASC' : 'DESC'}`;
  }

  const insertAssistant = `INSERT INTO ${s}.assistants (assistant_id, graph_id, config, context, metadata, name,
    description, version) VALUES ($1, $2, $3, $4, $5, $6, $7, 1)`;
  const assistantParams = (a: NewAssistant) => [a.assistant_id, a.graph_id, JSON.stringify(a.config),
    JSON.stringify(a.context), JSON.stringify(a.metadata), a.name, a.description];

  const storage: Storage = {
    kind: 'postgres',
    checkpointer: saver,
    checkpointerSource: { kind: 'postgres', databaseUrl: opts.databaseUrl, schema: s },

    assistants: {
      async create(a: NewAssistant, ifExists: IfExists) {
        const { rows } = await pool.query(`${insertAssistant} ON CONFLICT (assistant_id) DO NOTHING RETURNING *`,
          assistantParams(a));
        if (rows[0]) return toAssistant(rows[0]);
        if (ifExists === 'raise') throw new ConflictError(`Assistant ${a.assistant_id} already exists`);
        const existing = await this.get(a.assistant_id);
        if (!existing) throw new ConflictError(`Assistant ${a.assistant_id} was deleted concurrently`);
        return existing;
      },
      async upsertSystem(a: NewAssistant) {
        const { rows } = await pool.query(`${insertAssistant} ON CONFLICT (assistant_id) DO UPDATE SET
          graph_id = excluded.graph_id, metadata = excluded.metadata RETURNING *`, assistantParams(a));
        return toAssistant(rows[0]);
      },
      async get(id: string) {
        const { rows } = await pool.query(named('assistant_get', `SELECT ${ASSISTANT_COLS} FROM ${s}.assistants WHERE assistant_id = $1`, [id]));
        return rows[0] ? toAssistant(rows[0]) : null;
      },
      async patch(id: string, p: AssistantPatch) {
        const { rows } = await pool.query(`UPDATE ${s}.assistants SET graph_id = coalesce($2, graph_id),
          config = coalesce($3::jsonb, config), context = coalesce($4::jsonb, context),
          metadata = metadata || coalesce($5::jsonb, '{}'), name = coalesce($6, name),
          description = CASE WHEN $7::boolean THEN $8 ELSE description END, version = version + 1, updated_at = now()
          WHERE assistant_id = $1 RETURNING *`,
          [id, p.graph_id ?? null, p.config ? JSON.stringify(p.config) : null,
            p.context ? JSON.stringify(p.context) : null, p.metadata ? JSON.stringify(p.metadata) : null,
            p.name ?? null, p.description !== undefined, p.description ?? null]);
        if (!rows[0]) throw new NotFoundError(`Assistant ${id} not found`);
        return toAssistant(rows[0]);
      },
      async delete(id: string) {
        const { rowCount } = await pool.query(`DELETE FROM ${s}.assistants WHERE assistant_id = $1`, [id]);
        if (!rowCount) throw new NotFoundError(`Assistant ${id} not found`);
      },
      async search(q: AssistantQuery) {
        const params: unknown[] = [];
        const w = where('a', q, params);
        params.push(q.limit ?? 10, q.offset ?? 0);
        const { rows } = await pool.query(`SELECT * FROM ${s}.assistants ${w} ${orderBy(q, ASSISTANT_SORT)}
          LIMIT $${params.length - 1} OFFSET $${params.length}`, params);
        return rows.map(toAssistant);
      },
      async count(q: AssistantQuery) {
        const params: unknown[] = [];
        const { rows } = await pool.query(`SELECT count(*)::int AS n FROM ${s}.assistants ${where('a', q, params)}`, params);
        return rows[0].n as number;
      },
    },

    threads: {
      async create(t: NewThread, ifExists: IfExists) {
        const { rows } = await pool.query(named('thread_create', `INSERT INTO ${s}.threads (thread_id, metadata)
          VALUES ($1, $2) ON CONFLICT (thread_id) DO NOTHING RETURNING ${THREAD_COLS}`, [t.thread_id, JSON.stringify(t.metadata)]));
        if (rows[0]) return toThread(rows[0]);
        if (ifExists === 'raise') throw new ConflictError(`Thread ${t.thread_id} already exists`);
        const existing = await this.get(t.thread_id);
        if (!existing) throw new ConflictError(`Thread ${t.thread_id} was deleted concurrently`);
        return existing;
      },
      async get(id: string) {
        const { rows } = await pool.query(named('thread_get', `SELECT ${THREAD_COLS} FROM ${s}.threads WHERE thread_id = $1`, [id]));
        return rows[0] ? toThread(rows[0]) : null;
      },
      async patch(id: string, p: { metadata?: Json }) {
        const { rows } = await pool.query(`UPDATE ${s}.threads SET metadata = metadata || $2::jsonb, updated_at = now()
          WHERE thread_id = $1 RETURNING *`, [id, JSON.stringify(p.metadata ?? {})]);
        if (!rows[0]) throw new NotFoundError(`Thread with ID ${id} not found`);
        return toThread(rows[0]);
      },
      async delete(id: string) {
        await tx(async (c) => {
          await requireThread(c, id, true);
          const { rows } = await c.query(`DELETE FROM ${s}.runs WHERE thread_id = $1 RETURNING run_id, status`, [id]);
          await c.query(`DELETE FROM ${s}.threads WHERE thread_id = $1`, [id]);
          for (const t of ['checkpoint_writes', 'checkpoint_blobs', 'checkpoints']) {
            await c.query(`DELETE FROM ${s}.${t} WHERE thread_id = $1`, [id]);
          }
          const ids = rows.filter((r) => r.status === 'running').map((r) => r.run_id as string);
          // Workers holding a deleted run stop it; their finish() then finds nothing to update.
          for (const run_id of ids) await notify(c, { type: 'cancel', run_id, action: 'interrupt' });
          for (const r of rows) await notify(c, { type: 'run_done', run_id: r.run_id as string });
        });
      },
      async search(q: ThreadQuery) {
        const params: unknown[] = [];
        const w = where('t', q, params);
        params.push(q.limit ?? 10, q.offset ?? 0);
        const { rows } = await pool.query(`SELECT * FROM ${s}.threads ${w} ${orderBy(q, THREAD_SORT)}
          LIMIT $${params.length - 1} OFFSET $${params.length}`, params);
        return rows.map(toThread);
      },
      async count(q: ThreadQuery) {
        const params: unknown[] = [];
        const { rows } = await pool.query(`SELECT count(*)::int AS n FROM ${s}.threads ${where('t', q, params)}`, params);
        return rows[0].n as number;
      },
      async copy(id: string, newId: string) {
        return tx(async (c) => {
          await requireThread(c, id);
          const { rows } = await c.query(`INSERT INTO ${s}.threads (thread_id, metadata, status, config, "values",
            interrupts, error) SELECT $2, metadata, CASE WHEN status = 'busy' THEN 'idle' ELSE status END, config,
            "values", interrupts, error FROM ${s}.threads WHERE thread_id = $1 RETURNING *`, [id, newId]);
          await c.query(`INSERT INTO ${s}.checkpoints SELECT $2, checkpoint_ns, checkpoint_id, parent_checkpoint_id,
            type, checkpoint, metadata FROM ${s}.checkpoints WHERE thread_id = $1`, [id, newId]);
          await c.query(`INSERT INTO ${s}.checkpoint_blobs SELECT $2, checkpoint_ns, channel, version, type, blob
            FROM ${s}.checkpoint_blobs WHERE thread_id = $1`, [id, newId]);
          await c.query(`INSERT INTO ${s}.checkpoint_writes SELECT $2, checkpoint_ns, checkpoint_id, task_id, idx,
            channel, type, blob FROM ${s}.checkpoint_writes WHERE thread_id = $1`, [id, newId]);
          return toThread(rows[0]);
        });
      },
      async setState(id: string, values: Json | null, interrupted: boolean, interrupts: Json) {
        const { rowCount } = await pool.query(`UPDATE ${s}.threads SET "values" = $2, interrupts = $3,
          state_updated_at = now(), updated_at = now(), status = CASE WHEN EXISTS (SELECT 1 FROM ${s}.runs
          WHERE thread_id = $1 AND status IN ('pending','running')) THEN status ELSE $4 END WHERE thread_id = $1`,
          [id, values === null ? null : JSON.stringify(values), JSON.stringify(interrupts),
            interrupted ? 'interrupted' : 'idle']);
        if (!rowCount) throw new NotFoundError(`Thread with ID ${id} not found`);
      },
    },

    runs: {
      async create(run: NewRun) {
        // Fast path, one statement: lock the thread; when it has nothing in flight (or the strategy is enqueue)
        // insert the run, mark the thread busy and wake the claimers. In flight means a pending or running run
        // in this statement's snapshot, or the thread row (read under the lock, so current) still busy: a run
        // committed while we waited for the lock made the thread busy in the same transaction.
        const fast = await pool.query({
          name: `ap_run_create_${s}`,
          text: `WITH lk AS (SELECT t.thread_id, t.status FROM ${s}.threads t WHERE t.thread_id = $2 FOR UPDATE),
            st AS (SELECT lk.thread_id, EXISTS (SELECT 1 FROM ${s}.runs r WHERE r.thread_id = lk.thread_id
                AND r.status IN ('pending','running')) AS inflight, lk.status = 'busy' AS busy FROM lk),
            ins AS (INSERT INTO ${s}.runs (run_id, thread_id, assistant_id, metadata, status, kwargs, multitask_strategy,
                not_before, created_at, updated_at)
              SELECT $1, st.thread_id, $3, $4, 'pending', $5, $6,
                CASE WHEN $9::float8 > 0 THEN now() + make_interval(secs => $9::float8 / 1000) END,
                clock_timestamp(), clock_timestamp()
              FROM st WHERE $6 = 'enqueue' OR NOT (st.inflight OR st.busy)
              RETURNING ${RUN_COLS}),
            th AS (UPDATE ${s}.threads SET status = 'busy', metadata = metadata || $7::jsonb, updated_at = now()
              WHERE thread_id = (SELECT thread_id FROM ins) RETURNING 1),
            n AS (SELECT pg_notify($8, $10) FROM ins)
            SELECT (SELECT count(*) FROM st) AS _found, (SELECT inflight FROM st) AS _inflight,
              (SELECT count(*) FROM th) AS _th, (SELECT count(*) FROM n) AS _n, ins.*
            FROM (SELECT 1) one LEFT JOIN ins ON true`,
          values: [run.run_id, run.thread_id, run.assistant_id, JSON.stringify(run.metadata), JSON.stringify(run.kwargs),
            run.multitask_strategy, JSON.stringify(run.thread_metadata), channel, run.delay_ms ?? 0,
            JSON.stringify({ type: 'wake', o: origin })],
        });
        const row = fast.rows[0];
        if (row?.run_id) {
          local({ type: 'wake' });
          return toRun(row);
        }
        const found = Number(row?._found) > 0;
        if (!found && run.if_not_exists !== 'create') throw new NotFoundError(`Thread with ID ${run.thread_id} not found`);
        if (found && row._inflight && run.multitask_strategy === 'reject') throw new ConflictError(BUSY_THREAD_DETAIL);
        // Slow path: a thread to create, runs to cancel (interrupt, rollback) or a busy status to check.
        const created = await tx(async (c) => {
          if (run.if_not_exists === 'create') {
            await c.query(`INSERT INTO ${s}.threads (thread_id, metadata) VALUES ($1, $2) ON CONFLICT (thread_id) DO NOTHING`,
              [run.thread_id, JSON.stringify(run.thread_metadata)]);
          }
          // Lock first, then read the in-flight runs in a later statement: its snapshot is taken after the lock,
          // so it sees every run committed by whoever held the thread before us.
          const { rows: lock } = await c.query(`SELECT thread_id FROM ${s}.threads WHERE thread_id = $1 FOR UPDATE`,
            [run.thread_id]);
          if (!lock[0]) throw new NotFoundError(`Thread with ID ${run.thread_id} not found`);
          const { rows: inflight } = await c.query(`SELECT run_id, status FROM ${s}.runs WHERE thread_id = $1
            AND status IN ('pending','running')`, [run.thread_id]);
          if (inflight.length && run.multitask_strategy === 'reject') throw new ConflictError(BUSY_THREAD_DETAIL);
          if (inflight.length && (run.multitask_strategy === 'interrupt' || run.multitask_strategy === 'rollback')) {
            const action: CancelAction = run.multitask_strategy;
            for (const r of inflight as Array<{ run_id: string; status: string }>) {
              if (r.status === 'pending') {
                if (action === 'rollback') await c.query(`DELETE FROM ${s}.runs WHERE run_id = $1`, [r.run_id]);
                else await c.query(`UPDATE ${s}.runs SET status = 'interrupted', updated_at = now() WHERE run_id = $1`, [r.run_id]);
                await notify(c, { type: 'run_done', run_id: r.run_id });
              } else {
                await c.query(`UPDATE ${s}.runs SET cancel_action = $2 WHERE run_id = $1`, [r.run_id, action]);
                await notify(c, { type: 'cancel', run_id: r.run_id, action });
              }
            }
          }
          // clock_timestamp(): the moment of the insert, not the start of this transaction.
          const { rows } = await c.query(`WITH ins AS (INSERT INTO ${s}.runs (run_id, thread_id, assistant_id, metadata,
              status, kwargs, multitask_strategy, not_before, created_at, updated_at) VALUES ($1, $2, $3, $4, 'pending',
              $5, $6, CASE WHEN $9::float8 > 0 THEN now() + make_interval(secs => $9::float8 / 1000) END,
              clock_timestamp(), clock_timestamp()) RETURNING *),
            th AS (UPDATE ${s}.threads SET status = 'busy', metadata = metadata || $7::jsonb, updated_at = now()
              WHERE thread_id = $2 RETURNING 1),
            n AS (SELECT pg_notify($8, $10))
            SELECT ins.*, (SELECT count(*) FROM th) AS _th, (SELECT count(*) FROM n) AS _n FROM ins`,
            [run.run_id, run.thread_id, run.assistant_id, JSON.stringify(run.metadata), JSON.stringify(run.kwargs),
              run.multitask_strategy, JSON.stringify(run.thread_metadata), channel, run.delay_ms ?? 0,
              JSON.stringify({ type: 'wake', o: origin })]);
          return toRun(rows[0]);
        });
        local({ type: 'wake' });
        return created;
      },
      async get(threadId: string, runId: string) {
        const { rows } = await pool.query(named('run_get', `SELECT ${RUN_COLS} FROM ${s}.runs WHERE run_id = $1 AND thread_id = $2`,
          [runId, threadId]));
        return rows[0] ? toRun(rows[0]) : null;
      },
      async getById(runId: string) {
        const { rows } = await pool.query(named('run_get_by_id', `SELECT ${RUN_COLS} FROM ${s}.runs WHERE run_id = $1`, [runId]));
        return rows[0] ? toRun(rows[0]) : null;
      },
      async list(threadId: string, q: { limit: number; offset: number; status?: RunStatus }) {
        const { rows } = await pool.query(`SELECT * FROM ${s}.runs WHERE thread_id = $1 AND ($2::text IS NULL OR
          status = $2) ORDER BY seq DESC LIMIT $3 OFFSET $4`, [threadId, q.status ?? null, q.limit, q.offset]);
        return rows.map(toRun);
      },
      async delete(threadId: string, runId: string) {
        await tx(async (c) => {
          await c.query(`SELECT 1 FROM ${s}.threads WHERE thread_id = $1 FOR UPDATE`, [threadId]);
          const { rows } = await c.query(`SELECT status FROM ${s}.runs WHERE run_id = $1 AND thread_id = $2 FOR UPDATE`,
            [runId, threadId]);
          if (!rows[0]) throw new NotFoundError(`Run ${runId} not found`);
          if (rows[0].status === 'running') throw new ConflictError(`Run ${runId} is running; cancel it first`);
          await c.query(`DELETE FROM ${s}.runs WHERE run_id = $1`, [runId]);
          if (rows[0].status === 'pending') {
            await c.query(`UPDATE ${s}.threads SET status = 'idle', updated_at = now() WHERE thread_id = $1 AND NOT
              EXISTS (SELECT 1 FROM ${s}.runs WHERE thread_id = $1 AND status IN ('pending','running'))`, [threadId]);
          }
          await notify(c, { type: 'run_done', run_id: runId });
        });
      },
      async claim(workerId: string, leaseMs: number) {
        if (quietAt === changes && Date.now() < dueAt) return null;
        // One statement: lock the thread of the oldest claimable run (SKIP LOCKED: another claimer has it), take
        // its oldest pending run. The UPDATE re-checks status under the row lock, so a claimer working from a
        // stale snapshot gets nothing instead of a second copy; it then tries again. _more: is there another
        // claimable thread; _due_ms: when the earliest delayed run becomes due (both for the short-cut above).
        for (let i = 0; i < 5; i++) {
          const seen = changes;
          const t0 = Date.now();
          const { rows } = await pool.query({
            name: `ap_claim_${s}`,
            text: `WITH cand AS (
              SELECT t.thread_id FROM ${s}.threads t
              JOIN (SELECT thread_id, min(seq) AS first FROM ${s}.runs WHERE status = 'pending'
                AND (not_before IS NULL OR not_before <= now()) GROUP BY thread_id) p
                ON p.thread_id = t.thread_id
              WHERE NOT EXISTS (SELECT 1 FROM ${s}.runs x WHERE x.thread_id = t.thread_id AND x.status = 'running')
              ORDER BY p.first LIMIT 1 FOR UPDATE OF t SKIP LOCKED),
            claimed AS (
              UPDATE ${s}.runs SET status = 'running', attempt = attempt + 1, worker_id = $1,
                lease_expires_at = now() + make_interval(secs => $2), updated_at = now()
              WHERE run_id = (SELECT r.run_id FROM ${s}.runs r WHERE r.thread_id = (SELECT thread_id FROM cand)
                AND r.status = 'pending' AND (r.not_before IS NULL OR r.not_before <= now()) ORDER BY r.seq LIMIT 1)
                AND status = 'pending'
              RETURNING ${RUN_COLS}),
            th AS (UPDATE ${s}.threads SET status = 'busy', updated_at = now()
              WHERE thread_id = (SELECT thread_id FROM claimed) RETURNING 1)
            SELECT (SELECT count(*) FROM cand) AS _cand, (SELECT count(*) FROM th) AS _th,
              EXISTS (SELECT 1 FROM ${s}.runs p WHERE p.status = 'pending'
                AND (p.not_before IS NULL OR p.not_before <= now())
                AND p.thread_id IS DISTINCT FROM (SELECT thread_id FROM cand)
                AND NOT EXISTS (SELECT 1 FROM ${s}.runs x WHERE x.thread_id = p.thread_id AND x.status = 'running'))
                AS _more,
              (SELECT extract(epoch FROM min(d.not_before) - now()) * 1000 FROM ${s}.runs d
                WHERE d.status = 'pending' AND d.not_before > now())::float8 AS _due_ms,
              c.*
            FROM (SELECT 1) one LEFT JOIN claimed c ON true`,
            values: [workerId, leaseMs / 1000],
          });
          const row = rows[0];
          const nothing = !row || (!row.run_id && Number(row._cand) === 0);
          if (nothing && row?._more) {
            // Claimable work whose thread row is locked (another claimer, or a write that sends no notification,
            // maybe in another process): look again shortly instead of staying quiet until the safety tick.
            setTimeout(() => local({ type: 'wake' }), 25).unref();
            return null;
          }
          if (nothing || (row.run_id && !row._more)) {
            // Nothing else to take: quiet until an event, unless it came while we looked.
            quietAt = seen;
            dueAt = row?._due_ms == null ? Infinity : t0 + Math.max(0, Number(row._due_ms));
          }
          if (row?.run_id) return toRun(row);
          if (nothing) return null;
        }
        return null;
      },
      async heartbeat(workerId: string, runIds: string[], leaseMs: number) {
        if (!runIds.length) return [];
        const { rows } = await pool.query(named('heartbeat', `UPDATE ${s}.runs
          SET lease_expires_at = now() + make_interval(secs => $3)
          WHERE run_id = ANY($1::uuid[]) AND worker_id = $2 AND status = 'running' RETURNING run_id`,
          [runIds, workerId, leaseMs / 1000]));
        return rows.map((r) => r.run_id as string);
      },
      async finish(runId: string, workerId: string, outcome: RunOutcome) {
        // One statement: thread locked first (same order as claim), run ended, thread status settled, waiters told
        // (the run_done says whether a queued run of the thread became claimable: `more`).
        const { rows } = await pool.query(named('finish', `WITH lk AS (
            SELECT thread_id FROM ${s}.threads WHERE thread_id = (SELECT thread_id FROM ${s}.runs WHERE run_id = $1)
            FOR UPDATE),
          r AS (UPDATE ${s}.runs SET status = $3, error = $4, updated_at = now(), worker_id = NULL, lease_expires_at = NULL
            WHERE run_id = $1 AND worker_id = $2 AND status = 'running' AND thread_id = (SELECT thread_id FROM lk)
            RETURNING thread_id),
          th AS (UPDATE ${s}.threads t SET
              status = CASE WHEN $5 = 'error' THEN 'error' WHEN $6::boolean THEN 'interrupted'
                WHEN EXISTS (SELECT 1 FROM ${s}.runs p WHERE p.thread_id = t.thread_id AND p.status = 'pending'
                  AND p.run_id <> $1) THEN 'busy' ELSE 'idle' END,
              "values" = CASE WHEN $7::boolean THEN $8::jsonb ELSE t."values" END,
              state_updated_at = CASE WHEN $7::boolean THEN now() ELSE t.state_updated_at END,
              updated_at = now(), interrupts = $9, error = $10
            FROM r WHERE t.thread_id = r.thread_id RETURNING 1),
          m AS (SELECT EXISTS (SELECT 1 FROM ${s}.runs p WHERE p.thread_id = r.thread_id AND p.status = 'pending'
              AND p.run_id <> $1) AS more FROM r),
          n AS (SELECT pg_notify($11, CASE WHEN m.more THEN $12 ELSE $13 END) FROM m)
          SELECT (SELECT count(*) FROM r) AS done, (SELECT count(*) FROM th) AS _th, (SELECT count(*) FROM n) AS _n,
            coalesce((SELECT more FROM m), false) AS more`,
          [runId, workerId, outcome.status, outcome.error ? JSON.stringify(outcome.error) : null,
            outcome.status === 'error' || outcome.status === 'timeout' ? 'error' : 'ok', !!outcome.interrupted,
            outcome.values !== undefined, outcome.values == null ? null : JSON.stringify(outcome.values),
            JSON.stringify(outcome.interrupts ?? {}), outcome.status === 'error' ? JSON.stringify(outcome.error ?? {}) : null,
            channel, JSON.stringify({ type: 'run_done', run_id: runId, o: origin, more: true }),
            JSON.stringify({ type: 'run_done', run_id: runId, o: origin, more: false })]));
        if (rows[0]?.more) changed();
        // Waiters here and in other processes hear about it through NOTIFY.
        return Number(rows[0]?.done) > 0;
      },
      async rollback(runId: string, workerId: string | null) {
        await tx(async (c) => {
          await lockThreadOfRun(c, runId);
          const { rows } = await c.query(`SELECT thread_id, worker_id FROM ${s}.runs WHERE run_id = $1 FOR UPDATE`, [runId]);
          if (!rows[0] || (workerId !== null && rows[0].worker_id !== workerId)) return;
          const threadId = rows[0].thread_id as string;
          await rollbackCheckpoints(c, threadId, runId);
          await c.query(`DELETE FROM ${s}.runs WHERE run_id = $1`, [runId]);
          const more = await hasPending(c, threadId);
          await c.query(`UPDATE ${s}.threads SET status = $2, updated_at = now() WHERE thread_id = $1`,
            [threadId, more ? 'busy' : 'idle']);
          await notify(c, { type: 'run_done', run_id: runId });
          await notify(c, { type: 'wake' });
        });
      },
      async release(workerId: string, runIds: string[]) {
        if (!runIds.length) return;
        await afterWrite(pool.query(`UPDATE ${s}.runs SET status = 'pending', attempt = greatest(attempt - 1, 0),
          worker_id = NULL, lease_expires_at = NULL WHERE run_id = ANY($1::uuid[]) AND worker_id = $2
          AND status = 'running'`, [runIds, workerId]));
        await pool.query('SELECT pg_notify($1, $2)', [channel, JSON.stringify({ type: 'wake', o: origin })]);
      },
      async cancel(threadId: string, runId: string, action: CancelAction) {
        return tx(async (c) => {
          await c.query(`SELECT 1 FROM ${s}.threads WHERE thread_id = $1 FOR UPDATE`, [threadId]);
          const { rows } = await c.query(`SELECT * FROM ${s}.runs WHERE run_id = $1 AND thread_id = $2 FOR UPDATE`,
            [runId, threadId]);
          if (!rows[0]) throw new NotFoundError(`Run ${runId} not found`);
          const run = toRun(rows[0]);
          if (run.status === 'pending') {
            if (action === 'rollback') await c.query(`DELETE FROM ${s}.runs WHERE run_id = $1`, [runId]);
            else await c.query(`UPDATE ${s}.runs SET status = 'interrupted', updated_at = now() WHERE run_id = $1`, [runId]);
            await c.query(`UPDATE ${s}.threads SET status = 'idle', updated_at = now() WHERE thread_id = $1 AND NOT
              EXISTS (SELECT 1 FROM ${s}.runs WHERE thread_id = $1 AND status IN ('pending','running'))`, [threadId]);
            await notify(c, { type: 'run_done', run_id: runId });
            return { ...run, status: action === 'rollback' ? run.status : ('interrupted' as const) };
          }
          if (run.status === 'running') {
            await c.query(`UPDATE ${s}.runs SET cancel_action = $2 WHERE run_id = $1`, [runId, action]);
            await notify(c, { type: 'cancel', run_id: runId, action });
            return { ...run, cancel_action: action };
          }
          return run;
        });
      },
      async cancelRequests(runIds: string[]) {
        const out = new Map<string, CancelAction>();
        if (!runIds.length) return out;
        const { rows } = await pool.query(`SELECT run_id, cancel_action FROM ${s}.runs WHERE run_id = ANY($1::uuid[])`,
          [runIds]);
        const found = new Set(rows.map((r) => r.run_id as string));
        for (const r of rows) if (r.cancel_action) out.set(r.run_id as string, r.cancel_action as CancelAction);
        for (const id of runIds) if (!found.has(id)) out.set(id, 'interrupt');
        return out;
      },
      async sweep(maxAttempts: number): Promise<SweepResult> {
        // The safety tick: the next claim queries again (e.g. a thread that was locked when we last looked).
        changed();
        const res: SweepResult = { requeued: [], failed: [] };
        const { rows: expired } = await pool.query(`SELECT run_id, thread_id FROM ${s}.runs WHERE status = 'running'
          AND lease_expires_at < now() ORDER BY seq LIMIT 100`);
        // One transaction per run, thread locked first like every other writer; the lease is re-checked under lock.
        for (const e of expired) {
          await tx(async (c) => {
            const { rows: locked } = await c.query(`SELECT 1 FROM ${s}.threads WHERE thread_id = $1 FOR UPDATE SKIP LOCKED`,
              [e.thread_id]);
            if (!locked[0]) return;
            const { rows } = await c.query(`SELECT * FROM ${s}.runs WHERE run_id = $1 AND status = 'running'
              AND lease_expires_at < now() FOR UPDATE`, [e.run_id]);
            if (!rows[0]) return;
            const r = toRun(rows[0]);
            if (r.cancel_action === 'rollback') {
              await rollbackCheckpoints(c, r.thread_id, r.run_id);
              await c.query(`DELETE FROM ${s}.runs WHERE run_id = $1`, [r.run_id]);
              await c.query(`UPDATE ${s}.threads SET status = $2, updated_at = now() WHERE thread_id = $1`,
                [r.thread_id, (await hasPending(c, r.thread_id)) ? 'busy' : 'idle']);
              await notify(c, { type: 'run_done', run_id: r.run_id });
              res.failed.push(r.run_id);
            } else if (r.cancel_action === 'interrupt' || r.attempt >= maxAttempts) {
              const outcome: RunOutcome = r.cancel_action
                ? { status: 'interrupted' }
                : { status: 'error', error: { error: 'WorkerLost', message: `Run abandoned after ${r.attempt} attempts: its worker stopped responding` } };
              await c.query(`UPDATE ${s}.runs SET status = $2, error = $3, worker_id = NULL, lease_expires_at = NULL,
                updated_at = now() WHERE run_id = $1`, [r.run_id, outcome.status, outcome.error ? JSON.stringify(outcome.error) : null]);
              await settleThread(c, r.thread_id, outcome);
              await notify(c, { type: 'run_done', run_id: r.run_id });
              res.failed.push(r.run_id);
            } else {
              await c.query(`UPDATE ${s}.runs SET status = 'pending', worker_id = NULL, lease_expires_at = NULL,
                updated_at = now() WHERE run_id = $1`, [r.run_id]);
              await notify(c, { type: 'wake' });
              res.requeued.push(r.run_id);
            }
          });
        }
        return res;
      },
    },

    subscribe(fn) {
      emitter.on('event', fn);
      return () => emitter.off('event', fn);
    },
    async close() {
      emitter.removeAllListeners();
      await listener.close();
      await pool.end();
    },
  };
  return storage;
}

async function migrate(pool: pg.Pool, s: string, saver: PostgresSaver): Promise<void> {
  const c = await pool.connect();
  try {
    await c.query('SELECT pg_advisory_lock($1)', [MIGRATION_LOCK]);
    try {
      await c.query(schemaSql(s));
      await saver.setup();
    } finally {
      await c.query('SELECT pg_advisory_unlock($1)', [MIGRATION_LOCK]);
    }
  } finally {
    c.release();
  }
}

/** A dedicated connection for LISTEN; reconnects when it drops so wake-ups keep arriving. */
async function startListener(opts: PostgresOptions, channel: string, onEvent: (e: StorageEvent) => void) {
  let client: pg.Client | null = null;
  let closed = false;
  let timer: NodeJS.Timeout | undefined;
  const connect = async (): Promise<void> => {
    const c = new pg.Client({ connectionString: opts.databaseUrl });
    c.on('notification', (msg) => {
      if (msg.channel !== channel || !msg.payload) return;
      try {
        onEvent(JSON.parse(msg.payload) as StorageEvent);
      } catch {
        /* not ours */
      }
    });
    c.on('error', (err) => {
      opts.logger?.warn({ err }, 'postgres LISTEN connection lost; reconnecting');
      c.end().catch(() => undefined);
      if (!closed) timer = setTimeout(() => void connect().catch(() => undefined), 1000);
    });
    await c.connect();
    await c.query(`LISTEN ${channel}`);
    client = c;
    // Missed events while disconnected: a wake makes the engine look at the queue again.
    onEvent({ type: 'wake' });
  };
  await connect();
  return {
    async close() {
      closed = true;
      clearTimeout(timer);
      await client?.end().catch(() => undefined);
    },
  };
}

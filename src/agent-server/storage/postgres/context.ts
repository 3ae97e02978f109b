// What the Postgres store's aggregates share: the pool, the schema, LISTEN/NOTIFY, the claim short-cut's
// change counter, transactions, row codecs and the helpers several aggregates use.
import { randomUUID } from 'node:crypto';
import type { EventEmitter } from 'node:events';
import pg from 'pg';
import { NotFoundError } from '../../../lib/errors.ts';
import type { Logger } from '../../../lib/logger.ts';
import { encryptedValuesFilter, isoNow, outcomeValuesText, THREAD_HEAD_COLUMNS } from '../common.ts';
import { fromJsonb, jsonCodec, type DataKeyring, type JsonCodec } from '../data-cipher.ts';
import { keepListening } from './listen.ts';
import type { Embedder, ItemsConfig } from '../items.ts';
import type { ThreadTtlConfig } from '../thread-ttl.ts';
import { threadErrorAfter, threadStatusAfter, threadStatusAfterRemoval, type CancelEffect } from '../run-rules.ts';
import type {
  Assistant,
  AssistantQuery,
  CancelAction,
  Json,
  RunOutcome,
  RunRecord,
  RunStatus,
  StorageEvent,
  StreamEventStore,
  Thread,
  ThreadQuery,
} from '../types.ts';

export type Row = Record<string, unknown>;
export type Q = Pick<pg.PoolClient, 'query'>;

export interface PostgresOptions {
  databaseUrl: string;
  /** Schema for our tables and the checkpoint tables. */
  schema?: string;
  poolSize?: number;
  logger?: Logger;
  /** langgraph.json "store" (TTL, semantic index) and its loaded embeddings. */
  items?: ItemsConfig;
  embedder?: Embedder;
  /** langgraph.json "checkpointer.ttl": default thread TTL and sweep interval. */
  threadTtl?: ThreadTtlConfig;
  /** How long a run's stream events stay readable after its newest one (default 10 minutes). */
  streamRetentionMs?: number;
  /** Stream events kept elsewhere (Redis, --redis-url) instead of the stream_events table; closed with the store. */
  streams?: StreamEventStore & { close(): Promise<void> };
  /** The keys agent data is encrypted with at rest (LANGGRAPH_AES_KEY); without them it is stored in clear. */
  keyring?: DataKeyring;
}

// Named (prepared) statements list their columns: a column added by a newer process's migration must not change
// the result type of a statement an older process has prepared ("cached plan must not change result type").
export const RUN_COLS = `run_id, thread_id, assistant_id, created_at, updated_at, metadata, status, kwargs, multitask_strategy,
  attempt, worker_id, cancel_action, error, cancel_reason`;
export const THREAD_COLS = `${THREAD_HEAD_COLUMNS.join(', ')}, "values"`;
export const ASSISTANT_COLS = `assistant_id, graph_id, config, context, metadata, name, description, version, created_at, updated_at`;

const ts = (v: unknown): string => (v instanceof Date ? isoNow(v.getTime()) : String(v));

export function toAssistant(r: Row): Assistant {
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

function toThread(r: Row, codec: JsonCodec): Thread {
  return {
    thread_id: r.thread_id as string,
    created_at: ts(r.created_at),
    updated_at: ts(r.updated_at),
    state_updated_at: ts(r.state_updated_at),
    metadata: r.metadata as Json,
    status: r.status as Thread['status'],
    config: r.config as Json,
    values: fromJsonb<Json | null>(codec, r.values) ?? null,
    interrupts: r.interrupts as Json,
    error: (r.error as Json | null) ?? null,
  };
}

function toRun(r: Row, codec: JsonCodec): RunRecord {
  return {
    run_id: r.run_id as string,
    thread_id: r.thread_id as string,
    assistant_id: r.assistant_id as string,
    created_at: ts(r.created_at),
    updated_at: ts(r.updated_at),
    metadata: r.metadata as Json,
    status: r.status as RunStatus,
    kwargs: fromJsonb<Json>(codec, r.kwargs),
    multitask_strategy: r.multitask_strategy as RunRecord['multitask_strategy'],
    attempt: r.attempt as number,
    worker_id: (r.worker_id as string | null) ?? null,
    cancel_action: (r.cancel_action as CancelAction | null) ?? null,
    cancel_reason: (r.cancel_reason as string | null | undefined) ?? null,
    error: (r.error as Json | null) ?? null,
  };
}

/**
 * Claim short-cut. The engine claims on every wake-up and after every launch and finish, and most of those
 * claims find nothing. After a claim saw nothing (more) to take, further claims answer null without a query
 * until something may have changed: any event heard (wake, run_done: from this process or, through NOTIFY,
 * any other), a write of this store that can free a run, a sweep (the engine's safety tick, which also covers
 * a thread that was locked when we looked), or the moment the earliest delayed run becomes due. `changes`
 * counts those; a claim records it before its query, so an event arriving meanwhile is never lost.
 * Writes of this store count after they commit; their own NOTIFY echoes (tagged with `origin`) then add
 * nothing, and neither do cancels or a run_done that frees no queued run (more: false).
 */
export interface ClaimGate {
  changes: number;
  quietAt: number;
  dueAt: number;
}

export type PgContext = ReturnType<typeof sharedHelpers> & { listener: { close(): Promise<void> } };

export async function openContext(
  opts: PostgresOptions,
  pool: pg.Pool,
  s: string,
  emitter: EventEmitter,
): Promise<PgContext> {
  // One channel per schema, so stores sharing a database do not hear each other.
  const channel = `${s}_events`;
  const gate: ClaimGate = { changes: 0, quietAt: -1, dueAt: Infinity };
  const origin = randomUUID();
  const helpers = sharedHelpers(pool, s, channel, origin, gate, emitter, jsonCodec(opts.keyring));
  const listener = await startListener(opts, channel, (tagged) => {
    const { o, more, ...e } = tagged as StorageEvent & { o?: string; more?: boolean };
    if (o !== origin && e.type !== 'cancel' && !(e.type === 'run_done' && more === false)) helpers.changed();
    emitter.emit('event', e as StorageEvent);
  });
  return { ...helpers, listener };
}

/**
 * A thread's values (JSON text, null, or undefined for unchanged) as the jsonb parameter to store: sealed, a JSON
 * string holding the sealed text.
 */
export function valuesParam(codec: JsonCodec, text: string | null | undefined): string | null | undefined {
  if (text === undefined || text === null || !codec.keyring) return text;
  return JSON.stringify(codec.write(text, true));
}

function sharedHelpers(
  pool: pg.Pool,
  s: string,
  channel: string,
  origin: string,
  gate: ClaimGate,
  emitter: EventEmitter,
  codec: JsonCodec,
) {
  const changed = () => void gate.changes++;
  const afterWrite = async <T>(p: Promise<T>): Promise<T> => {
    try {
      return await p;
    } finally {
      changed();
    }
  };
  const local = (e: StorageEvent) => {
    changed();
    queueMicrotask(() => emitter.emit('event', e));
  };

  /** A transaction; its commit may free or queue runs, so the claim short-cut looks again afterwards. */
  async function tx<T>(fn: (c: pg.PoolClient) => Promise<T>): Promise<T> {
    const c = await pool.connect();
    let out: T;
    let done: StorageEvent[] | undefined;
    try {
      await c.query('BEGIN');
      out = await fn(c);
      await c.query('COMMIT');
      done = doneInTx.get(c);
    } catch (err) {
      await c.query('ROLLBACK').catch(() => undefined);
      throw err;
    } finally {
      doneInTx.delete(c);
      c.release();
      changed();
    }
    // Committed: this process hears its own run_done events now (see notify).
    for (const e of done ?? []) emitter.emit('event', e);
    return out;
  }

  /** A named statement: each pooled connection parses and plans it once (hot paths only; fixed text). */
  const named = (name: string, text: string, values: unknown[]): pg.QueryConfig => ({
    name: `ap_${name}_${s}`,
    text,
    values,
  });
  /**
   * Tells every process (NOTIFY, sent when the transaction commits). A run_done is also emitted here once `c`'s
   * transaction commits (tx), before the request that wrote it is answered: this process must not take a run it
   * deleted or ended for existing until its own NOTIFY comes back (the engine's queuedHere). The echo repeats it; at
   * most a join that began waiting on the run in between reads the run once more.
   */
  const notify = async (c: Q, e: StorageEvent): Promise<void> => {
    await c.query('SELECT pg_notify($1, $2)', [channel, JSON.stringify({ ...e, o: origin })]);
    if (e.type !== 'run_done') return;
    if (c === pool) emitter.emit('event', e);
    else doneInTx.set(c, [...(doneInTx.get(c) ?? []), e]);
  };
  /** run_done events of open transactions, by connection: emitted once they commit. */
  const doneInTx = new WeakMap<object, StorageEvent[]>();

  async function requireThread(c: Q, id: string, lock = false): Promise<Row> {
    const { rows } = await c.query(`SELECT * FROM ${s}.threads WHERE thread_id = $1${lock ? ' FOR UPDATE' : ''}`, [id]);
    if (!rows[0]) throw new NotFoundError(`Thread with ID ${id} not found`);
    return rows[0] as Row;
  }

  /** Every transaction that touches a run and its thread locks the thread first (same order as claim). */
  async function lockThreadOfRun(c: Q, runId: string): Promise<void> {
    await c.query(
      `SELECT 1 FROM ${s}.threads WHERE thread_id = (SELECT thread_id FROM ${s}.runs WHERE run_id = $1)
      FOR UPDATE`,
      [runId],
    );
  }

  async function hasPending(c: Q, threadId: string): Promise<boolean> {
    const { rows } = await c.query(`SELECT 1 FROM ${s}.runs WHERE thread_id = $1 AND status = 'pending' LIMIT 1`, [
      threadId,
    ]);
    return rows.length > 0;
  }

  async function settleThread(c: Q, threadId: string, outcome: RunOutcome): Promise<void> {
    const status = threadStatusAfter(outcome, await hasPending(c, threadId));
    const threadError = threadErrorAfter(outcome);
    const error = threadError === null ? null : JSON.stringify(threadError);
    const values = valuesParam(codec, outcomeValuesText(outcome));
    if (values !== undefined) {
      await c.query(
        `UPDATE ${s}.threads SET status = $2, "values" = $3, state_updated_at = now(), updated_at = now(),
        interrupts = $4, error = $5 WHERE thread_id = $1`,
        [threadId, status, values, JSON.stringify(outcome.interrupts ?? {}), error],
      );
    } else {
      await c.query(
        `UPDATE ${s}.threads SET status = $2, updated_at = now(), interrupts = $3, error = $4
        WHERE thread_id = $1`,
        [threadId, status, JSON.stringify(outcome.interrupts ?? {}), error],
      );
    }
  }

  /** Applies one cancel decision inside the caller's transaction (thread locked) and tells every process. */
  async function applyCancel(c: Q, e: CancelEffect): Promise<void> {
    if (e.effect === 'delete') await c.query(`DELETE FROM ${s}.runs WHERE run_id = $1`, [e.run_id]);
    else if (e.effect === 'interrupt') {
      await c.query(`UPDATE ${s}.runs SET status = 'interrupted', updated_at = now() WHERE run_id = $1`, [e.run_id]);
    } else if (e.effect === 'flag') {
      await c.query(`UPDATE ${s}.runs SET cancel_action = $2 WHERE run_id = $1`, [e.run_id, e.action]);
    }
    if (e.effect === 'flag') await notify(c, { type: 'cancel', run_id: e.run_id, action: e.action });
    else if (e.effect !== 'none') await notify(c, { type: 'run_done', run_id: e.run_id });
  }

  /** A pending run left the queue: the thread goes idle once nothing else is in flight. */
  async function afterDequeue(c: Q, threadId: string): Promise<void> {
    await c.query(
      `UPDATE ${s}.threads SET status = 'idle', updated_at = now() WHERE thread_id = $1 AND NOT
      EXISTS (SELECT 1 FROM ${s}.runs WHERE thread_id = $1 AND status IN ('pending','running'))`,
      [threadId],
    );
  }

  /** Deletes a cancelled run and its checkpoints; the thread is busy while more runs wait. */
  async function removeRolledBack(c: Q, threadId: string, runId: string): Promise<void> {
    await rollbackCheckpoints(c, threadId, runId);
    await c.query(`DELETE FROM ${s}.runs WHERE run_id = $1`, [runId]);
    await c.query(`UPDATE ${s}.threads SET status = $2, updated_at = now() WHERE thread_id = $1`, [
      threadId,
      threadStatusAfterRemoval(await hasPending(c, threadId)),
    ]);
  }

  async function rollbackCheckpoints(c: Q, threadId: string, runId: string): Promise<void> {
    const { rows } = await c.query(
      `SELECT checkpoint_id FROM ${s}.checkpoints WHERE thread_id = $1
      AND checkpoint_ns = '' AND metadata->>'run_id' = $2 ORDER BY checkpoint_id LIMIT 1`,
      [threadId, runId],
    );
    const first = rows[0]?.checkpoint_id as string | undefined;
    if (!first) return;
    await c.query(`DELETE FROM ${s}.checkpoint_writes WHERE thread_id = $1 AND checkpoint_id >= $2`, [threadId, first]);
    await c.query(`DELETE FROM ${s}.checkpoints WHERE thread_id = $1 AND checkpoint_id >= $2`, [threadId, first]);
  }

  function where(
    kind: 'a' | 't',
    q: Omit<AssistantQuery, 'sort_by'> & Omit<ThreadQuery, 'sort_by'>,
    params: unknown[],
  ): string {
    const clauses: string[] = [];
    const p = (v: unknown) => (params.push(v), `$${params.length}`);
    if (kind === 'a') {
      if (q.graph_id) clauses.push(`graph_id = ${p(q.graph_id)}`);
      if (q.name) clauses.push(`name ILIKE ${p(`%${q.name}%`)}`);
    } else {
      if (q.ids?.length) clauses.push(`thread_id = ANY(${p(q.ids)}::uuid[])`);
      if (q.status) clauses.push(`status = ${p(q.status)}`);
      if (q.values && Object.keys(q.values).length) {
        if (codec.keyring) throw encryptedValuesFilter();
        clauses.push(`"values" @> ${p(JSON.stringify(q.values))}::jsonb`);
      }
    }
    if (q.metadata && Object.keys(q.metadata).length)
      clauses.push(`metadata @> ${p(JSON.stringify(q.metadata))}::jsonb`);
    return clauses.length ? `WHERE ${clauses.join(' AND ')}` : '';
  }

  function orderBy(q: { sort_by?: string; sort_order?: string }, allowed: Set<string>): string {
    const by = q.sort_by && allowed.has(q.sort_by) ? q.sort_by : 'created_at';
    return `ORDER BY ${by} ${q.sort_order === 'asc' ? 'ASC' : 'DESC'}`;
  }

  return {
    pool,
    s,
    codec,
    toThread: (r: Row) => toThread(r, codec),
    toRun: (r: Row) => toRun(r, codec),
    channel,
    origin,
    gate,
    changed,
    afterWrite,
    local,
    tx,
    named,
    notify,
    requireThread,
    lockThreadOfRun,
    hasPending,
    settleThread,
    applyCancel,
    afterDequeue,
    removeRolledBack,
    rollbackCheckpoints,
    where,
    orderBy,
  };
}

/** LISTEN on the store's channel; missed events while disconnected: a wake makes the engine look at the queue again. */
function startListener(opts: PostgresOptions, channel: string, onEvent: (e: StorageEvent) => void) {
  return keepListening({
    databaseUrl: opts.databaseUrl,
    channel,
    ...(opts.logger ? { logger: opts.logger } : {}),
    what: 'events',
    onNotification(msg) {
      if (msg.channel !== channel || !msg.payload) return;
      try {
        onEvent(JSON.parse(msg.payload) as StorageEvent);
      } catch {
        /* not ours */
      }
    },
    onConnected: () => onEvent({ type: 'wake' }),
  });
}

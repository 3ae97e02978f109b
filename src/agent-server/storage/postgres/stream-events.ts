// Stream events of the Postgres store: one table for every run's events, ids from one sequence. The executing
// process writes the events queued in the last few milliseconds in one statement (one write in flight at a time,
// so ids become visible in order) that also NOTIFYs the runs it touched; every process LISTENs and wakes its readers.
// The table is UNLOGGED: events live minutes (retention), and skipping the WAL is what keeps a token stream
// cheap; a Postgres crash loses the streams of runs in flight, never a run or its checkpoints.
// Readers of a run share one in-memory tail per process (see Tail), so 200 clients of one run cost one query
// per wake-up, not 200.
import type pg from 'pg';
import { keepListening } from './listen.ts';
import type { Logger } from '../../../lib/logger.ts';
import { BatchWriter } from '../batch-writer.ts';
import { textArray } from './binary-array.ts';
import type { StoredStreamEvent, StreamEventStore } from '../types.ts';

export interface PostgresStreamOptions {
  databaseUrl: string;
  retentionMs: number;
  logger?: Logger;
}

/** Events (and bytes of data) kept in memory per run, the newest; a reader further behind reads the table. */
const TAIL_MAX = 20_000;
const TAIL_MAX_BYTES = 8 * 1024 * 1024;
/** Rows per query when a tail catches up with the table. */
const FETCH_ROWS = 1_000;
/** A tail nobody read or wrote for this long is dropped. */
const TAIL_IDLE_MS = 30_000;
/** INSERTs start at least this far apart (each statement costs both processes CPU; see BatchWriter). */
const STATEMENT_SPACING_MS = 5;
/** Events per INSERT at most (a 30 000-event burst of 2 KB each is 60 MB: written in bounded pieces). */
const MAX_EVENTS_PER_STATEMENT = 1_000;
/** A NOTIFY payload names at most this many runs (its limit is 8000 bytes); more wake every reader. */
const NOTIFY_MAX_RUNS = 60;

/**
 * The newest events of one run as this process knows them: every event of the run with floor < id <= known is
 * in `events`. Fed by this process's own writes, and by one shared query when a NOTIFY says there is more.
 */
interface Tail {
  events: StoredStreamEvent[];
  bytes: number;
  floor: number;
  known: number;
  /** Another process wrote events after `known` (or may have): the next read fetches them. */
  stale: boolean;
  fetching: Promise<void> | null;
  usedAt: number;
}

type Pending = [runId: string, threadId: string, event: string, data: string];

export async function postgresStreamEvents(
  pool: pg.Pool,
  s: string,
  opts: PostgresStreamOptions,
): Promise<StreamEventStore & { close(): Promise<void> }> {
  const channel = `${s}_stream`;
  const origin = Math.random().toString(36).slice(2, 10);
  const tails = new Map<string, Tail>();
  const watchers = new Map<string, Set<() => void>>();

  const wake = (key: string) => {
    for (const fn of watchers.get(key) ?? []) fn();
  };
  const wakeAll = () => {
    for (const t of tails.values()) t.stale = true;
    for (const set of watchers.values()) for (const fn of set) fn();
  };

  // --- writing: see BatchWriter (one statement per batch, one in flight) ---
  const insert = {
    name: `ap_stream_insert_${s}`,
    text: `WITH ins AS (INSERT INTO ${s}.stream_events (run_id, thread_id, event, data)
        SELECT r, t, e, d FROM unnest($1::uuid[], $2::uuid[], $3::text[], $4::text[]) WITH ORDINALITY AS x(r, t, e, d, o)
        ORDER BY o RETURNING id, run_id, thread_id),
      runs AS (SELECT DISTINCT run_id, thread_id FROM ins),
      n AS (SELECT pg_notify($5, $6 || CASE WHEN count(*) > ${NOTIFY_MAX_RUNS} THEN '*'
          ELSE string_agg(run_id::text || ':' || thread_id::text, ',') END) FROM runs)
      SELECT id, (SELECT count(*) FROM n) AS _n FROM ins ORDER BY id`,
  };

  const writer = new BatchWriter<Pending>({
    spacingMs: STATEMENT_SPACING_MS,
    maxBatch: MAX_EVENTS_PER_STATEMENT,
    write: async (batch) => feedTails(batch, await writeBatch(batch)),
    onLost: (err, events) => opts.logger?.error({ err, events }, 'writing stream events failed; those events are lost'),
  });

  async function writeBatch(batch: Pending[]): Promise<number[]> {
    const cols: [string[], string[], string[], string[]] = [[], [], [], []];
    for (const p of batch) for (let i = 0; i < 4; i++) cols[i]!.push(p[i]!);
    // A failed write is retried once (a dropped connection); a second failure loses the batch.
    for (let attempt = 1; ; attempt++) {
      try {
        // The event names and their data go as binary arrays (binary-array.ts): the data is most of the bytes.
        const values = [cols[0], cols[1], textArray(cols[2]), textArray(cols[3]), channel, `${origin}|`];
        const { rows } = await pool.query({ ...insert, values });
        return rows.map((r) => Number(r.id));
      } catch (err) {
        if (attempt >= 2) throw err;
      }
    }
  }

  /** Our own writes extend the tails of their runs (and start one per run, for readers here). */
  function feedTails(batch: Pending[], ids: number[]): void {
    const woken = new Set<string>();
    const now = Date.now();
    for (let i = 0; i < batch.length; i++) {
      const [runId, threadId, event, data] = batch[i]!;
      const id = ids[i]!;
      let t = tails.get(runId);
      if (!t) tails.set(runId, (t = newTail(id - 1, false)));
      if (!t.stale && t.known < id) {
        t.events.push({ id, run_id: runId, event, data });
        t.bytes += data.length;
        t.known = id;
        trim(t);
      } else t.stale = true;
      t.usedAt = now;
      woken.add(runId);
      woken.add(`t:${threadId}`);
    }
    for (const k of woken) wake(k);
  }

  function newTail(floor: number, stale: boolean): Tail {
    return { events: [], bytes: 0, floor, known: floor, stale, fetching: null, usedAt: Date.now() };
  }

  /** Over a bound: the older half goes (readers behind it read the table). */
  function trim(t: Tail): void {
    if (t.events.length <= TAIL_MAX && t.bytes <= TAIL_MAX_BYTES) return;
    let drop = 0;
    let freed = 0;
    while (drop < t.events.length - 1 && (drop < t.events.length / 2 || freed < t.bytes / 2))
      freed += t.events[drop++]!.data.length;
    t.floor = t.events[drop - 1]!.id;
    t.events.splice(0, drop);
    t.bytes -= freed;
  }

  // --- reading ---
  const byRun = {
    name: `ap_stream_by_run_${s}`,
    text: `SELECT id, run_id, event, data FROM ${s}.stream_events WHERE run_id = $1 AND id > $2 ORDER BY id LIMIT $3`,
  };
  const toEvent = (r: Record<string, unknown>): StoredStreamEvent => ({
    id: Number(r.id),
    run_id: r.run_id as string,
    event: r.event as string,
    data: r.data as string,
  });
  const query = async (q: { name: string; text: string }, key: string, afterId: number, limit: number) =>
    (await pool.query({ ...q, values: [key, afterId, limit] })).rows.map(toEvent);

  /**
   * Moves a tail ahead by one query (one page: a reader far behind the writer pages through, and the tail keeps
   * what readers still need), shared by every reader that asks meanwhile.
   */
  function refresh(runId: string, t: Tail): Promise<void> {
    t.fetching ??= (async () => {
      try {
        t.stale = false;
        const rows = await query(byRun, runId, t.known, FETCH_ROWS);
        for (const e of rows)
          if (e.id > t.known) {
            t.events.push(e);
            t.bytes += e.data.length;
            t.known = e.id;
          }
        trim(t);
        // A full page: there is more to fetch.
        if (rows.length === FETCH_ROWS) t.stale = true;
      } finally {
        t.fetching = null;
      }
    })();
    return t.fetching;
  }

  async function read(runId: string, afterId: number, limit: number, fresh = false): Promise<StoredStreamEvent[]> {
    let t = tails.get(runId);
    // The first reader of a run here starts its tail at its cursor; readers arriving meanwhile share the fetch.
    if (!t) tails.set(runId, (t = newTail(afterId, true)));
    if (afterId < t.floor) return query(byRun, runId, afterId, limit);
    t.usedAt = Date.now();
    if (fresh) t.stale = true;
    // Served from the tail; the table is asked only when the tail may lack what this reader needs next.
    for (;;) {
      while (t.fetching) await t.fetching;
      if (afterId < t.floor) return query(byRun, runId, afterId, limit);
      const out = fromTail(t, afterId, limit);
      if (out.length === limit || !t.stale) return out;
      await refresh(runId, t);
      if (!t.stale) return fromTail(t, afterId, limit);
    }
  }

  function fromTail(t: Tail, afterId: number, limit: number): StoredStreamEvent[] {
    const out: StoredStreamEvent[] = [];
    // Binary search for the first event after afterId.
    let lo = 0;
    let hi = t.events.length;
    while (lo < hi) {
      const mid = (lo + hi) >> 1;
      if (t.events[mid]!.id <= afterId) lo = mid + 1;
      else hi = mid;
    }
    for (let i = lo; i < t.events.length && out.length < limit; i++) out.push(t.events[i]!);
    return out;
  }

  // --- LISTEN: other processes' writes wake our readers; after a reconnect every reader looks again ---
  const listener = await keepListening({
    databaseUrl: opts.databaseUrl,
    channel,
    ...(opts.logger ? { logger: opts.logger } : {}),
    what: 'stream events',
    onNotification(msg) {
      if (msg.channel !== channel || !msg.payload) return;
      const bar = msg.payload.indexOf('|');
      if (msg.payload.slice(0, bar) === origin) return;
      const body = msg.payload.slice(bar + 1);
      if (body === '*') return wakeAll();
      for (const pair of body.split(',')) {
        const [runId, threadId] = pair.split(':');
        const t = tails.get(runId!);
        if (t) t.stale = true;
        wake(runId!);
        wake(`t:${threadId}`);
      }
    },
    onConnected: () => wakeAll(),
  });

  const sweepTails = setInterval(() => {
    const old = Date.now() - TAIL_IDLE_MS;
    for (const [id, t] of tails) if (t.usedAt < old && !watchers.has(id) && !t.fetching) tails.delete(id);
  }, TAIL_IDLE_MS / 2).unref();

  const store: StreamEventStore & { close(): Promise<void> } = {
    append(runId, threadId, event, data) {
      writer.push([runId, threadId, event, data]);
    },
    flush: () => writer.flush(),
    read,
    async readThread(threadId, afterId, limit) {
      return (
        await pool.query({
          name: `ap_stream_by_thread_${s}`,
          text: `SELECT id, run_id, event, data FROM ${s}.stream_events WHERE thread_id = $1 AND id > $2 ORDER BY id LIMIT $3`,
          values: [threadId, afterId, limit],
        })
      ).rows.map(toEvent);
    },
    async lastId() {
      const { rows } = await pool.query(`SELECT CASE WHEN is_called THEN last_value ELSE 0 END AS id
        FROM ${s}.stream_events_id_seq`);
      return Number(rows[0]?.id ?? 0);
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
      // A run's events go together, once its newest is older than the retention (a long run keeps its start).
      const { rowCount } = await pool.query(
        `DELETE FROM ${s}.stream_events WHERE run_id IN (
          SELECT run_id FROM ${s}.stream_events GROUP BY run_id HAVING max(created_at) < now() - make_interval(secs => $1))`,
        [opts.retentionMs / 1000],
      );
      return rowCount ?? 0;
    },
    async close() {
      clearInterval(sweepTails);
      await store.flush().catch(() => undefined);
      await listener.close();
    },
  };
  return store;
}

// Crons of the embedded store. One process owns the file, so a tick is claimed and its run created inside one
// IMMEDIATE transaction and nobody else can fire it. Tick times are kept as epoch milliseconds (next_ms) for
// comparison and shown as ISO strings.
import { ConflictError, NotFoundError } from '../../../lib/errors.ts';
import { isoNow } from '../common.ts';
import type {
  CronPatch,
  CronQuery,
  CronRecord,
  CronStore,
  CronTick,
  CronTickResult,
  NewCron,
  NewRun,
  RunRecord,
  StorageEvent,
} from '../types.ts';
import type { JsonCodec } from '../data-cipher.ts';
import { j, jsonFilter, pj, pjn, type EmbeddedContext, type Row } from './context.ts';

const SORT = new Set(['cron_id', 'assistant_id', 'thread_id', 'created_at', 'updated_at', 'next_run_date']);

const msOf = (iso: string | null | undefined): number | null => (iso ? Date.parse(iso) : null);

function toCron(r: Row, codec: JsonCodec): CronRecord {
  return {
    cron_id: r.cron_id as string,
    assistant_id: r.assistant_id as string,
    thread_id: (r.thread_id as string | null) ?? null,
    on_run_completed: (r.on_run_completed as CronRecord['on_run_completed']) ?? null,
    end_time: (r.end_time as string | null) ?? null,
    schedule: r.schedule as string,
    timezone: (r.timezone as string | null) ?? null,
    created_at: r.created_at as string,
    updated_at: r.updated_at as string,
    payload: codec.read(r.payload as string),
    user_id: (r.user_id as string | null) ?? null,
    next_run_date: r.next_ms === null || r.next_ms === undefined ? null : isoNow(Number(r.next_ms)),
    metadata: pj(r.metadata),
    owner_metadata: pj(r.owner_metadata),
    owner_auth: pjn(r.owner_auth),
    enabled: r.enabled === 1,
  };
}

export function embeddedCrons(
  ctx: EmbeddedContext,
  runs: { createIn(run: NewRun, events: StorageEvent[]): RunRecord },
): CronStore {
  const { sql, inTx, emit, now, codec } = ctx;

  function get(id: string): CronRecord | null {
    const row = sql('SELECT * FROM ap_crons WHERE cron_id = ?').get(id) as Row | undefined;
    return row ? toCron(row, codec) : null;
  }

  function where(q: CronQuery, params: unknown[]): string {
    const clauses: string[] = [];
    const add = (clause: string, value: unknown) => {
      clauses.push(clause);
      params.push(value);
    };
    if (q.assistant_id) add('assistant_id = ?', q.assistant_id);
    if (q.thread_id) add('thread_id = ?', q.thread_id);
    if (q.enabled !== undefined) add('enabled = ?', q.enabled ? 1 : 0);
    clauses.push(...jsonFilter('metadata', q.metadata, params));
    return clauses.length ? `WHERE ${clauses.join(' AND ')}` : '';
  }

  return {
    async create(c: NewCron) {
      return inTx(() => {
        if (get(c.cron_id)) throw new ConflictError(`Cron ${c.cron_id} already exists`);
        const ts = now();
        sql(`INSERT INTO ap_crons (cron_id, assistant_id, thread_id, on_run_completed, end_time, schedule, timezone,
          created_at, updated_at, payload, user_id, next_ms, metadata, owner_metadata, owner_auth, enabled)
          VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)`).run(
          c.cron_id,
          c.assistant_id,
          c.thread_id,
          c.on_run_completed,
          c.end_time,
          c.schedule,
          c.timezone,
          ts,
          ts,
          codec.write(c.payload ?? {}),
          c.user_id,
          msOf(c.next_run_date),
          j(c.metadata),
          j(c.owner_metadata),
          c.owner_auth === null ? null : j(c.owner_auth),
          c.enabled ? 1 : 0,
        );
        return get(c.cron_id)!;
      });
    },
    async get(id) {
      return get(id);
    },
    async patch(id: string, p: CronPatch) {
      return inTx(() => {
        const cur = get(id);
        if (!cur) throw new NotFoundError(`Cron ${id} not found`);
        const next = { ...cur, ...p };
        sql(`UPDATE ap_crons SET schedule = ?, timezone = ?, end_time = ?, payload = ?, metadata = ?, enabled = ?,
          on_run_completed = ?, next_ms = ?, updated_at = ? WHERE cron_id = ?`).run(
          next.schedule,
          next.timezone,
          next.end_time,
          codec.write(next.payload ?? {}),
          j(next.metadata),
          next.enabled ? 1 : 0,
          next.on_run_completed,
          msOf(next.next_run_date),
          now(),
          id,
        );
        return get(id)!;
      });
    },
    async delete(id: string) {
      const { changes } = sql('DELETE FROM ap_crons WHERE cron_id = ?').run(id);
      if (!changes) throw new NotFoundError(`Cron ${id} not found`);
    },
    async search(q: CronQuery) {
      const params: unknown[] = [];
      const w = where(q, params);
      const by =
        q.sort_by && SORT.has(q.sort_by) ? (q.sort_by === 'next_run_date' ? 'next_ms' : q.sort_by) : 'created_at';
      const order = `ORDER BY ${by} ${q.sort_order === 'asc' ? 'ASC' : 'DESC'}, cron_id`;
      const rows = sql(`SELECT * FROM ap_crons ${w} ${order} LIMIT ? OFFSET ?`).all(
        ...params,
        q.limit ?? 10,
        q.offset ?? 0,
      ) as Row[];
      return rows.map((r) => toCron(r, codec));
    },
    async count(q: CronQuery) {
      const params: unknown[] = [];
      const row = sql(`SELECT count(*) AS n FROM ap_crons ${where(q, params)}`).get(...params) as Row;
      return Number(row.n);
    },
    async due(limit: number) {
      const rows = sql('SELECT * FROM ap_crons WHERE enabled = 1 AND next_ms <= ? ORDER BY next_ms LIMIT ?').all(
        Date.now(),
        limit,
      ) as Row[];
      return rows.map((r) => toCron(r, codec));
    },
    async fire(tick: CronTick): Promise<CronTickResult> {
      const events: StorageEvent[] = [];
      const result = inTx((): CronTickResult => {
        const claimed = sql(`UPDATE ap_crons SET next_ms = ?, updated_at = ? WHERE cron_id = ? AND enabled = 1
          AND next_ms = ?`).run(msOf(tick.next), now(), tick.cron_id, msOf(tick.due));
        if (!claimed.changes) return { kind: 'taken' };
        // A refused run (busy thread under reject, thread gone) skips this tick; the claim stays.
        if (!tick.run) return { kind: 'skipped', reason: tick.reason ?? 'no run' };
        const savepoint = 'ap_cron_run';
        sql(`SAVEPOINT ${savepoint}`).run();
        try {
          const run = runs.createIn(tick.run!, events);
          sql(`RELEASE ${savepoint}`).run();
          return { kind: 'fired', run };
        } catch (err) {
          sql(`ROLLBACK TO ${savepoint}`).run();
          sql(`RELEASE ${savepoint}`).run();
          events.length = 0;
          if (err instanceof ConflictError || err instanceof NotFoundError)
            return { kind: 'skipped', reason: err.message };
          throw err;
        }
      });
      for (const e of events) emit(e);
      if (result.kind === 'fired') emit({ type: 'wake' });
      return result;
    },
  };
}

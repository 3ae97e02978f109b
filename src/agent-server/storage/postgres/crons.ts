// Crons of the Postgres store. Every replica polls for due ticks; firing one is a transaction that locks the cron
// row (SKIP LOCKED: another replica is firing it), checks the tick is still the one read, moves next_run_date on
// and creates the run, so a tick is claimed exactly once and never without its run.
import { ConflictError, NotFoundError } from '../../../lib/errors.ts';
import { fromJsonb, jsonbParam, type JsonCodec } from '../data-cipher.ts';
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
} from '../types.ts';
import type { PgContext, Q, Row } from './context.ts';

const COLS = `cron_id, assistant_id, thread_id, on_run_completed, end_time, schedule, timezone, created_at, updated_at,
  payload, user_id, next_run_date, metadata, owner_metadata, owner_auth, enabled`;
const SORT = new Set(['cron_id', 'assistant_id', 'thread_id', 'created_at', 'updated_at', 'next_run_date']);

const ts = (v: unknown): string | null =>
  v === null || v === undefined ? null : v instanceof Date ? isoNow(v.getTime()) : String(v);

function toCron(r: Row, codec: JsonCodec): CronRecord {
  return {
    cron_id: r.cron_id as string,
    assistant_id: r.assistant_id as string,
    thread_id: (r.thread_id as string | null) ?? null,
    on_run_completed: (r.on_run_completed as CronRecord['on_run_completed']) ?? null,
    end_time: ts(r.end_time),
    schedule: r.schedule as string,
    timezone: (r.timezone as string | null) ?? null,
    created_at: ts(r.created_at)!,
    updated_at: ts(r.updated_at)!,
    payload: fromJsonb<CronRecord['payload']>(codec, r.payload),
    user_id: (r.user_id as string | null) ?? null,
    next_run_date: ts(r.next_run_date),
    metadata: r.metadata as CronRecord['metadata'],
    owner_metadata: r.owner_metadata as CronRecord['owner_metadata'],
    owner_auth: (r.owner_auth as CronRecord['owner_auth']) ?? null,
    enabled: r.enabled as boolean,
  };
}

export function postgresCrons(ctx: PgContext, runs: { createIn(c: Q, run: NewRun): Promise<RunRecord> }): CronStore {
  const { pool, s, tx, local, codec } = ctx;

  function where(q: CronQuery, params: unknown[]): string {
    const clauses: string[] = [];
    const p = (v: unknown) => (params.push(v), `$${params.length}`);
    if (q.assistant_id) clauses.push(`assistant_id = ${p(q.assistant_id)}::uuid`);
    if (q.thread_id) clauses.push(`thread_id = ${p(q.thread_id)}::uuid`);
    if (q.enabled !== undefined) clauses.push(`enabled = ${p(q.enabled)}`);
    if (q.metadata && Object.keys(q.metadata).length)
      clauses.push(`metadata @> ${p(JSON.stringify(q.metadata))}::jsonb`);
    return clauses.length ? `WHERE ${clauses.join(' AND ')}` : '';
  }

  async function get(c: Q, id: string, lock = false): Promise<CronRecord | null> {
    const { rows } = await c.query(`SELECT ${COLS} FROM ${s}.crons WHERE cron_id = $1${lock ? ' FOR UPDATE' : ''}`, [
      id,
    ]);
    return rows[0] ? toCron(rows[0] as Row, codec) : null;
  }

  return {
    async create(c: NewCron) {
      const { rows } = await pool.query(
        `INSERT INTO ${s}.crons (cron_id, assistant_id, thread_id, on_run_completed,
          end_time, schedule, timezone, payload, user_id, next_run_date, metadata, owner_metadata, owner_auth, enabled)
        VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, $13, $14) ON CONFLICT (cron_id) DO NOTHING RETURNING ${COLS}`,
        [
          c.cron_id,
          c.assistant_id,
          c.thread_id,
          c.on_run_completed,
          c.end_time,
          c.schedule,
          c.timezone,
          jsonbParam(codec, c.payload ?? {}),
          c.user_id,
          c.next_run_date,
          JSON.stringify(c.metadata),
          JSON.stringify(c.owner_metadata),
          c.owner_auth === null ? null : JSON.stringify(c.owner_auth),
          c.enabled,
        ],
      );
      if (!rows[0]) throw new ConflictError(`Cron ${c.cron_id} already exists`);
      return toCron(rows[0] as Row, codec);
    },
    get: (id) => get(pool, id),
    async patch(id: string, p: CronPatch) {
      return tx(async (c) => {
        const cur = await get(c, id, true);
        if (!cur) throw new NotFoundError(`Cron ${id} not found`);
        const n = { ...cur, ...p };
        const { rows } = await c.query(
          `UPDATE ${s}.crons SET schedule = $2, timezone = $3, end_time = $4, payload = $5,
            metadata = $6, enabled = $7, on_run_completed = $8, next_run_date = $9, updated_at = now()
          WHERE cron_id = $1 RETURNING ${COLS}`,
          [
            id,
            n.schedule,
            n.timezone,
            n.end_time,
            jsonbParam(codec, n.payload ?? {}),
            JSON.stringify(n.metadata),
            n.enabled,
            n.on_run_completed,
            n.next_run_date,
          ],
        );
        return toCron(rows[0] as Row, codec);
      });
    },
    async delete(id: string) {
      const { rowCount } = await pool.query(`DELETE FROM ${s}.crons WHERE cron_id = $1`, [id]);
      if (!rowCount) throw new NotFoundError(`Cron ${id} not found`);
    },
    async search(q: CronQuery) {
      const params: unknown[] = [];
      const w = where(q, params);
      const by = q.sort_by && SORT.has(q.sort_by) ? q.sort_by : 'created_at';
      params.push(q.limit ?? 10, q.offset ?? 0);
      const { rows } = await pool.query(
        `SELECT ${COLS} FROM ${s}.crons ${w}
        ORDER BY ${by} ${q.sort_order === 'asc' ? 'ASC' : 'DESC'} NULLS LAST, cron_id
        LIMIT $${params.length - 1} OFFSET $${params.length}`,
        params,
      );
      return rows.map((r) => toCron(r as Row, codec));
    },
    async count(q: CronQuery) {
      const params: unknown[] = [];
      const { rows } = await pool.query(`SELECT count(*)::int AS n FROM ${s}.crons ${where(q, params)}`, params);
      return rows[0].n as number;
    },
    async due(limit: number) {
      const { rows } = await pool.query(
        `SELECT ${COLS} FROM ${s}.crons WHERE enabled AND next_run_date <= now()
        ORDER BY next_run_date LIMIT $1`,
        [limit],
      );
      return rows.map((r) => toCron(r as Row, codec));
    },
    async fire(tick: CronTick): Promise<CronTickResult> {
      const result = await tx(async (c): Promise<CronTickResult> => {
        const { rows } = await c.query(
          `SELECT cron_id FROM ${s}.crons WHERE cron_id = $1 AND enabled
          AND next_run_date = $2::timestamptz FOR UPDATE SKIP LOCKED`,
          [tick.cron_id, tick.due],
        );
        if (!rows[0]) return { kind: 'taken' };
        await c.query(`UPDATE ${s}.crons SET next_run_date = $2, updated_at = now() WHERE cron_id = $1`, [
          tick.cron_id,
          tick.next,
        ]);
        // A refused run (busy thread under reject, thread gone) skips this tick; the claim stays.
        if (!tick.run) return { kind: 'skipped', reason: tick.reason ?? 'no run' };
        await c.query('SAVEPOINT ap_cron_run');
        try {
          const run = await runs.createIn(c, tick.run);
          return { kind: 'fired', run };
        } catch (err) {
          if (!(err instanceof ConflictError || err instanceof NotFoundError)) throw err;
          await c.query('ROLLBACK TO SAVEPOINT ap_cron_run');
          return { kind: 'skipped', reason: err.message };
        }
      });
      if (result.kind === 'fired') local({ type: 'wake' });
      return result;
    },
  };
}

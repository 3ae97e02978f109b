// Reading runs (Postgres): one run (alone, or with its thread's values once it ended), a thread's runs, and every
// run in flight.
import { TERMINAL_STATUSES_SQL, withEndedValues } from '../../common.ts';
import { fromJsonb } from '../../data-cipher.ts';
import type { Json, RunStatus, RunStore } from '../../types.ts';
import { RUN_COLS, type PgContext } from '../context.ts';

export function postgresRunReads(
  ctx: PgContext,
): Pick<RunStore, 'get' | 'getWithValues' | 'getById' | 'list' | 'listByStatus'> {
  const { pool, s, codec, toRun, named } = ctx;

  /** A run ($1 on thread $2) and, once it has ended, its thread's values (getWithValues): a join's one read. */
  const RUN_WITH_VALUES = `SELECT ${RUN_COLS.split(',')
    .map((c) => `r.${c.trim()}`)
    .join(', ')}, CASE WHEN r.status IN (${TERMINAL_STATUSES_SQL})
    THEN t."values" END AS _values
    FROM ${s}.runs r LEFT JOIN ${s}.threads t ON t.thread_id = r.thread_id WHERE r.run_id = $1 AND r.thread_id = $2`;

  return {
    async get(threadId: string, runId: string) {
      const { rows } = await pool.query(
        named('run_get', `SELECT ${RUN_COLS} FROM ${s}.runs WHERE run_id = $1 AND thread_id = $2`, [runId, threadId]),
      );
      return rows[0] ? toRun(rows[0]) : null;
    },
    async getWithValues(threadId: string, runId: string) {
      const { rows } = await pool.query(named('run_get_values', RUN_WITH_VALUES, [runId, threadId]));
      const row = rows[0] as Record<string, unknown> | undefined;
      if (!row) return null;
      return withEndedValues(toRun(row), fromJsonb<Json | null>(codec, row._values) ?? null);
    },
    async getById(runId: string) {
      const { rows } = await pool.query(
        named('run_get_by_id', `SELECT ${RUN_COLS} FROM ${s}.runs WHERE run_id = $1`, [runId]),
      );
      return rows[0] ? toRun(rows[0]) : null;
    },
    async list(threadId: string, q: { limit: number; offset: number; status?: RunStatus }) {
      const { rows } = await pool.query(
        `SELECT * FROM ${s}.runs WHERE thread_id = $1 AND ($2::text IS NULL OR
        status = $2) ORDER BY seq DESC LIMIT $3 OFFSET $4`,
        [threadId, q.status ?? null, q.limit, q.offset],
      );
      return rows.map(toRun);
    },
    async listByStatus(statuses: Array<'pending' | 'running'>) {
      if (!statuses.length) return [];
      const { rows } = await pool.query(
        `SELECT ${RUN_COLS} FROM ${s}.runs WHERE status = ANY($1::text[]) ORDER BY seq`,
        [statuses],
      );
      return rows.map(toRun);
    },
  };
}

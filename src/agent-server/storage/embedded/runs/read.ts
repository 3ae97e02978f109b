// Reading runs (embedded): one run (alone, or with its thread's values once it ended), a thread's runs, and every
// run in flight.
import { TERMINAL_STATUSES_SQL, withEndedValues } from '../../common.ts';
import type { RunStatus, RunStore } from '../../types.ts';
import type { EmbeddedContext, Row } from '../context.ts';

export function embeddedRunReads(
  ctx: EmbeddedContext,
): Pick<RunStore, 'get' | 'getWithValues' | 'getById' | 'list' | 'listByStatus'> {
  const { sql, st, toRun, readNullable } = ctx;
  /** A run and, once it has ended, its thread's values (getWithValues): a join's one read. */
  const runWithValues = sql(`SELECT r.*, CASE WHEN r.status IN (${TERMINAL_STATUSES_SQL}) THEN t."values" END AS _values
    FROM ap_runs r LEFT JOIN ap_threads t ON t.thread_id = r.thread_id WHERE r.run_id = ?`);

  return {
    async get(threadId: string, runId: string) {
      const r = st.getRun.get(runId) as Row | undefined;
      return r && r.thread_id === threadId ? toRun(r) : null;
    },
    async getWithValues(threadId: string, runId: string) {
      const r = runWithValues.get(runId) as Row | undefined;
      if (!r || r.thread_id !== threadId) return null;
      return withEndedValues(toRun(r), readNullable(r._values));
    },
    async getById(runId: string) {
      const r = st.getRun.get(runId) as Row | undefined;
      return r ? toRun(r) : null;
    },
    async list(threadId: string, q: { limit: number; offset: number; status?: RunStatus }) {
      const params: unknown[] = [threadId];
      let where = 'thread_id = ?';
      if (q.status) {
        where += ' AND status = ?';
        params.push(q.status);
      }
      return (
        sql(`SELECT * FROM ap_runs WHERE ${where} ORDER BY seq DESC LIMIT ? OFFSET ?`).all(
          ...params,
          q.limit,
          q.offset,
        ) as Row[]
      ).map(toRun);
    },
    async listByStatus(statuses: Array<'pending' | 'running'>) {
      if (!statuses.length) return [];
      return (
        sql(`SELECT * FROM ap_runs WHERE status IN (${statuses.map(() => '?').join(',')}) ORDER BY seq`).all(
          ...statuses,
        ) as Row[]
      ).map(toRun);
    },
  };
}

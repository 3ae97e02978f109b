// Cancelling and removing runs (Postgres), each under its thread's lock with the decision taken by run-rules.ts:
// cancel (one run or several), the cancel requests a worker polls for, the end of a rollback, and delete.
import { ConflictError, NotFoundError } from '../../../../lib/errors.ts';
import { cancelEffect, decideDelete, mayRollback } from '../../run-rules.ts';
import type { RunQueue } from '../../ports/run-queue.ts';
import type { CancelAction, RunRecord, RunStatus, RunStore } from '../../types.ts';
import type { PgContext } from '../context.ts';

export function postgresRunCancels(
  ctx: PgContext,
): Pick<RunStore, 'cancel' | 'cancelMany' | 'delete'> & Pick<RunQueue, 'cancelRequests' | 'rollback'> {
  const { pool, s, toRun, tx, notify, lockThreadOfRun, applyCancel, afterDequeue, removeRolledBack } = ctx;

  return {
    async cancel(threadId: string, runId: string, action: CancelAction, reason?: string | null) {
      return tx(async (c) => {
        await c.query(`SELECT 1 FROM ${s}.threads WHERE thread_id = $1 FOR UPDATE`, [threadId]);
        const { rows } = await c.query(`SELECT * FROM ${s}.runs WHERE run_id = $1 AND thread_id = $2 FOR UPDATE`, [
          runId,
          threadId,
        ]);
        if (!rows[0]) throw new NotFoundError(`Run ${runId} not found`);
        const run = toRun(rows[0]);
        const effect = cancelEffect(run, action);
        await applyCancel(c, effect);
        // Only a cancel that takes effect says why; a finished run keeps what it had.
        const cancel_reason = reason && effect.effect !== 'none' ? reason : run.cancel_reason;
        if (cancel_reason !== run.cancel_reason && effect.effect !== 'delete') {
          await c.query(`UPDATE ${s}.runs SET cancel_reason = $2 WHERE run_id = $1`, [run.run_id, cancel_reason]);
        }
        if (effect.effect === 'delete' || effect.effect === 'interrupt') await afterDequeue(c, threadId);
        if (effect.effect === 'interrupt') return { ...run, status: 'interrupted' as const, cancel_reason };
        if (effect.effect === 'flag') return { ...run, cancel_action: action, cancel_reason };
        return run;
      });
    },
    async cancelMany(threadId: string, runIds: string[], action: CancelAction) {
      const ids = [...new Set(runIds)];
      return tx(async (c) => {
        await c.query(`SELECT 1 FROM ${s}.threads WHERE thread_id = $1 FOR UPDATE`, [threadId]);
        const { rows } = await c.query(
          `SELECT * FROM ${s}.runs WHERE run_id = ANY($1::uuid[]) AND thread_id = $2 ORDER BY seq FOR UPDATE`,
          [ids, threadId],
        );
        // uuid columns answer lowercase; a request may name a run in capitals.
        const byId = new Map(rows.map((r) => [String(r.run_id).toLowerCase(), toRun(r)]));
        const missing = ids.find((id) => !byId.has(id.toLowerCase()));
        if (missing) throw new NotFoundError(`Run ${missing} not found`);
        let dequeued = false;
        const out: RunRecord[] = [];
        for (const run of new Map(ids.map((id) => [id.toLowerCase(), byId.get(id.toLowerCase())!])).values()) {
          const effect = cancelEffect(run, action);
          await applyCancel(c, effect);
          if (effect.effect === 'delete' || effect.effect === 'interrupt') dequeued = true;
          if (effect.effect === 'interrupt') out.push({ ...run, status: 'interrupted' });
          else if (effect.effect === 'flag') out.push({ ...run, cancel_action: action });
          else out.push(run);
        }
        if (dequeued) await afterDequeue(c, threadId);
        return out;
      });
    },
    async cancelRequests(runIds: string[]) {
      const out = new Map<string, CancelAction>();
      if (!runIds.length) return out;
      const { rows } = await pool.query(`SELECT run_id, cancel_action FROM ${s}.runs WHERE run_id = ANY($1::uuid[])`, [
        runIds,
      ]);
      const found = new Set(rows.map((r) => r.run_id as string));
      for (const r of rows) if (r.cancel_action) out.set(r.run_id as string, r.cancel_action as CancelAction);
      for (const id of runIds) if (!found.has(id)) out.set(id, 'interrupt');
      return out;
    },
    async rollback(runId: string, workerId: string | null) {
      await tx(async (c) => {
        await lockThreadOfRun(c, runId);
        const { rows } = await c.query(`SELECT thread_id, worker_id FROM ${s}.runs WHERE run_id = $1 FOR UPDATE`, [
          runId,
        ]);
        if (!rows[0] || !mayRollback(rows[0] as { worker_id: string | null }, workerId)) return;
        await removeRolledBack(c, rows[0].thread_id as string, runId);
        await notify(c, { type: 'run_done', run_id: runId });
        await notify(c, { type: 'wake' });
      });
    },
    async delete(threadId: string, runId: string) {
      await tx(async (c) => {
        await c.query(`SELECT 1 FROM ${s}.threads WHERE thread_id = $1 FOR UPDATE`, [threadId]);
        const { rows } = await c.query(`SELECT status FROM ${s}.runs WHERE run_id = $1 AND thread_id = $2 FOR UPDATE`, [
          runId,
          threadId,
        ]);
        if (!rows[0]) throw new NotFoundError(`Run ${runId} not found`);
        const decision = decideDelete({ run_id: runId, status: rows[0].status as RunStatus });
        if (decision.kind === 'conflict') throw new ConflictError(decision.detail);
        await c.query(`DELETE FROM ${s}.runs WHERE run_id = $1`, [runId]);
        if (decision.settleThread) await afterDequeue(c, threadId);
        await notify(c, { type: 'run_done', run_id: runId });
      });
    },
  };
}

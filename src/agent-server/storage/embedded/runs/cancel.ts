// Cancelling and removing runs (embedded), with the decision taken by run-rules.ts: cancel (one run or several),
// the cancel requests a worker polls for, the end of a rollback, and delete.
import { ConflictError, NotFoundError } from '../../../../lib/errors.ts';
import { cancelEffect, decideDelete, mayRollback } from '../../run-rules.ts';
import type { RunQueue } from '../../ports/run-queue.ts';
import type { CancelAction, RunRecord, RunStore, StorageEvent } from '../../types.ts';
import type { EmbeddedContext, Row } from '../context.ts';
import type { RunSteps } from './steps.ts';

export function embeddedRunCancels(
  ctx: EmbeddedContext,
  { applyCancel, afterDequeue, removeRolledBack }: RunSteps,
): Pick<RunStore, 'cancel' | 'cancelMany' | 'delete'> & Pick<RunQueue, 'cancelRequests' | 'rollback'> {
  const { sql, inTx, st, emit, toRun } = ctx;

  return {
    async cancel(threadId: string, runId: string, action: CancelAction, reason?: string | null) {
      let event: StorageEvent | null = null;
      const result = inTx(() => {
        const r = st.getRun.get(runId) as Row | undefined;
        if (!r || r.thread_id !== threadId) throw new NotFoundError(`Run ${runId} not found`);
        const run = toRun(r);
        const effect = cancelEffect(run, action);
        event = applyCancel(effect);
        // Only a cancel that takes effect says why; a finished run keeps what it had.
        const cancel_reason = reason && effect.effect !== 'none' ? reason : run.cancel_reason;
        if (cancel_reason !== run.cancel_reason && effect.effect !== 'delete') {
          sql('UPDATE ap_runs SET cancel_reason = ? WHERE run_id = ?').run(cancel_reason, runId);
        }
        if (effect.effect === 'delete' || effect.effect === 'interrupt') afterDequeue(threadId);
        if (effect.effect === 'interrupt') return { ...run, status: 'interrupted' as const, cancel_reason };
        if (effect.effect === 'flag') return { ...run, cancel_action: action, cancel_reason };
        return run;
      });
      if (event) emit(event);
      return result;
    },
    async cancelMany(threadId: string, runIds: string[], action: CancelAction) {
      const events: StorageEvent[] = [];
      const result = inTx(() => {
        const runs = [...new Set(runIds)].map((id) => {
          const r = st.getRun.get(id) as Row | undefined;
          if (!r || r.thread_id !== threadId) throw new NotFoundError(`Run ${id} not found`);
          return toRun(r);
        });
        let dequeued = false;
        const out = runs.map((run) => {
          const effect = cancelEffect(run, action);
          const e = applyCancel(effect);
          if (e) events.push(e);
          if (effect.effect === 'delete' || effect.effect === 'interrupt') dequeued = true;
          if (effect.effect === 'interrupt') return { ...run, status: 'interrupted' as const };
          if (effect.effect === 'flag') return { ...run, cancel_action: action };
          return run;
        });
        if (dequeued) afterDequeue(threadId);
        return out;
      });
      for (const e of events) emit(e);
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
    async rollback(runId: string, workerId: string | null) {
      const done = inTx(() => {
        const r = st.getRun.get(runId) as Row | undefined;
        if (!r || !mayRollback(r as Pick<RunRecord, 'worker_id'>, workerId)) return false;
        removeRolledBack(r.thread_id as string, runId);
        return true;
      });
      if (done) {
        emit({ type: 'run_done', run_id: runId });
        emit({ type: 'wake' });
      }
    },
    async delete(threadId: string, runId: string) {
      inTx(() => {
        const r = st.getRun.get(runId) as Row | undefined;
        if (!r || r.thread_id !== threadId) throw new NotFoundError(`Run ${runId} not found`);
        const decision = decideDelete(r as Pick<RunRecord, 'run_id' | 'status'>);
        if (decision.kind === 'conflict') throw new ConflictError(decision.detail);
        st.deleteRun.run(runId);
        if (decision.settleThread) afterDequeue(threadId);
      });
      emit({ type: 'run_done', run_id: runId });
    },
  };
}

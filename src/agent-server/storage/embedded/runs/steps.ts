// The steps several run operations of the embedded store take inside their open transaction: applying a cancel
// decision, settling a thread after a run left the queue or was rolled back, ending and claiming a run.
import { mayFinish, threadStatusAfterDequeue, threadStatusAfterRemoval, type CancelEffect } from '../../run-rules.ts';
import type { RunOutcome, RunRecord, StorageEvent } from '../../types.ts';
import { j, type EmbeddedContext, type Row } from '../context.ts';

export type RunSteps = ReturnType<typeof embeddedRunSteps>;

export function embeddedRunSteps(ctx: EmbeddedContext) {
  const { sql, st, now, settleThread, rollbackCheckpoints, toRun } = ctx;

  /** Applies one cancel decision to a run in the open transaction; returns the event to send after commit. */
  function applyCancel(c: CancelEffect): StorageEvent | null {
    switch (c.effect) {
      case 'delete':
        st.deleteRun.run(c.run_id);
        return { type: 'run_done', run_id: c.run_id };
      case 'interrupt':
        sql(`UPDATE ap_runs SET status = 'interrupted', updated_at = ? WHERE run_id = ?`).run(now(), c.run_id);
        return { type: 'run_done', run_id: c.run_id };
      case 'flag':
        sql('UPDATE ap_runs SET cancel_action = ? WHERE run_id = ?').run(c.action, c.run_id);
        return { type: 'cancel', run_id: c.run_id, action: c.action };
      case 'none':
        return null;
    }
  }

  /** A pending run left the queue: the thread goes idle once nothing else is in flight. */
  function afterDequeue(threadId: string): void {
    const status = threadStatusAfterDequeue(!!st.inflight.get(threadId));
    if (status) st.threadStatus.run(status, now(), threadId);
  }

  /** Deletes a cancelled run and its checkpoints; the thread is busy while more runs wait. */
  function removeRolledBack(threadId: string, runId: string): void {
    rollbackCheckpoints(threadId, runId);
    st.deleteRun.run(runId);
    st.threadStatus.run(threadStatusAfterRemoval(!!st.hasPending.get(threadId)), now(), threadId);
  }

  /** Ends a claimed run and settles its thread, inside the caller's open transaction; false: not this worker's. */
  function finishIn(runId: string, workerId: string, outcome: RunOutcome): boolean {
    const r = st.getRun.get(runId) as Row | undefined;
    if (!r || !mayFinish(r as Pick<RunRecord, 'status' | 'worker_id'>, workerId)) return false;
    sql(`UPDATE ap_runs SET status = ?, error = ?, updated_at = ?, worker_id = NULL,
      lease_expires_at = NULL WHERE run_id = ?`).run(
      outcome.status,
      outcome.error ? j(outcome.error) : null,
      now(),
      runId,
    );
    settleThread(r.thread_id as string, outcome);
    return true;
  }

  /** Claims a claimable run for `workerId`, inside the caller's open transaction. */
  function claimIn(runId: string, threadId: string, workerId: string, leaseMs: number): RunRecord {
    const ts = now();
    st.setRunning.run(workerId, Date.now() + leaseMs, ts, runId);
    st.threadBusy.run(ts, threadId);
    return toRun(st.getRun.get(runId) as Row);
  }

  return { applyCancel, afterDequeue, removeRolledBack, finishIn, claimIn };
}

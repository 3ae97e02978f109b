// The sweep (embedded): runs whose lease expired (their worker died) are requeued, or ended once out of attempts,
// as run-rules.ts decides, in one transaction.
import { decideSweep } from '../../run-rules.ts';
import type { RunQueue, SweepResult } from '../../ports/run-queue.ts';
import { j, type EmbeddedContext, type Row } from '../context.ts';
import type { RunSteps } from './steps.ts';

export function embeddedRunSweep(ctx: EmbeddedContext, { removeRolledBack }: RunSteps): Pick<RunQueue, 'sweep'> {
  const { sql, inTx, emit, now, settleThread, toRun } = ctx;

  return {
    async sweep(maxAttempts: number): Promise<SweepResult> {
      const res: SweepResult = { requeued: [], failed: [] };
      inTx(() => {
        const rows = sql(`SELECT * FROM ap_runs WHERE status = 'running' AND lease_expires_at < ?`).all(
          Date.now(),
        ) as Row[];
        for (const row of rows) {
          const r = toRun(row);
          const decision = decideSweep(r, maxAttempts);
          if (decision.kind === 'rollback') {
            removeRolledBack(r.thread_id, r.run_id);
            res.failed.push(r.run_id);
          } else if (decision.kind === 'end') {
            const { outcome } = decision;
            sql(`UPDATE ap_runs SET status = ?, error = ?, worker_id = NULL, lease_expires_at = NULL,
              updated_at = ? WHERE run_id = ?`).run(
              outcome.status,
              outcome.error ? j(outcome.error) : null,
              now(),
              r.run_id,
            );
            settleThread(r.thread_id, outcome);
            res.failed.push(r.run_id);
          } else {
            sql(`UPDATE ap_runs SET status = 'pending', worker_id = NULL, lease_expires_at = NULL,
              updated_at = ? WHERE run_id = ?`).run(now(), r.run_id);
            res.requeued.push(r.run_id);
          }
        }
      });
      for (const run_id of res.failed) emit({ type: 'run_done', run_id });
      if (res.requeued.length) emit({ type: 'wake' });
      return res;
    },
  };
}

// The sweep (Postgres): runs whose lease expired (their worker died) are requeued, or ended once out of attempts,
// as run-rules.ts decides, one transaction per run under its thread's lock.
import { decideSweep } from '../../run-rules.ts';
import type { RunQueue, SweepResult } from '../../ports/run-queue.ts';
import type { PgContext } from '../context.ts';

export function postgresRunSweep(ctx: PgContext): Pick<RunQueue, 'sweep'> {
  const { pool, s, toRun, changed, tx, notify, settleThread, removeRolledBack } = ctx;

  return {
    async sweep(maxAttempts: number): Promise<SweepResult> {
      // The safety tick: the next claim queries again (e.g. a thread that was locked when we last looked).
      changed();
      const res: SweepResult = { requeued: [], failed: [] };
      const { rows: expired } = await pool.query(`SELECT run_id, thread_id FROM ${s}.runs WHERE status = 'running'
        AND lease_expires_at < now() ORDER BY seq LIMIT 100`);
      // One transaction per run, thread locked first like every other writer; the lease is re-checked under lock.
      for (const e of expired) {
        await tx(async (c) => {
          const { rows: locked } = await c.query(
            `SELECT 1 FROM ${s}.threads WHERE thread_id = $1 FOR UPDATE SKIP LOCKED`,
            [e.thread_id],
          );
          if (!locked[0]) return;
          const { rows } = await c.query(
            `SELECT * FROM ${s}.runs WHERE run_id = $1 AND status = 'running'
            AND lease_expires_at < now() FOR UPDATE`,
            [e.run_id],
          );
          if (!rows[0]) return;
          const r = toRun(rows[0]);
          const decision = decideSweep(r, maxAttempts);
          if (decision.kind === 'rollback') {
            await removeRolledBack(c, r.thread_id, r.run_id);
            await notify(c, { type: 'run_done', run_id: r.run_id });
            res.failed.push(r.run_id);
          } else if (decision.kind === 'end') {
            const { outcome } = decision;
            await c.query(
              `UPDATE ${s}.runs SET status = $2, error = $3, worker_id = NULL, lease_expires_at = NULL,
              updated_at = now() WHERE run_id = $1`,
              [r.run_id, outcome.status, outcome.error ? JSON.stringify(outcome.error) : null],
            );
            await settleThread(c, r.thread_id, outcome);
            await notify(c, { type: 'run_done', run_id: r.run_id });
            res.failed.push(r.run_id);
          } else {
            await c.query(
              `UPDATE ${s}.runs SET status = 'pending', worker_id = NULL, lease_expires_at = NULL,
              updated_at = now() WHERE run_id = $1`,
              [r.run_id],
            );
            await notify(c, { type: 'wake' });
            res.requeued.push(r.run_id);
          }
        });
      }
      return res;
    },
  };
}

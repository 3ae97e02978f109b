// Claiming runs (embedded): the queue's take, leases kept alive by heartbeats, and runs given back on a graceful
// shutdown.
import type { RunQueue } from '../../ports/run-queue.ts';
import type { EmbeddedContext, Row } from '../context.ts';
import type { RunSteps } from './steps.ts';

export function embeddedRunClaims(
  ctx: EmbeddedContext,
  { claimIn }: RunSteps,
): Pick<RunQueue, 'claim' | 'heartbeat' | 'release'> {
  const { sql, inTx, st, emit } = ctx;

  return {
    async claim(workerId: string, leaseMs: number) {
      // Most claims find nothing (the engine claims until the queue is empty, once per wake-up): a plain read
      // says so without taking the write lock and committing an empty transaction. This process is the only one
      // that creates and claims runs, so a run it finds here is still claimable inside the transaction below.
      if (!st.claimable.get(Date.now())) return null;
      return inTx(() => {
        const r = st.claimable.get(Date.now()) as Row | undefined;
        return r ? claimIn(r.run_id as string, r.thread_id as string, workerId, leaseMs) : null;
      });
    },
    async heartbeat(workerId: string, runIds: string[], leaseMs: number) {
      if (!runIds.length) return [];
      const held: string[] = [];
      const upd = sql(`UPDATE ap_runs SET lease_expires_at = ? WHERE run_id = ? AND worker_id = ?
        AND status = 'running'`);
      inTx(() => {
        for (const id of runIds) if (upd.run(Date.now() + leaseMs, id, workerId).changes) held.push(id);
      });
      return held;
    },
    async release(workerId: string, runIds: string[]) {
      const upd = sql(`UPDATE ap_runs SET status = 'pending', attempt = max(attempt - 1, 0),
        worker_id = NULL, lease_expires_at = NULL WHERE run_id = ? AND worker_id = ? AND status = 'running'`);
      inTx(() => {
        for (const id of runIds) upd.run(id, workerId);
      });
      emit({ type: 'wake' });
    },
  };
}

// Runs of the Postgres store: the API's reads and cancels (RunStore) and the queue the engine holds (RunQueue), one
// file per operation over the store's shared context (../context.ts). The run cycle's hot statements (create on a
// free thread, claim, finish) are single named statements that encode run-rules.ts in SQL; the slower paths read
// the rows under the thread's lock, ask run-rules.ts and execute its answer.
import type { RunQueue } from '../../ports/run-queue.ts';
import type { NewRun, RunRecord, RunStore } from '../../types.ts';
import type { PgContext, Q } from '../context.ts';
import { postgresRunCancels } from './cancel.ts';
import { postgresRunClaims } from './claim.ts';
import { postgresRunCreate } from './create.ts';
import { postgresRunFinish } from './finish.ts';
import { postgresRunReads } from './read.ts';
import { postgresRunSweep } from './sweep.ts';

export function postgresRuns(ctx: PgContext): {
  runs: RunStore;
  queue: RunQueue;
  /** A run created inside the caller's transaction (crons fire through it). */
  createIn(c: Q, run: NewRun): Promise<RunRecord>;
} {
  const { create, createIn } = postgresRunCreate(ctx);
  const { cancel, cancelMany, delete: remove, cancelRequests, rollback } = postgresRunCancels(ctx);
  return {
    runs: { ...postgresRunReads(ctx), cancel, cancelMany, delete: remove },
    queue: {
      create,
      ...postgresRunClaims(ctx),
      ...postgresRunFinish(ctx),
      cancelRequests,
      rollback,
      ...postgresRunSweep(ctx),
    },
    createIn,
  };
}

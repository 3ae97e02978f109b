// Runs of the Postgres store: the queue, leases and cancels, one file per operation over the store's shared context
// (../context.ts). The run cycle's hot statements (create on a free thread, claim, finish) are single named
// statements that encode run-rules.ts in SQL; the slower paths read the rows under the thread's lock, ask
// run-rules.ts and execute its answer.
import type { NewRun, RunRecord, RunStore } from '../../types.ts';
import type { PgContext, Q } from '../context.ts';
import { postgresRunCancels } from './cancel.ts';
import { postgresRunClaims } from './claim.ts';
import { postgresRunCreate } from './create.ts';
import { postgresRunFinish } from './finish.ts';
import { postgresRunReads } from './read.ts';
import { postgresRunSweep } from './sweep.ts';

export function postgresRuns(ctx: PgContext): RunStore & { createIn(c: Q, run: NewRun): Promise<RunRecord> } {
  return {
    ...postgresRunCreate(ctx),
    ...postgresRunReads(ctx),
    ...postgresRunClaims(ctx),
    ...postgresRunFinish(ctx),
    ...postgresRunCancels(ctx),
    ...postgresRunSweep(ctx),
  };
}

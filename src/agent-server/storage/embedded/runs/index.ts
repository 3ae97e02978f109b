// Runs of the embedded store: the queue, leases and cancels, one file per operation over the store's context
// (../context.ts) and the in-transaction steps they share (steps.ts). What each change does to the runs in flight
// and to the thread is decided by run-rules.ts; each operation executes it inside one IMMEDIATE transaction.
import type { NewRun, RunRecord, RunStore, StorageEvent } from '../../types.ts';
import type { EmbeddedContext } from '../context.ts';
import { embeddedRunCancels } from './cancel.ts';
import { embeddedRunClaims } from './claim.ts';
import { embeddedRunCreate } from './create.ts';
import { embeddedRunFinish } from './finish.ts';
import { embeddedRunReads } from './read.ts';
import { embeddedRunSteps } from './steps.ts';
import { embeddedRunSweep } from './sweep.ts';

export function embeddedRuns(
  ctx: EmbeddedContext,
): RunStore & { createIn(run: NewRun, events: StorageEvent[]): RunRecord } {
  const steps = embeddedRunSteps(ctx);
  return {
    ...embeddedRunCreate(ctx, steps),
    ...embeddedRunReads(ctx),
    ...embeddedRunClaims(ctx, steps),
    ...embeddedRunFinish(ctx, steps),
    ...embeddedRunCancels(ctx, steps),
    ...embeddedRunSweep(ctx, steps),
  };
}

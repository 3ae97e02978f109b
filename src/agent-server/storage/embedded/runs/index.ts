// Runs of the embedded store: the API's reads and cancels (RunStore) and the queue the engine holds (RunQueue), one
// file per operation over the store's context (../context.ts) and the in-transaction steps they share (steps.ts).
// What each change does to the runs in flight and to the thread is decided by run-rules.ts; each operation executes
// it inside one IMMEDIATE transaction.
import type { RunQueue } from '../../ports/run-queue.ts';
import type { NewRun, RunRecord, RunStore, StorageEvent } from '../../types.ts';
import type { EmbeddedContext } from '../context.ts';
import { embeddedRunCancels } from './cancel.ts';
import { embeddedRunClaims } from './claim.ts';
import { embeddedRunCreate } from './create.ts';
import { embeddedRunFinish } from './finish.ts';
import { embeddedRunReads } from './read.ts';
import { embeddedRunSteps } from './steps.ts';
import { embeddedRunSweep } from './sweep.ts';

export function embeddedRuns(ctx: EmbeddedContext): {
  runs: RunStore;
  queue: RunQueue;
  /** A run created inside the caller's open transaction (crons fire through it). */
  createIn(run: NewRun, events: StorageEvent[]): RunRecord;
} {
  const steps = embeddedRunSteps(ctx);
  const { create, createIn } = embeddedRunCreate(ctx, steps);
  const { cancel, cancelMany, delete: remove, cancelRequests, rollback } = embeddedRunCancels(ctx, steps);
  return {
    runs: { ...embeddedRunReads(ctx), cancel, cancelMany, delete: remove },
    queue: {
      create,
      ...embeddedRunClaims(ctx, steps),
      ...embeddedRunFinish(ctx, steps),
      cancelRequests,
      rollback,
      ...embeddedRunSweep(ctx, steps),
    },
    createIn,
  };
}

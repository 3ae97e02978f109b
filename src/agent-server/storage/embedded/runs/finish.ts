// Ending runs (embedded): finish, and finishAndClaim, which also claims in the same transaction the run the freed
// slot goes to next.
import type { RunQueue } from '../../ports/run-queue.ts';
import type { RunOutcome } from '../../types.ts';
import type { EmbeddedContext, Row } from '../context.ts';
import type { RunSteps } from './steps.ts';

export function embeddedRunFinish(
  ctx: EmbeddedContext,
  { finishIn, claimIn }: RunSteps,
): Pick<RunQueue, 'finish' | 'finishAndClaim'> {
  const { inTx, st, emit } = ctx;

  return {
    async finish(runId: string, workerId: string, outcome: RunOutcome) {
      const ok = inTx(() => finishIn(runId, workerId, outcome));
      if (ok) {
        emit({ type: 'run_done', run_id: runId });
        emit({ type: 'wake' });
      }
      return ok;
    },
    async finishAndClaim(runId: string, workerId: string, outcome: RunOutcome, leaseMs: number) {
      const result = inTx(() => {
        const finished = finishIn(runId, workerId, outcome);
        const r = st.claimable.get(Date.now()) as Row | undefined;
        return { finished, next: r ? claimIn(r.run_id as string, r.thread_id as string, workerId, leaseMs) : null };
      });
      if (result.finished) emit({ type: 'run_done', run_id: runId });
      // The claimer took what it can; with nothing claimed, the wake-up lets it look again (as after finish()).
      if (result.finished && !result.next) emit({ type: 'wake' });
      return result;
    },
  };
}

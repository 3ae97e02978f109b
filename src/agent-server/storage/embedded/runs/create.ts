// Creating a run (embedded): the assistant it was built from checked, the multitask strategy applied against the
// runs in flight, and with a claim, the run claimed in the same transaction when a claim right after would take it.
import { ConflictError, NotFoundError, StaleAssistantError } from '../../../../lib/errors.ts';
import { decideCreate } from '../../run-rules.ts';
import type { ClaimRequest, RunQueue } from '../../ports/run-queue.ts';
import type { NewRun, RunRecord, StorageEvent } from '../../types.ts';
import { assistantToken } from '../assistants.ts';
import { j, pj, type EmbeddedContext, type Row } from '../context.ts';
import type { RunSteps } from './steps.ts';

export function embeddedRunCreate(
  ctx: EmbeddedContext,
  { applyCancel, claimIn }: RunSteps,
): Pick<RunQueue, 'create'> & { createIn(run: NewRun, events: StorageEvent[]): RunRecord } {
  const { sql, inTx, st, emit, now, codec, toRun } = ctx;

  /**
   * Creates a run inside the caller's open transaction (crons fire through it in the transaction that claims their
   * tick); the events to send after commit go to `events`.
   */
  function createIn(run: NewRun, events: StorageEvent[]): RunRecord {
    if (run.assistant_token !== undefined) {
      const a = st.getAssistant.get(run.assistant_id) as Row | undefined;
      if (!a || assistantToken(a) !== run.assistant_token) throw new StaleAssistantError(run.assistant_id);
    }
    const ts = now();
    let thread = st.threadMetadata.get(run.thread_id) as Row | undefined;
    if (!thread) {
      if (run.if_not_exists !== 'create') throw new NotFoundError(`Thread with ID ${run.thread_id} not found`);
      st.insertThread.run(run.thread_id, ts, ts, ts, j(run.thread_metadata));
      thread = st.threadMetadata.get(run.thread_id) as Row;
    }
    const decision = decideCreate(run.multitask_strategy, (st.inflight.all(run.thread_id) as Row[]).map(toRun));
    if (decision.kind === 'reject') throw new ConflictError(decision.detail);
    for (const c of decision.cancel) {
      const e = applyCancel(c);
      if (e) events.push(e);
    }
    st.insertRun.run(
      run.run_id,
      run.thread_id,
      run.assistant_id,
      ts,
      ts,
      j(run.metadata),
      codec.write(run.kwargs ?? {}),
      run.multitask_strategy,
      run.delay_ms ? Date.now() + run.delay_ms : null,
    );
    const meta = { ...pj(thread.metadata), ...run.thread_metadata };
    sql(`UPDATE ap_threads SET status = 'busy', metadata = ?, updated_at = ? WHERE thread_id = ?`).run(
      j(meta),
      ts,
      run.thread_id,
    );
    return toRun(st.getRun.get(run.run_id) as Row);
  }

  return {
    createIn,
    async create(run: NewRun, claim?: ClaimRequest) {
      const events: StorageEvent[] = [];
      const created = inTx(() => {
        const r = createIn(run, events);
        // The claim a wake-up would send next, in this transaction: only when it would take this very run.
        if (!claim || (st.claimable.get(Date.now()) as Row | undefined)?.run_id !== r.run_id) return r;
        return claimIn(r.run_id, r.thread_id, claim.workerId, claim.leaseMs);
      });
      for (const e of events) emit(e);
      if (created.status === 'pending') emit({ type: 'wake' });
      return created;
    },
  };
}

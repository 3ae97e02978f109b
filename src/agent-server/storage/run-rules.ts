// The run-lifecycle rules both stores follow, as pure decisions over plain data: what creating, cancelling,
// deleting, finishing or sweeping a run does to that run, to the runs already in flight and to the thread's
// status. The adapters read the rows, ask here, and execute the answer in their own transaction. The Postgres
// hot paths (run create on a free thread, claim, finish) are single statements that encode the same rules in SQL;
// run-rules.test.ts pins the rules, the storage contract suite pins both adapters to them.
import type { CancelAction, MultitaskStrategy, RunOutcome, RunRecord, RunStatus, ThreadStatus } from './types.ts';

export const BUSY_THREAD_DETAIL =
  'Thread is already running a task. Wait for it to finish or choose a different multitask strategy.';

/** 409 of POST /threads/prune keep_latest: these threads have a run pending or running (nothing was pruned). */
export function pruneBusyDetail(threadIds: readonly string[]): string {
  return (
    `Cannot prune checkpoints of threads with a run pending or running: ${threadIds.join(', ')}. ` +
    'Wait for their runs to finish (or cancel them) and try again; nothing was pruned.'
  );
}

/** What cancelling one run does right now. */
export type CancelEffect =
  /** A pending run cancelled with rollback: it never ran, so it is deleted. */
  | { run_id: string; effect: 'delete'; event: 'run_done' }
  /** A pending run cancelled with interrupt: it ends as interrupted without running. */
  | { run_id: string; effect: 'interrupt'; event: 'run_done' }
  /** A running run: flagged with the action; its worker stops it (and rolls back) when told. */
  | { run_id: string; effect: 'flag'; action: CancelAction; event: 'cancel' }
  /** Already finished: nothing to do. */
  | { run_id: string; effect: 'none' };

export function cancelEffect(run: { run_id: string; status: RunStatus }, action: CancelAction): CancelEffect {
  if (run.status === 'pending') {
    return { run_id: run.run_id, effect: action === 'rollback' ? 'delete' : 'interrupt', event: 'run_done' };
  }
  if (run.status === 'running') return { run_id: run.run_id, effect: 'flag', action, event: 'cancel' };
  return { run_id: run.run_id, effect: 'none' };
}

export type CreateDecision =
  /** 409: the thread has runs in flight and the strategy is reject. */
  | { kind: 'reject'; detail: string }
  /** Insert the new pending run after applying `cancel` to the runs in flight; the thread becomes busy. */
  | { kind: 'insert'; cancel: CancelEffect[] };

/** Run create against the thread's in-flight (pending or running) runs, oldest first. */
export function decideCreate(
  strategy: MultitaskStrategy,
  inflight: ReadonlyArray<{ run_id: string; status: RunStatus }>,
): CreateDecision {
  if (!inflight.length || strategy === 'enqueue') return { kind: 'insert', cancel: [] };
  if (strategy === 'reject') return { kind: 'reject', detail: BUSY_THREAD_DETAIL };
  return { kind: 'insert', cancel: inflight.map((r) => cancelEffect(r, strategy)) };
}

/**
 * Thread status after a run ends: error (failed or timed out) > interrupted (waits on a node) > busy (more runs
 * queued) > idle.
 */
export function threadStatusAfter(
  outcome: Pick<RunOutcome, 'status' | 'interrupted' | 'refused'>,
  morePending: boolean,
): ThreadStatus {
  if ((outcome.status === 'error' && !outcome.refused) || outcome.status === 'timeout') return 'error';
  if (outcome.interrupted) return 'interrupted';
  return morePending ? 'busy' : 'idle';
}

/** Thread status after a run left without a result (rolled back): busy while more runs are queued. */
export function threadStatusAfterRemoval(morePending: boolean): ThreadStatus {
  return morePending ? 'busy' : 'idle';
}

/**
 * Thread status after a pending run was cancelled or deleted: idle once nothing is in flight, else unchanged
 * (null).
 */
export function threadStatusAfterDequeue(stillInflight: boolean): ThreadStatus | null {
  return stillInflight ? null : 'idle';
}

/** Thread status after a state update outside a run: a run in flight keeps it (null), else from the state. */
export function threadStatusAfterStateUpdate(inflight: boolean, interrupted: boolean): ThreadStatus | null {
  if (inflight) return null;
  return interrupted ? 'interrupted' : 'idle';
}

export type DeleteDecision =
  | { kind: 'conflict'; detail: string }
  /** Delete it; a pending one may leave the thread with nothing in flight (see threadStatusAfterDequeue). */
  | { kind: 'delete'; settleThread: boolean };

export function decideDelete(run: { run_id: string; status: RunStatus }): DeleteDecision {
  if (run.status === 'running') return { kind: 'conflict', detail: `Run ${run.run_id} is running; cancel it first` };
  return { kind: 'delete', settleThread: run.status === 'pending' };
}

/** Only the worker holding a running run may end it (a lost lease means someone else has it now). */
export function mayFinish(run: Pick<RunRecord, 'status' | 'worker_id'> | null | undefined, workerId: string): boolean {
  return !!run && run.status === 'running' && run.worker_id === workerId;
}

/** Rollback of a cancelled run: by its worker, or by anyone (null) when nobody holds it. */
export function mayRollback(run: Pick<RunRecord, 'worker_id'> | null | undefined, workerId: string | null): boolean {
  return !!run && (workerId === null || run.worker_id === workerId);
}

export type SweepDecision =
  /** Cancelled with rollback and its worker is gone: delete the run and its checkpoints. */
  | { kind: 'rollback' }
  /** End it with this outcome and settle the thread. */
  | { kind: 'end'; outcome: RunOutcome }
  /** Back to the queue for another attempt. */
  | { kind: 'requeue' };

/** A running run whose lease expired (its worker stopped renewing it). */
export function decideSweep(run: Pick<RunRecord, 'attempt' | 'cancel_action'>, maxAttempts: number): SweepDecision {
  if (run.cancel_action === 'rollback') return { kind: 'rollback' };
  if (run.cancel_action === 'interrupt') return { kind: 'end', outcome: { status: 'interrupted' } };
  if (run.attempt >= maxAttempts) {
    return {
      kind: 'end',
      outcome: {
        status: 'error',
        error: {
          error: 'WorkerLost',
          message: `Run abandoned after ${run.attempt} attempts: its worker stopped responding`,
        },
      },
    };
  }
  return { kind: 'requeue' };
}

/** The thread's `error` column after a run ends: the run's error when it failed, else cleared. */
export function threadErrorAfter(
  outcome: Pick<RunOutcome, 'status' | 'error' | 'refused'>,
): Record<string, unknown> | null {
  return outcome.status === 'error' && !outcome.refused ? (outcome.error ?? {}) : null;
}

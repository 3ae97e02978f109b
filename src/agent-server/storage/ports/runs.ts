// The runs port: a run as the API shows it and as the engine sees it (attempt, lease holder, cancel request), how a
// run ends, and the API's operations on runs (reads, cancels, delete). How runs are created, taken and ended is the
// run queue's (run-queue.ts), which only the run engine holds. The rules both adapters follow are in ../run-rules.ts.
import type { Json } from './common.ts';

export type RunStatus = 'pending' | 'running' | 'error' | 'success' | 'timeout' | 'interrupted';

export type MultitaskStrategy = 'reject' | 'interrupt' | 'rollback' | 'enqueue';

export type CancelAction = 'interrupt' | 'rollback';

export const TERMINAL_RUN_STATUSES: ReadonlySet<RunStatus> = new Set(['error', 'success', 'timeout', 'interrupted']);

export interface Run {
  run_id: string;
  thread_id: string;
  assistant_id: string;
  created_at: string;
  updated_at: string;
  metadata: Json;
  status: RunStatus;
  kwargs: Json;
  multitask_strategy: MultitaskStrategy;
  /** Why the run was cancelled, when the canceller said (`taken:…`: its input was taken into another run). */
  cancel_reason: string | null;
}

/** A run as the engine sees it: the public record plus the bookkeeping columns. */
export interface RunRecord extends Run {
  attempt: number;
  worker_id: string | null;
  cancel_action: CancelAction | null;
  /** {error, message} of a failed run. */
  error: Json | null;
  /**
   * Only on a record a claim returns (create with a claim, claim, finishAndClaim), never stored: the thread had no
   * root checkpoint then, and nothing else writes it while this run is in flight on it, so the run's first read of
   * its latest checkpoint can be skipped (NO_CHECKPOINT_KEY). Stores may leave it out.
   */
  no_checkpoint?: true;
}

export interface NewRun {
  run_id: string;
  thread_id: string;
  assistant_id: string;
  metadata: Json;
  kwargs: Json;
  multitask_strategy: MultitaskStrategy;
  /** create: make the thread when it does not exist (stateless runs, if_not_exists=create). */
  if_not_exists: 'create' | 'reject';
  /** Merged into the thread's metadata (graph_id, assistant_id), as clients filter threads by them. */
  thread_metadata: Json;
  /** after_seconds: the run is not claimed before this delay has passed. */
  delay_ms?: number;
  /**
   * The token of the assistant row the run was built from (AssistantStore.getVersioned): the create stores the run
   * only while the row still has it, else throws StaleAssistantError and stores nothing. Unset: no such check
   * (cron runs, runs under a custom-auth read filter, a create's third try).
   */
  assistant_token?: string;
}

export interface RunOutcome {
  status: Exclude<RunStatus, 'pending' | 'running'>;
  error?: Json | null;
  /** The thread's values after the run (already JSON-ready); undefined leaves them unchanged. */
  values?: Json | null;
  /** The same as JSON text (what the executor serialised for the stream); when set, it wins over `values`. */
  valuesJson?: string;
  /** True when the last checkpoint has a non-empty `next` (human in the loop). */
  interrupted?: boolean;
  interrupts?: Json;
  /**
   * The run was refused before running anything (strict_resume naming an interrupt no longer waiting): it ends in
   * `error` but its thread keeps the status, interrupts and error it had (`interrupted` and `interrupts` say them).
   */
  refused?: boolean;
}

export interface RunStore {
  get(threadId: string, runId: string): Promise<RunRecord | null>;
  /**
   * get(), and in the same read its thread's values when the run has ended (what a join answers; null when the
   * thread has none); `values` is undefined while the run is pending or running.
   */
  getWithValues(threadId: string, runId: string): Promise<{ run: RunRecord; values?: Json | null } | null>;
  getById(runId: string): Promise<RunRecord | null>;
  list(threadId: string, q: { limit: number; offset: number; status?: RunStatus }): Promise<RunRecord[]>;
  /** Deletes a run that is not running; ConflictError while running. */
  delete(threadId: string, runId: string): Promise<void>;
  /** Cancels a run: a pending one ends at once, a running one is flagged and its worker told. */
  cancel(threadId: string, runId: string, action: CancelAction, reason?: string | null): Promise<RunRecord>;
  /**
   * Cancels these runs of the thread (as cancel() each) in one transaction: NotFoundError, and nothing cancelled,
   * when one of them is not a run of the thread; finished runs are left as they are.
   */
  cancelMany(threadId: string, runIds: string[], action: CancelAction): Promise<RunRecord[]>;
  /** The runs of every thread in these statuses (POST /runs/cancel with `status`), oldest first. */
  listByStatus(statuses: Array<'pending' | 'running'>): Promise<RunRecord[]>;
}

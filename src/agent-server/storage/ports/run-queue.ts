// The run queue port: how runs enter the queue, are taken by a worker under a lease, and leave it (finished, rolled
// back, given back, or swept once their worker is gone). The run engine (src/agent-server/runs/) alone holds it: the
// services create runs through the engine, which decides whether this process takes the new run at once; the
// adapters implement it next to the API's RunStore, and dependency-cruiser keeps every other floor from importing it.
import type { Storage } from '../types.ts';
import type { NewRun, RunOutcome, RunRecord, CancelAction } from './runs.ts';

/** How often a run is started before the sweep of a dead worker's lease ends it in error. */
export const MAX_ATTEMPTS = 3;

/** A worker asking for a run, and how long its lease lasts before a sweep may take the run from it. */
export interface ClaimRequest {
  workerId: string;
  leaseMs: number;
}

export interface SweepResult {
  requeued: string[];
  failed: string[];
}

export interface RunQueue {
  /**
   * Creates a pending run, applying the multitask strategy atomically against in-flight runs. With `claim`, the
   * same write also claims the new run for that worker when a claim made right after would take it (no delay,
   * nothing in flight on its thread, no other run waiting to be claimed); the record says so (status running).
   */
  create(run: NewRun, claim?: ClaimRequest): Promise<RunRecord>;
  /** Takes the oldest pending run whose thread has no running run; at most one claimer gets it. */
  claim(workerId: string, leaseMs: number): Promise<RunRecord | null>;
  /** Extends the lease of runs this worker holds; returns the ids whose lease it still holds. */
  heartbeat(workerId: string, runIds: string[], leaseMs: number): Promise<string[]>;
  /** Ends a claimed run and settles the thread status; false when the lease was lost to someone else. */
  finish(runId: string, workerId: string, outcome: RunOutcome): Promise<boolean>;
  /**
   * finish(), then in the same write the claim() the freed slot would send next, for the same worker (`next`: the
   * run claimed, or null).
   */
  finishAndClaim(
    runId: string,
    workerId: string,
    outcome: RunOutcome,
    leaseMs: number,
  ): Promise<{ finished: boolean; next: RunRecord | null }>;
  /** Ends a run cancelled with action rollback: deletes it and the checkpoints it wrote. */
  rollback(runId: string, workerId: string | null): Promise<void>;
  /** Gives runs back to the queue on graceful shutdown (the attempt does not count). */
  release(workerId: string, runIds: string[]): Promise<void>;
  /** Cancel actions requested for some of these (running) runs. */
  cancelRequests(runIds: string[]): Promise<Map<string, CancelAction>>;
  /** Requeues running runs whose lease expired (attempt < max) or ends them in error. */
  sweep(maxAttempts: number): Promise<SweepResult>;
}

/** The storage as the run engine holds it (the composition roots open it and hand the engine this): with its queue. */
export interface EngineStorage extends Storage {
  readonly queue: RunQueue;
}

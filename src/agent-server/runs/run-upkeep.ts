// The run engine's upkeep (engine.ts): the heartbeat that renews the leases of this process's runs (a run whose
// lease another process took stops here without writing a result) and the slow safety sweep (dead workers' runs
// requeued or ended, with their run-finished notice given once; cancels that no notification brought; a claim
// looked for, in case a wake-up was missed).
import { MAX_ATTEMPTS } from '../storage/ports/run-queue.ts';
import { TERMINAL_RUN_STATUSES, type CancelAction, type RunOutcome } from '../storage/types.ts';
import { CancelledError, type ActiveRun, type AttemptHost } from './attempt.ts';

/** What the upkeep needs of the engine: the attempt host's parts, the runs executing here, and two of its moves. */
export type UpkeepHost = Pick<
  AttemptHost,
  'storage' | 'logger' | 'workerId' | 'leaseMs' | 'waiters' | 'onRunFinished'
> & {
  /** The engine's runs executing in this process, by run id. */
  active: Map<string, ActiveRun>;
  cancelLocal(runId: string, action: CancelAction): void;
  /** Looks for runs to claim. */
  pump(): void;
};

export class RunUpkeep {
  private timers: NodeJS.Timeout[] = [];

  constructor(private readonly h: UpkeepHost) {}

  /** Whether the timers run (between start and stop): the engine claims runs only then. */
  get running(): boolean {
    return this.timers.length > 0;
  }

  start(heartbeatMs: number, sweepMs: number): void {
    this.timers.push(setInterval(() => void this.renewLeases(), heartbeatMs));
    this.timers.push(setInterval(() => void this.sweep(), sweepMs));
    for (const t of this.timers) t.unref();
  }

  stop(): void {
    for (const t of this.timers) clearInterval(t);
    this.timers = [];
  }

  /** Gives runs back to the queue (another process's, or this one's next start); failing that, the sweep will. */
  async giveBack(runIds: string[]): Promise<void> {
    await this.h.storage.queue
      .release(this.h.workerId, runIds)
      .catch((err) =>
        this.h.logger.error({ err, runs: runIds }, 'could not release runs; the sweeper will requeue them'),
      );
  }

  /** Renews the leases of this process's runs; a run whose lease went to another process stops here. */
  async renewLeases(): Promise<void> {
    const ids = [...this.h.active.keys()];
    if (!ids.length) return;
    try {
      const held = new Set(await this.h.storage.queue.heartbeat(this.h.workerId, ids, this.h.leaseMs));
      for (const id of ids) {
        const a = this.h.active.get(id);
        // The lease went to someone else (we were too slow): stop without writing a result.
        if (a && !held.has(id) && !a.cancel) {
          this.h.logger.warn({ run_id: id }, 'lease lost; stopping the run here');
          a.cancel = 'interrupt';
          a.controller.abort(new CancelledError('lease lost'));
        }
      }
    } catch (err) {
      this.h.logger.warn({ err }, 'heartbeat failed');
    }
  }

  private async sweptRunFinished(runId: string): Promise<void> {
    const run = await this.h.storage.runs.getById(runId).catch(() => null);
    if (!run || !TERMINAL_RUN_STATUSES.has(run.status)) return; // rolled back (deleted) or requeued since
    try {
      this.h.onRunFinished?.(run, { status: run.status as RunOutcome['status'], error: run.error });
    } catch (err) {
      this.h.logger.warn({ err, run_id: runId }, 'run-finished hook failed');
    }
  }

  /**
   * The safety sweep: own leases first, then dead workers' runs requeued or ended, missed cancels applied, and a
   * claim looked for (missed wake-ups).
   */
  async sweep(): Promise<void> {
    this.h.waiters.prune();
    try {
      // Our own runs' leases first: after the event loop was held up past a lease, this process's sweep must not
      // requeue a run it is still executing (another process's sweep may, and the heartbeat then stops it here).
      await this.renewLeases();
      const swept = await this.h.storage.queue.sweep(MAX_ATTEMPTS);
      if (swept.requeued.length || swept.failed.length) {
        this.h.logger.warn(swept, 'requeued or ended runs whose worker stopped responding');
      }
      // Runs this sweep ended (their worker is gone) get their run-finished notice here, once.
      if (this.h.onRunFinished) for (const id of swept.failed) void this.sweptRunFinished(id);
      const requests = await this.h.storage.queue.cancelRequests([...this.h.active.keys()]);
      for (const [id, action] of requests) this.h.cancelLocal(id, action);
    } catch (err) {
      this.h.logger.warn({ err }, 'safety sweep failed');
    }
    this.h.pump();
  }
}

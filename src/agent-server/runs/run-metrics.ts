// Run outcome metrics, observed where every outcome is written: a decorator on the run queue (the engine writes each
// claim and finish through it), so neither the engine nor the adapters know about metrics.
import { Counter, Histogram, Registry } from 'prom-client';
import type { EngineStorage, RunQueue } from '../storage/ports/run-queue.ts';
import type { Storage } from '../storage/types.ts';

export interface RunMetrics {
  registry: Registry;
}

const byStorage = new WeakMap<Storage, RunMetrics>();

/** The run metrics recorded through this storage, if it was instrumented. */
export function runMetricsOf(storage: Storage): RunMetrics | undefined {
  return byStorage.get(storage);
}

/** A storage whose run queue counts finished runs by status and times them from claim to finish. */
export function instrumentStorage(storage: EngineStorage): EngineStorage {
  const registry = new Registry();
  const finished = new Counter({
    name: 'agentplane_runs_finished_total',
    help: 'Runs finished by this process, by final status (rolled_back: cancelled with action rollback)',
    labelNames: ['status'],
    registers: [registry],
  });
  const duration = new Histogram({
    name: 'agentplane_run_duration_seconds',
    help: 'Time from a run being claimed by this process to its end, by final status',
    labelNames: ['status'],
    buckets: [0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 120, 300, 900, 3600],
    registers: [registry],
  });
  const claimedAt = new Map<string, number>();
  const ended = (runId: string, status: string) => {
    finished.inc({ status });
    const at = claimedAt.get(runId);
    claimedAt.delete(runId);
    if (at !== undefined) duration.observe({ status }, (performance.now() - at) / 1000);
  };
  const inner = storage.queue;
  const queue: RunQueue = Object.create(inner, {
    finishAndClaim: {
      value: async (...args: Parameters<RunQueue['finishAndClaim']>) => {
        const result = await inner.finishAndClaim(...args);
        if (result.finished) ended(args[0], args[2].status);
        else claimedAt.delete(args[0]);
        if (result.next) claimedAt.set(result.next.run_id, performance.now());
        return result;
      },
    },
    create: {
      value: async (...args: Parameters<RunQueue['create']>) => {
        const run = await inner.create(...args);
        // Claimed as it was created (RunEngine.createRun): it starts now, as a claimed run does.
        if (run.status === 'running') claimedAt.set(run.run_id, performance.now());
        return run;
      },
    },
    claim: {
      value: async (workerId: string, leaseMs: number) => {
        const run = await inner.claim(workerId, leaseMs);
        if (run) claimedAt.set(run.run_id, performance.now());
        return run;
      },
    },
    finish: {
      value: async (...args: Parameters<RunQueue['finish']>) => {
        const ok = await inner.finish(...args);
        if (ok) ended(args[0], args[2].status);
        else claimedAt.delete(args[0]);
        return ok;
      },
    },
    rollback: {
      value: async (...args: Parameters<RunQueue['rollback']>) => {
        await inner.rollback(...args);
        if (claimedAt.has(args[0])) ended(args[0], 'rolled_back');
      },
    },
    release: {
      value: async (...args: Parameters<RunQueue['release']>) => {
        await inner.release(...args);
        for (const id of args[1]) claimedAt.delete(id);
      },
    },
    sweep: {
      value: async (...args: Parameters<RunQueue['sweep']>) => {
        const swept = await inner.sweep(...args);
        // Runs of dead workers that ran out of attempts end in error here.
        if (swept.failed.length) finished.inc({ status: 'error' }, swept.failed.length);
        return swept;
      },
    },
  });
  const wrapped: EngineStorage = Object.create(storage, { queue: { value: queue, enumerable: true } });
  byStorage.set(wrapped, { registry });
  return wrapped;
}

// The controller loop: N workers take keys from the queue and reconcile them. Errors requeue with backoff;
// a result may ask to look again later (requeueAfter) — that is how builds and rollouts are observed.
import type { Logger } from '../../lib/logger.ts';
import { StaleResourceVersionError } from '../../state/errors.ts';
import type { WorkQueue } from './workqueue.ts';
import type { ControllerMetrics, ReconcileOutcome } from '../metrics.ts';

export type ReconcileResult = { requeueAfter?: number } | void;
export type Reconcile = (key: string) => Promise<ReconcileResult>;

export type ControllerOptions = {
  name: string;
  queue: WorkQueue;
  reconcile: Reconcile;
  workers?: number;
  logger: Logger;
  metrics?: ControllerMetrics;
};

export class Controller {
  private loops: Promise<void>[] = [];

  constructor(private readonly opts: ControllerOptions) {
    opts.metrics?.watchQueue(opts.name, () => opts.queue.length);
  }

  get queue(): WorkQueue {
    return this.opts.queue;
  }

  start(): void {
    const n = this.opts.workers ?? 2;
    for (let i = 0; i < n; i++) this.loops.push(this.worker());
  }

  /** Stops handing out keys and waits for reconciles in flight. */
  async stop(): Promise<void> {
    this.opts.queue.shutdown();
    await Promise.all(this.loops);
  }

  /** Processes one key; exported for tests that drive the loop step by step. */
  async processNext(): Promise<boolean> {
    const { queue, reconcile, name } = this.opts;
    const key = await queue.get();
    if (key === undefined) return false;
    const log = this.opts.logger.child({ controller: name, key });
    const started = performance.now();
    let outcome: ReconcileOutcome = 'success';
    try {
      const result = await reconcile(key);
      queue.forget(key);
      if (result && result.requeueAfter !== undefined) {
        outcome = 'requeue';
        queue.addAfter(key, result.requeueAfter);
      }
    } catch (err) {
      // A write refused because the copy read was stale (a cache that lags) is routine: the fresh copy is on its way.
      if (err instanceof StaleResourceVersionError) {
        outcome = 'stale';
        log.debug({ err }, 'read a stale copy; reconciling again');
      } else {
        outcome = 'error';
        log.warn({ err, attempt: queue.numRequeues(key) + 1 }, 'reconcile failed; retrying with backoff');
      }
      queue.addRateLimited(key);
    } finally {
      queue.done(key);
      this.opts.metrics?.reconciled(name, outcome, (performance.now() - started) / 1000);
    }
    return true;
  }

  private async worker(): Promise<void> {
    while (await this.processNext()) {
      // keep going until shutdown
    }
  }
}

// The controller loop: N workers take keys from the queue and reconcile them. Errors requeue with backoff;
// a result may ask to look again later (requeueAfter) — that is how builds and rollouts are observed.
import type { Logger } from '../../lib/logger.ts';
import { StaleResourceVersionError } from '../../state/errors.ts';
import type { WorkQueue } from './workqueue.ts';

export type ReconcileResult = { requeueAfter?: number } | void;
export type Reconcile = (key: string) => Promise<ReconcileResult>;

export type ControllerOptions = {
  name: string;
  queue: WorkQueue;
  reconcile: Reconcile;
  workers?: number;
  logger: Logger;
};

export class Controller {
  private loops: Promise<void>[] = [];

  constructor(private readonly opts: ControllerOptions) {}

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
    try {
      const result = await reconcile(key);
      queue.forget(key);
      if (result && result.requeueAfter !== undefined) queue.addAfter(key, result.requeueAfter);
    } catch (err) {
      // A write refused because the copy read was stale (a cache that lags) is routine: the fresh copy is on its way.
      if (err instanceof StaleResourceVersionError) log.debug({ err }, 'read a stale copy; reconciling again');
      else log.warn({ err, attempt: queue.numRequeues(key) + 1 }, 'reconcile failed; retrying with backoff');
      queue.addRateLimited(key);
    } finally {
      queue.done(key);
    }
    return true;
  }

  private async worker(): Promise<void> {
    while (await this.processNext()) {
      // keep going until shutdown
    }
  }
}

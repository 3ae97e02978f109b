// Queues items and writes them in batches, one write in flight at a time (so what one write makes visible comes
// in order), statements at least `spacingMs` apart: an idle process writes a lone item at once, a busy one lets the
// items of many event-loop turns share a statement. Used by both stream-event transports (Postgres, Redis).
export interface BatchWriterOptions<T> {
  /** Writes one batch; a rejection loses it (it is logged through onLost, and pending flushes reject). */
  write(batch: T[]): Promise<void>;
  onLost(err: Error, items: number): void;
  spacingMs: number;
  /**
   * Most items per write (default: no limit). A burst then goes out in several statements, each encoded in a bounded
   * stretch of the event loop, instead of one huge one that holds up everything else in the process (lease renewals).
   */
  maxBatch?: number;
}

export class BatchWriter<T> {
  private queue: T[] = [];
  private queued = 0;
  private written = 0;
  private writing = false;
  private scheduled = false;
  private lastWriteAt = -Infinity;
  private failures = 0;
  private lastError: Error | null = null;
  private readonly waiters: Array<{ upTo: number; failures: number; resolve(): void; reject(e: Error): void }> = [];

  constructor(private readonly opts: BatchWriterOptions<T>) {}

  push(item: T): void {
    this.queue.push(item);
    this.queued++;
    this.schedule();
  }

  /** Resolves once everything pushed so far is written; rejects if a write it waited for failed. */
  flush(): Promise<void> {
    const upTo = this.queued;
    if (this.written >= upTo) return Promise.resolve();
    return new Promise<void>((resolve, reject) => {
      this.waiters.push({ upTo, failures: this.failures, resolve, reject });
      this.schedule();
    });
  }

  private schedule(): void {
    if (this.scheduled || this.writing || !this.queue.length) return;
    this.scheduled = true;
    const go = () => {
      this.scheduled = false;
      void this.drain();
    };
    const wait = this.lastWriteAt + this.opts.spacingMs - performance.now();
    if (wait > 0) setTimeout(go, wait);
    else setImmediate(go);
  }

  private async drain(): Promise<void> {
    if (this.writing || !this.queue.length) return;
    this.writing = true;
    this.lastWriteAt = performance.now();
    const max = this.opts.maxBatch ?? Infinity;
    let batch: T[];
    if (this.queue.length <= max) {
      batch = this.queue;
      this.queue = [];
    } else batch = this.queue.splice(0, max);
    try {
      await this.opts.write(batch);
    } catch (err) {
      this.opts.onLost(err as Error, batch.length);
      this.failures++;
      this.lastError = err as Error;
    }
    this.written += batch.length;
    this.writing = false;
    for (let i = this.waiters.length - 1; i >= 0; i--) {
      const w = this.waiters[i]!;
      if (w.upTo > this.written) continue;
      this.waiters.splice(i, 1);
      if (this.failures !== w.failures) w.reject(this.lastError!);
      else w.resolve();
    }
    // What came while this write was in flight goes with the next one.
    this.schedule();
  }
}

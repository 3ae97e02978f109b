// A keyed work queue with the semantics of client-go's workqueue: a key waits at most once, is handed to one
// worker at a time, and is processed again after done() when it was re-added meanwhile. Written by hand because
// @kubernetes/client-node has informers but no queue.
import { realClock, type CancelTimer, type Clock } from './clock.ts';

export type BackoffOptions = { baseMs: number; maxMs: number };

export class WorkQueue {
  private readonly queue: string[] = [];
  /** Keys that need processing (waiting in `queue`, or re-added while being processed). */
  private readonly dirty = new Set<string>();
  private readonly processing = new Set<string>();
  private readonly waiters: ((key: string | undefined) => void)[] = [];
  private readonly delayed = new Map<string, { at: number; cancel: CancelTimer }>();
  private readonly failures = new Map<string, number>();
  private stopped = false;

  constructor(
    private readonly clock: Clock = realClock,
    private readonly backoff: BackoffOptions = { baseMs: 500, maxMs: 60_000 },
  ) {}

  get length(): number {
    return this.queue.length;
  }

  get shuttingDown(): boolean {
    return this.stopped;
  }

  add(key: string): void {
    if (this.stopped || this.dirty.has(key)) return;
    this.dirty.add(key);
    if (this.processing.has(key)) return; // done() puts it back
    const waiter = this.waiters.shift();
    if (waiter) {
      this.dirty.delete(key);
      this.processing.add(key);
      waiter(key);
    } else {
      this.queue.push(key);
    }
  }

  /** Adds the key after `ms`; an earlier pending schedule for the same key wins over a later one. */
  addAfter(key: string, ms: number): void {
    if (this.stopped) return;
    if (ms <= 0) {
      this.add(key);
      return;
    }
    const at = this.clock.now() + ms;
    const existing = this.delayed.get(key);
    if (existing && existing.at <= at) return;
    existing?.cancel();
    const cancel = this.clock.setTimer(() => {
      this.delayed.delete(key);
      this.add(key);
    }, ms);
    this.delayed.set(key, { at, cancel });
  }

  /** Requeues after an exponentially growing delay: base, 2·base, 4·base, ... capped at max. */
  addRateLimited(key: string): void {
    const n = (this.failures.get(key) ?? 0) + 1;
    this.failures.set(key, n);
    this.addAfter(key, this.backoffFor(n));
  }

  backoffFor(failures: number): number {
    return Math.min(this.backoff.baseMs * 2 ** Math.min(failures - 1, 30), this.backoff.maxMs);
  }

  numRequeues(key: string): number {
    return this.failures.get(key) ?? 0;
  }

  /** Clears the failure count after a success. */
  forget(key: string): void {
    this.failures.delete(key);
  }

  /** Next key to process, or undefined once the queue shuts down. */
  get(): Promise<string | undefined> {
    if (this.stopped) return Promise.resolve(undefined);
    const key = this.queue.shift();
    if (key !== undefined) {
      this.dirty.delete(key);
      this.processing.add(key);
      return Promise.resolve(key);
    }
    return new Promise((resolve) => this.waiters.push(resolve));
  }

  done(key: string): void {
    this.processing.delete(key);
    if (this.dirty.has(key)) {
      this.dirty.delete(key);
      this.add(key);
    }
  }

  shutdown(): void {
    this.stopped = true;
    for (const d of this.delayed.values()) d.cancel();
    this.delayed.clear();
    for (const w of this.waiters.splice(0)) w(undefined);
  }
}

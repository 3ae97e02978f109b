// An informer: list, then watch from the list's resourceVersion, keeping a local cache. It tells handlers only
// which object changed (handlers enqueue keys); reconcilers read the latest object themselves. Any watch error
// (including 410 Gone) leads to a fresh list, with backoff (reset once a watch delivers an event or bookmark); a
// normal close resumes the watch from the last version seen (bookmarks included); a resync period re-announces
// every cached object.
import type { Logger } from '../../lib/logger.ts';
import { realClock, type CancelTimer, type Clock } from './clock.ts';

export type ObjectMeta = { name: string; namespace?: string; resourceVersion?: string };
export type KubeObject = { metadata: ObjectMeta };

/** BOOKMARK carries only a newer resourceVersion (the object is empty but for it). */
export type WatchEvent<T> = { type: 'ADDED' | 'MODIFIED' | 'DELETED' | 'BOOKMARK'; object: T };

/** What an informer needs from a store or API server. */
export interface ListWatch<T extends KubeObject> {
  list(): Promise<{ items: T[]; resourceVersion: string }>;
  /**
   * Streams changes after `resourceVersion`. `onClose` is called once when the stream ends: with an error when
   * it broke or the version is too old (410), without one when the server closed it normally.
   * Resolves to a function that stops the stream (after which onClose is not called).
   */
  watch(
    resourceVersion: string,
    onEvent: (event: WatchEvent<T>) => void,
    onClose: (err?: unknown) => void,
  ): Promise<() => void>;
}

export function objectKey(obj: KubeObject): string {
  return `${obj.metadata.namespace ?? ''}/${obj.metadata.name}`;
}

/**
 * Whether `a` is an older version of the object than `b`. Resource versions are opaque strings to clients, but
 * both stores (etcd's revision, the embedded store's sequence) hand out increasing integers; anything else never
 * counts as older, so the copy last seen wins as before.
 */
function olderThan(a: KubeObject, b: KubeObject): boolean {
  const [x, y] = [a.metadata.resourceVersion ?? '', b.metadata.resourceVersion ?? ''];
  if (!/^\d{1,15}$/.test(x) || !/^\d{1,15}$/.test(y)) return false;
  return Number(x) < Number(y);
}

export function splitKey(key: string): { namespace: string; name: string } {
  const i = key.indexOf('/');
  return { namespace: key.slice(0, i), name: key.slice(i + 1) };
}

export type ChangeHandler<T> = (obj: T, event: 'added' | 'updated' | 'deleted' | 'resync') => void;

export type InformerOptions = {
  name: string;
  logger: Logger;
  clock?: Clock;
  /** Re-announce every cached object this often (0 = never). */
  resyncMs?: number;
  backoff?: { baseMs: number; maxMs: number };
};

export class Informer<T extends KubeObject> {
  private readonly cache = new Map<string, T>();
  private readonly handlers: ChangeHandler<T>[] = [];
  private readonly clock: Clock;
  private resourceVersion = '';
  private stopWatch: (() => void) | undefined;
  private resyncTimer: CancelTimer | undefined;
  private retryTimer: CancelTimer | undefined;
  private wakeRetry: (() => void) | undefined;
  private failures = 0;
  private stopped = false;
  private synced = false;
  private log: Logger;

  constructor(
    private readonly source: ListWatch<T>,
    private readonly opts: InformerOptions,
  ) {
    this.clock = opts.clock ?? realClock;
    this.log = opts.logger.child({ informer: opts.name });
  }

  onChange(handler: ChangeHandler<T>): void {
    this.handlers.push(handler);
  }

  get hasSynced(): boolean {
    return this.synced;
  }

  get(key: string): T | undefined {
    return this.cache.get(key);
  }

  list(): T[] {
    return [...this.cache.values()];
  }

  /**
   * Puts an object this process has just written into the cache (read your own writes): its watch event comes a
   * moment later, and a reconcile meanwhile must not act on the copy from before the write. Handlers are not called
   * (the watch event announces the change as usual); an older copy than the cached one is ignored.
   */
  observe(obj: T): void {
    const key = objectKey(obj);
    const cached = this.cache.get(key);
    if (cached && olderThan(obj, cached)) return;
    this.cache.set(key, obj);
  }

  /**
   * Drops an object this process has just deleted (its DELETED event comes a moment later): a reconcile meanwhile
   * must not find the deleted copy and take it for a live one.
   */
  forget(key: string): void {
    this.cache.delete(key);
  }

  /** Resolves after the first successful list (keeps retrying until then or until stop()). */
  async start(): Promise<void> {
    await this.relist();
    this.scheduleResync();
  }

  stop(): void {
    this.stopped = true;
    this.stopWatch?.();
    this.stopWatch = undefined;
    this.resyncTimer?.();
    this.retryTimer?.();
    this.wakeRetry?.();
  }

  private emit(obj: T, event: 'added' | 'updated' | 'deleted' | 'resync'): void {
    for (const h of this.handlers) h(obj, event);
  }

  private async relist(): Promise<void> {
    while (!this.stopped) {
      try {
        const { items, resourceVersion } = await this.source.list();
        this.replace(items);
        this.resourceVersion = resourceVersion;
        this.synced = true;
        // The backoff is reset only once the watch delivers something: a watch failing at once keeps backing off.
        await this.startWatch();
        return;
      } catch (err) {
        this.failures++;
        const delay = this.retryDelay();
        this.log.warn({ err, retryInMs: delay }, 'list failed; retrying');
        await new Promise<void>((resolve) => {
          this.wakeRetry = resolve;
          this.retryTimer = this.clock.setTimer(resolve, delay);
        });
      }
    }
  }

  private retryDelay(): number {
    const { baseMs, maxMs } = this.opts.backoff ?? { baseMs: 200, maxMs: 30_000 };
    return Math.min(baseMs * 2 ** Math.min(this.failures - 1, 20), maxMs);
  }

  /** Replaces the cache with a fresh list, announcing what was added, changed or removed meanwhile. */
  private replace(items: T[]): void {
    const seen = new Set<string>();
    for (const obj of items) {
      const key = objectKey(obj);
      seen.add(key);
      const old = this.cache.get(key);
      if (old && olderThan(obj, old)) continue; // written by this process after the list was taken
      this.cache.set(key, obj);
      if (!old) this.emit(obj, 'added');
      else if (old.metadata.resourceVersion !== obj.metadata.resourceVersion) this.emit(obj, 'updated');
    }
    for (const [key, old] of this.cache) {
      if (!seen.has(key)) {
        this.cache.delete(key);
        this.emit(old, 'deleted');
      }
    }
  }

  private async startWatch(): Promise<void> {
    let closed = false;
    const stop = await this.source.watch(
      this.resourceVersion,
      (event) => {
        if (closed) return;
        this.apply(event);
      },
      (err) => {
        if (closed || this.stopped) return;
        closed = true;
        this.stopWatch = undefined;
        if (err) {
          this.log.info({ err: String(err) }, 'watch ended with an error; relisting');
          this.failures++;
          this.retryTimer = this.clock.setTimer(() => void this.relist(), this.retryDelay());
        } else {
          // A normal close (server timeout): resume from where we were.
          void this.startWatch().catch(() => this.relist());
        }
      },
    );
    if (this.stopped) stop();
    else
      this.stopWatch = () => {
        closed = true;
        stop();
      };
  }

  private apply(event: WatchEvent<T>): void {
    this.failures = 0;
    const key = objectKey(event.object);
    if (event.object.metadata.resourceVersion) this.resourceVersion = event.object.metadata.resourceVersion;
    if (event.type === 'BOOKMARK') return;
    if (event.type === 'DELETED') {
      this.cache.delete(key);
      this.emit(event.object, 'deleted');
      return;
    }
    const had = this.cache.get(key);
    // An event from before a write this process already put in the cache (observe): the newer copy stays.
    if (had && olderThan(event.object, had)) return;
    this.cache.set(key, event.object);
    this.emit(event.object, had ? 'updated' : 'added');
  }

  private scheduleResync(): void {
    const ms = this.opts.resyncMs ?? 0;
    if (!ms || this.stopped) return;
    this.resyncTimer = this.clock.setTimer(() => {
      for (const obj of this.cache.values()) this.emit(obj, 'resync');
      this.scheduleResync();
    }, ms);
  }
}

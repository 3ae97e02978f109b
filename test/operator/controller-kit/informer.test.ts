import { describe, expect, it } from 'vitest';
import { FakeClock } from '../../../src/operator/controller-kit/clock.ts';
import { Informer, type ListWatch, type WatchEvent } from '../../../src/operator/controller-kit/informer.ts';
import { silentLogger } from '../../../src/lib/logger.ts';

type Obj = { metadata: { name: string; namespace: string; resourceVersion: string }; v: number };

/** An in-memory list/watch source whose watches the test can break. */
class Source implements ListWatch<Obj> {
  objects = new Map<string, Obj>();
  rv = 0;
  lists = 0;
  watchFrom: string[] = [];
  private subs = new Set<{ onEvent: (e: WatchEvent<Obj>) => void; onClose: (err?: unknown) => void }>();

  put(name: string, v: number, notify = true): void {
    const type = this.objects.has(name) ? 'MODIFIED' : 'ADDED';
    const obj = { metadata: { name, namespace: 'ns', resourceVersion: String(++this.rv) }, v };
    this.objects.set(name, obj);
    if (notify) for (const s of this.subs) s.onEvent({ type, object: obj });
  }
  remove(name: string, notify = true): void {
    const obj = this.objects.get(name)!;
    this.objects.delete(name);
    if (notify) for (const s of this.subs) s.onEvent({ type: 'DELETED', object: obj });
  }
  breakWatches(err?: unknown): void {
    for (const s of [...this.subs]) {
      this.subs.delete(s);
      s.onClose(err);
    }
  }
  async list() {
    this.lists++;
    return { items: [...this.objects.values()], resourceVersion: String(this.rv) };
  }
  async watch(rv: string, onEvent: (e: WatchEvent<Obj>) => void, onClose: (err?: unknown) => void) {
    this.watchFrom.push(rv);
    const sub = { onEvent, onClose };
    this.subs.add(sub);
    return () => void this.subs.delete(sub);
  }
}

const flush = () => new Promise((r) => setImmediate(r));

describe('Informer', () => {
  it('lists, then follows the watch; handlers hear about every change and the cache is current', async () => {
    const src = new Source();
    src.put('a', 1);
    const informer = new Informer(src, { name: 't', logger: silentLogger(), clock: new FakeClock() });
    const seen: string[] = [];
    informer.onChange((o, e) => seen.push(`${e}:${o.metadata.name}`));
    await informer.start();
    expect(informer.hasSynced).toBe(true);
    src.put('b', 1);
    src.put('a', 2);
    src.remove('b');
    expect(seen).toEqual(['added:a', 'added:b', 'updated:a', 'deleted:b']);
    expect(informer.get('ns/a')?.v).toBe(2);
    expect(informer.get('ns/b')).toBeUndefined();
    informer.stop();
  });

  it('reads its own writes: an observed write is cached at once, and older events or lists do not undo it', async () => {
    const src = new Source();
    src.put('a', 1);
    const clock = new FakeClock();
    const informer = new Informer(src, {
      name: 't',
      logger: silentLogger(),
      clock,
      backoff: { baseMs: 10, maxMs: 10 },
    });
    const seen: string[] = [];
    informer.onChange((o, e) => seen.push(`${e}:${o.metadata.name}:${o.v}`));
    await informer.start();
    // This process writes v=3 (rv 3) while another write (v=2, rv 2) is still on its way to the watch.
    src.put('a', 2, false);
    src.put('a', 3, false);
    informer.observe(src.objects.get('a')!);
    expect(informer.get('ns/a')?.v).toBe(3);
    // The late event for rv 2 does not put the older copy back; the event for our own write announces it as usual.
    const [older, ours] = [{ ...src.objects.get('a')!, v: 2 }, src.objects.get('a')!];
    older.metadata = { ...older.metadata, resourceVersion: '2' };
    (informer as unknown as { apply(e: WatchEvent<Obj>): void }).apply({ type: 'MODIFIED', object: older });
    expect(informer.get('ns/a')?.v).toBe(3);
    (informer as unknown as { apply(e: WatchEvent<Obj>): void }).apply({ type: 'MODIFIED', object: ours });
    expect(seen).toEqual(['added:a:1', 'updated:a:3']);
    // Observing a copy older than the cached one changes nothing.
    informer.observe(older);
    expect(informer.get('ns/a')?.v).toBe(3);
    informer.stop();
  });

  it('after a watch error (e.g. 410 Gone) it relists and reports what changed while it was blind', async () => {
    const src = new Source();
    src.put('a', 1);
    src.put('b', 1);
    const clock = new FakeClock();
    const informer = new Informer(src, {
      name: 't',
      logger: silentLogger(),
      clock,
      backoff: { baseMs: 10, maxMs: 10 },
    });
    const seen: string[] = [];
    await informer.start();
    informer.onChange((o, e) => seen.push(`${e}:${o.metadata.name}`));
    src.breakWatches(Object.assign(new Error('Gone'), { code: 410 }));
    src.put('a', 2, false);
    src.remove('b', false);
    src.put('c', 1, false);
    clock.advance(10);
    await flush();
    expect(src.lists).toBe(2);
    expect(seen.sort()).toEqual(['added:c', 'deleted:b', 'updated:a']);
    expect(
      informer
        .list()
        .map((o) => o.metadata.name)
        .sort(),
    ).toEqual(['a', 'c']);
    src.put('d', 1);
    expect(informer.get('ns/d')).toBeDefined();
    informer.stop();
  });

  it('resumes the watch from the last seen resourceVersion after a normal close', async () => {
    const src = new Source();
    const informer = new Informer(src, { name: 't', logger: silentLogger(), clock: new FakeClock() });
    await informer.start();
    src.put('a', 1);
    src.breakWatches();
    await flush();
    expect(src.lists).toBe(1);
    expect(src.watchFrom).toEqual(['0', '1']);
    informer.stop();
  });

  it('keeps backing off while each new watch fails at once, and resets once a watch delivers', async () => {
    const src = new Source();
    src.put('a', 1);
    const clock = new FakeClock();
    const informer = new Informer(src, {
      name: 't',
      logger: silentLogger(),
      clock,
      backoff: { baseMs: 100, maxMs: 10_000 },
    });
    await informer.start();
    // Three failures in a row, each right after the relist: 100, 200, 400 ms.
    for (const delay of [100, 200, 400]) {
      src.breakWatches(new Error('connection reset'));
      const lists = src.lists;
      clock.advance(delay - 1);
      await flush();
      expect(src.lists, `not before ${delay} ms`).toBe(lists);
      clock.advance(1);
      await flush();
      expect(src.lists).toBe(lists + 1);
    }
    // This watch delivers an event: the next failure starts from the base delay again.
    src.put('a', 2);
    src.breakWatches(new Error('connection reset'));
    const lists = src.lists;
    clock.advance(100);
    await flush();
    expect(src.lists).toBe(lists + 1);
    informer.stop();
  });

  it('re-announces every cached object each resync period', async () => {
    const src = new Source();
    src.put('a', 1);
    src.put('b', 1);
    const clock = new FakeClock();
    const informer = new Informer(src, { name: 't', logger: silentLogger(), clock, resyncMs: 1000 });
    await informer.start();
    const seen: string[] = [];
    informer.onChange((o, e) => seen.push(`${e}:${o.metadata.name}`));
    clock.advance(999);
    expect(seen).toEqual([]);
    clock.advance(1);
    expect(seen.sort()).toEqual(['resync:a', 'resync:b']);
    clock.advance(1000);
    expect(seen).toHaveLength(4);
    informer.stop();
    clock.advance(5000);
    expect(seen).toHaveLength(4);
  });
});

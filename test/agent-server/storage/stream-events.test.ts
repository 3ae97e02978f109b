// The stream-event log of both stores, one contract: ids strictly increasing across runs, reads from any point
// (by run and by thread), writes readable after flush, wake-ups for watchers (on Postgres also across two
// stores sharing the database, as two replicas do), retention sweeps, and the embedded store's memory bound.
// The same contract runs on Redis Streams (--redis-url): two stores on one Redis, as two replicas are.
import { mkdtempSync, rmSync } from 'node:fs';
import { randomUUID } from 'node:crypto';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { openEmbeddedStorage } from '../../../src/agent-server/storage/embedded/index.ts';
import { embeddedStreamEvents } from '../../../src/agent-server/storage/embedded/stream-events.ts';
import { openPostgresStorage } from '../../../src/agent-server/storage/postgres/index.ts';
import { redisStreamEvents } from '../../../src/agent-server/storage/redis/stream-events.ts';
import type { StoredStreamEvent, StreamEventStore } from '../../../src/agent-server/storage/types.ts';
import { redisSkipReason, testRedisUrl } from '../../support/redis.ts';
import { createTestDatabase } from '../helpers/pg.ts';

const redisUrl = await testRedisUrl();
if (!redisUrl) console.warn(`[stream-events] Redis tests skipped: ${redisSkipReason}`);

const cleanups: Array<() => Promise<void>> = [];
afterAll(async () => {
  for (const c of cleanups.reverse()) await c();
});

type Kind = 'embedded' | 'postgres' | 'redis';
type Side = { streams: StreamEventStore };

async function open(kind: Kind, retentionMs = 600_000): Promise<{ a: Side; b: Side }> {
  if (kind === 'redis') {
    const prefix = `ap-test-${randomUUID()}:`;
    const a = await redisStreamEvents({ url: redisUrl!, retentionMs, prefix });
    const b = await redisStreamEvents({ url: redisUrl!, retentionMs, prefix });
    cleanups.push(async () => {
      await a.close();
      await b.close();
    });
    return { a: { streams: a }, b: { streams: b } };
  }
  if (kind === 'embedded') {
    const dir = mkdtempSync(join(tmpdir(), 'ap-se-'));
    const a = openEmbeddedStorage({ dataDir: dir, streamRetentionMs: retentionMs });
    cleanups.push(async () => {
      await a.close();
      rmSync(dir, { recursive: true, force: true });
    });
    return { a, b: a };
  }
  const db = await createTestDatabase();
  const a = await openPostgresStorage({ databaseUrl: db.url, poolSize: 4, streamRetentionMs: retentionMs });
  const b = await openPostgresStorage({ databaseUrl: db.url, poolSize: 4, streamRetentionMs: retentionMs });
  cleanups.push(async () => {
    await a.close();
    await b.close();
    await db.drop();
  });
  return { a, b };
}

const kinds: Kind[] = redisUrl ? ['embedded', 'postgres', 'redis'] : ['embedded', 'postgres'];

describe.each(kinds)('stream events (%s)', (kind) => {
  it('orders events with strictly increasing ids, reads from any point by run and by thread, on every store of the database', async () => {
    const { a, b } = await open(kind);
    const thread = randomUUID();
    const [r1, r2] = [randomUUID(), randomUUID()];
    for (let i = 0; i < 1_200; i++) a.streams.append(r1, thread, 'custom', JSON.stringify({ i }));
    await a.streams.flush();
    for (let i = 0; i < 5; i++) a.streams.append(r2, thread, 'values', JSON.stringify({ j: i }));
    await a.streams.flush();
    for (const s of [a, b]) {
      const all: StoredStreamEvent[] = [];
      for (let after = -1; ;) {
        const page = await s.streams.read(r1, after, 500);
        if (!page.length) break;
        all.push(...page);
        after = page.at(-1)!.id;
      }
      expect(all.map((e) => JSON.parse(e.data).i)).toEqual([...Array(1_200).keys()]);
      expect(all.every((e, i) => i === 0 || e.id > all[i - 1]!.id)).toBe(true);
      const from = await s.streams.read(r1, all[700]!.id, 10);
      expect(from.map((e) => e.id)).toEqual(all.slice(701, 711).map((e) => e.id));
      const byThread = await s.streams.readThread(thread, all.at(-2)!.id, 100);
      expect(byThread.map((e) => [e.run_id, e.event])).toEqual([[r1, 'custom'], ...Array(5).fill([r2, 'values'])]);
      expect(await s.streams.lastId()).toBeGreaterThanOrEqual(byThread.at(-1)!.id);
    }
  });

  it('wakes watchers of the run and of its thread when events are written (from another store too)', async () => {
    const { a, b } = await open(kind);
    const thread = randomUUID();
    const run = randomUUID();
    let runWakes = 0;
    let threadWakes = 0;
    const stop1 = b.streams.watch({ run_id: run }, () => runWakes++);
    const stop2 = b.streams.watch({ thread_id: thread }, () => threadWakes++);
    a.streams.append(run, thread, 'custom', '1');
    await a.streams.flush();
    await expect.poll(() => runWakes > 0 && threadWakes > 0, { timeout: 10_000 }).toBe(true);
    // What woke the watcher is readable there.
    expect((await b.streams.read(run, -1, 10)).map((e) => e.data)).toEqual(['1']);
    a.streams.append(run, thread, 'custom', '2');
    await a.streams.flush();
    await expect
      .poll(async () => (await b.streams.read(run, -1, 10)).map((e) => e.data), { timeout: 10_000 })
      .toEqual(['1', '2']);
    stop1();
    stop2();
  });

  it('sweeps the events of runs whose last event is older than the retention', async () => {
    const { a } = await open(kind, 1_000);
    const thread = randomUUID();
    const run = randomUUID();
    a.streams.append(run, thread, 'custom', '1');
    await a.streams.flush();
    await new Promise((r) => setTimeout(r, 1_500));
    const fresh = randomUUID();
    a.streams.append(fresh, thread, 'custom', '2');
    await a.streams.flush();
    await a.streams.sweep();
    expect(await a.streams.read(run, -1, 10, true)).toEqual([]);
    expect((await a.streams.read(fresh, -1, 10, true)).map((e) => e.data)).toEqual(['2']);
  });
});

describe('embedded stream events memory bound', () => {
  it('drops the logs of the least recently written runs past the byte bound', async () => {
    const s = embeddedStreamEvents({ retentionMs: 600_000, maxBytes: 10_000 });
    const runs = Array.from({ length: 5 }, () => randomUUID());
    for (const r of runs) for (let i = 0; i < 10; i++) s.append(r, 't', 'custom', 'x'.repeat(300));
    // 5 runs x 3000 B against 10 000 B: the oldest two are gone, the newest three are whole.
    const counts = await Promise.all(runs.map(async (r) => (await s.read(r, -1, 100)).length));
    expect(counts).toEqual([0, 0, 10, 10, 10]);
    await s.close();
  });
});

describe.skipIf(!redisUrl)('redis stream events: an unreachable Redis', () => {
  it('refuses to open (no store that silently drops events), and keeps no connection retrying', async () => {
    const net = await import('node:net');
    // A port nothing listens on: taken and released.
    const port = await new Promise<number>((resolve) => {
      const s = net.createServer().listen(0, '127.0.0.1', () => {
        const p = (s.address() as { port: number }).port;
        s.close(() => resolve(p));
      });
    });
    const handlesBefore = process.getActiveResourcesInfo().filter((r) => r === 'TCPSocketWrap').length;
    await expect(redisStreamEvents({ url: `redis://127.0.0.1:${port}`, retentionMs: 1_000 })).rejects.toThrow(
      /ECONNREFUSED/,
    );
    await new Promise((r) => setTimeout(r, 500));
    expect(process.getActiveResourcesInfo().filter((r) => r === 'TCPSocketWrap').length).toBeLessThanOrEqual(
      handlesBefore,
    );
  });
});

// BatchWriter: one write in flight, items of a busy stretch share a write, flushes wait for what came before them
// and reject when a write they waited for failed.
import { describe, expect, it } from 'vitest';
import { BatchWriter } from '../../../src/agent-server/storage/batch-writer.ts';

function recorder(spacingMs: number, fail?: (batch: number[]) => boolean, maxBatch?: number) {
  const batches: number[][] = [];
  let inFlight = 0;
  let maxInFlight = 0;
  const lost: number[] = [];
  const writer = new BatchWriter<number>({
    spacingMs,
    ...(maxBatch ? { maxBatch } : {}),
    write: async (batch) => {
      inFlight++;
      maxInFlight = Math.max(maxInFlight, inFlight);
      await new Promise((r) => setTimeout(r, 2));
      inFlight--;
      if (fail?.(batch)) throw new Error(`write of ${batch.join(',')} failed`);
      batches.push(batch);
    },
    onLost: (_err, n) => lost.push(n),
  });
  return { writer, batches, lost, maxInFlight: () => maxInFlight };
}

describe('BatchWriter', () => {
  it('writes a lone item at once and keeps one write in flight, in order', async () => {
    const r = recorder(0);
    for (let i = 0; i < 50; i++) {
      r.writer.push(i);
      if (i % 7 === 0) await new Promise((res) => setImmediate(res));
    }
    await r.writer.flush();
    expect(r.batches.flat()).toEqual(Array.from({ length: 50 }, (_, i) => i));
    expect(r.maxInFlight()).toBe(1);
  });

  it('splits a burst into writes of at most maxBatch items, in order, and a flush waits for all of them', async () => {
    const r = recorder(0, undefined, 4);
    for (let i = 0; i < 10; i++) r.writer.push(i);
    await r.writer.flush();
    expect(r.batches).toEqual([
      [0, 1, 2, 3],
      [4, 5, 6, 7],
      [8, 9],
    ]);
    expect(r.maxInFlight()).toBe(1);
  });

  it('lets items pushed within the spacing share one write', async () => {
    const r = recorder(1_000);
    r.writer.push(0);
    await r.writer.flush(); // the first goes at once
    // Each in its own event-loop turn, each after the previous write ended: without the spacing, five writes.
    for (let i = 1; i <= 5; i++) {
      r.writer.push(i);
      await new Promise((res) => setTimeout(res, 5));
    }
    await r.writer.flush();
    expect(r.batches).toEqual([[0], [1, 2, 3, 4, 5]]);
  });

  it('rejects a flush whose items were lost, and later flushes resolve again', async () => {
    const r = recorder(0, (batch) => batch.includes(13));
    r.writer.push(13);
    await expect(r.writer.flush()).rejects.toThrow('write of 13 failed');
    expect(r.lost).toEqual([1]);
    r.writer.push(14);
    await expect(r.writer.flush()).resolves.toBeUndefined();
    expect(r.batches).toEqual([[14]]);
    // Nothing pending: resolves at once.
    await expect(r.writer.flush()).resolves.toBeUndefined();
  });
});

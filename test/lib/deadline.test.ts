// withDeadline: a parent signal plus a deadline that a garbage collection cannot lose.
import { expect, it } from 'vitest';
import { withDeadline } from '../../src/lib/deadline.ts';
import { fullGc as gc } from '../support/gc.ts';

const aborted = (signal: AbortSignal, withinMs: number) =>
  new Promise<unknown>((resolve, reject) => {
    const t = setTimeout(() => reject(new Error(`not aborted within ${withinMs} ms`)), withinMs);
    signal.addEventListener('abort', () => {
      clearTimeout(t);
      resolve(signal.reason);
    });
  });

it('fires its deadline after a full garbage collection (AbortSignal.any over AbortSignal.timeout does not on Node 20)', async () => {
  const parent = new AbortController();
  const { signal } = withDeadline(300, parent.signal);
  const reason = aborted(signal, 3000);
  gc();
  await new Promise((r) => setTimeout(r, 50));
  gc();
  const r = await reason;
  expect(r).toBeInstanceOf(DOMException);
  expect((r as DOMException).name).toBe('TimeoutError');
});

it("aborts with the parent's reason, at once when the parent already is", async () => {
  const parent = new AbortController();
  const { signal } = withDeadline(60_000, parent.signal);
  const reason = aborted(signal, 3000);
  parent.abort(new Error('stopped'));
  expect(((await reason) as Error).message).toBe('stopped');

  const gone = AbortSignal.abort(new Error('already'));
  const early = withDeadline(60_000, gone);
  expect(early.signal.aborted).toBe(true);
  expect((early.signal.reason as Error).message).toBe('already');
});

it('after clear() neither the deadline nor the parent aborts it', async () => {
  const parent = new AbortController();
  const d = withDeadline(100, parent.signal);
  d.clear();
  await new Promise((r) => setTimeout(r, 250));
  parent.abort();
  expect(d.signal.aborted).toBe(false);
});

it('works without a parent', async () => {
  const { signal } = withDeadline(50);
  expect(((await aborted(signal, 3000)) as DOMException).name).toBe('TimeoutError');
});

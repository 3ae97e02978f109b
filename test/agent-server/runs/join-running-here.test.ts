// A join of a run that executes in this process takes its record from the engine instead of reading it: it still
// answers the run's final values. A run that has ended is read once, with its thread's values in the same read (no
// second read of the thread), and those are the thread's values now (a state update after the run shows). A run
// asked for on another thread is a 404 whether it runs here or has ended.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startHarness, type Harness } from '../helpers/harness.ts';

/** Counts the store's reads of runs (by run id) and of threads (by thread id) that a harness makes from now on. */
function countReads(h: Harness): { runs: string[]; threads: string[] } {
  const seen = { runs: [] as string[], threads: [] as string[] };
  const runs = h.storage.runs;
  const get = runs.get.bind(runs);
  runs.get = async (threadId, runId) => {
    seen.runs.push(runId);
    return get(threadId, runId);
  };
  const withValues = runs.getWithValues.bind(runs);
  runs.getWithValues = async (threadId, runId) => {
    seen.runs.push(runId);
    return withValues(threadId, runId);
  };
  const thread = h.storage.threads.get.bind(h.storage.threads);
  h.storage.threads.get = async (id) => {
    seen.threads.push(id);
    return thread(id);
  };
  return seen;
}

describe.each(['embedded', 'postgres'] as const)('join of a run executing here (%s)', (store) => {
  let h: Harness;
  let seen: { runs: string[]; threads: string[] };
  beforeAll(async () => {
    h = await startHarness({ store });
    seen = countReads(h);
  });
  afterAll(async () => h?.close());

  const readsOf = (runId: string) => seen.runs.filter((r) => r === runId).length;

  it('answers the final values without reading the run, then reads a finished one', async () => {
    const t = (await h.call('POST', '/threads', {})).body.thread_id as string;
    const other = (await h.call('POST', '/threads', {})).body.thread_id as string;
    const created = await h.call('POST', `/threads/${t}/runs`, {
      assistant_id: 'slow',
      input: { delay_ms: 400, mark: 'j' },
    });
    expect(created.status).toBe(200);
    const runId = created.body.run_id as string;
    expect(h.engine.runningHere(t, runId)).toBeDefined();

    // On another thread: 404, as for any run not on it.
    const wrong = await h.call('GET', `/threads/${other}/runs/${runId}/join`);
    expect(wrong.status).toBe(404);

    const before = readsOf(runId);
    const joined = await h.call('GET', `/threads/${t}/runs/${runId}/join`);
    expect(joined.status).toBe(200);
    expect(joined.body).toEqual({ marks: ['start:j', 'done:j'], delay_ms: 400, mark: 'j' });
    expect(readsOf(runId) - before).toBe(0);

    // Finished: no longer running here, so the join reads it, with the thread's values in the same read.
    expect(h.engine.runningHere(t, runId)).toBeUndefined();
    const threadReadsBefore = seen.threads.length;
    const again = await h.call('GET', `/threads/${t}/runs/${runId}/join`);
    expect(again.body).toEqual(joined.body);
    expect(readsOf(runId) - before).toBe(1);
    expect(seen.threads.length - threadReadsBefore).toBe(0);
    expect((await h.call('GET', `/threads/${t}/runs/${runId}`)).body.status).toBe('success');

    // Ended, on another thread: 404 as well.
    expect((await h.call('GET', `/threads/${other}/runs/${runId}/join`)).status).toBe(404);
    expect((await h.call('GET', `/threads/${t}/runs/00000000-0000-4000-8000-000000000000/join`)).status).toBe(404);
  });

  it('a join of an ended run answers the thread values of now, its error, or an interrupted run values', async () => {
    const t = (await h.call('POST', '/threads', {})).body.thread_id as string;
    const runId = (await h.call('POST', `/threads/${t}/runs`, { assistant_id: 'counter', input: { count: 0 } })).body
      .run_id as string;
    const first = (await h.call('GET', `/threads/${t}/runs/${runId}/join`)).body;
    expect(first).toEqual({ count: 11, steps: ['first', 'second'] });
    // The thread changes after the run: a later join of the run shows the thread as it is now.
    const upd = await h.call('POST', `/threads/${t}/state`, { values: { count: 100 }, as_node: 'first' });
    expect(upd.status).toBe(200);
    const now = (await h.call('GET', `/threads/${t}/state`)).body.values;
    expect(now.count).toBe(111);
    expect((await h.call('GET', `/threads/${t}/runs/${runId}/join`)).body).toEqual(now);

    const failed = (await h.call('POST', '/threads', {})).body.thread_id as string;
    const failRun = (await h.call('POST', `/threads/${failed}/runs`, { assistant_id: 'fail', input: { x: 1 } })).body
      .run_id as string;
    await h.call('GET', `/threads/${failed}/runs/${failRun}/join`);
    const failedJoin = await h.call('GET', `/threads/${failed}/runs/${failRun}/join`);
    expect(failedJoin.body).toEqual({
      __error__: { error: 'FixtureFailure', message: 'the fixture graph failed on purpose' },
    });

    const paused = (await h.call('POST', '/threads', {})).body.thread_id as string;
    const pausedRun = (
      await h.call('POST', `/threads/${paused}/runs`, {
        assistant_id: 'counter',
        input: { count: 0 },
        interrupt_after: ['first'],
      })
    ).body.run_id as string;
    const pausedFirst = (await h.call('GET', `/threads/${paused}/runs/${pausedRun}/join`)).body;
    expect((await h.call('GET', `/threads/${paused}/runs/${pausedRun}/join`)).body).toEqual(pausedFirst);
    expect(pausedFirst).toEqual((await h.call('GET', `/threads/${paused}/state`)).body.values);
  });
});

// A run created through this process that waits in the queue (no free slot) is known to exist until its run_done:
// a join takes it without a read and still answers its values once it has run; one that was deleted or interrupted
// while queued is not taken for existing (404 / its end), and another thread's join of it is a 404.
describe.each(['embedded', 'postgres'] as const)('join of a run queued here (%s)', (store) => {
  let h: Harness;
  let seen: { runs: string[]; threads: string[] };
  beforeAll(async () => {
    h = await startHarness({ store, concurrency: 1 });
    seen = countReads(h);
  });
  afterAll(async () => h?.close());

  const readsOf = (runId: string) => seen.runs.filter((r) => r === runId).length;
  const newThread = async () => (await h.call('POST', '/threads', {})).body.thread_id as string;
  /** A slow run holding the only slot, and a run created behind it (queued). */
  async function queuedBehindSlow(input: Record<string, unknown>) {
    const busy = await newThread();
    const slow = (await h.call('POST', `/threads/${busy}/runs`, { assistant_id: 'slow', input: { delay_ms: 600 } }))
      .body.run_id as string;
    const t = await newThread();
    const created = await h.call('POST', `/threads/${t}/runs`, { assistant_id: 'counter', input });
    expect(created.status).toBe(200);
    expect(created.body.status).toBe('pending');
    return { busy, slow, t, runId: created.body.run_id as string };
  }

  it('a join of a queued run does not read it and answers its values once it has run', async () => {
    const { busy, slow, t, runId } = await queuedBehindSlow({ count: 1 });
    expect(h.engine.runningHere(t, runId)).toBeUndefined();
    // Known without its input: a queued run's kwargs (a client's input, up to the body limit) are not held.
    expect(h.engine.queuedHere(t, runId)?.kwargs).toEqual({});
    // Another thread's join of it: a 404, as for any run not on that thread.
    expect((await h.call('GET', `/threads/${busy}/runs/${runId}/join`)).status).toBe(404);
    const before = readsOf(runId);
    const joined = await h.call('GET', `/threads/${t}/runs/${runId}/join`);
    expect(joined.status).toBe(200);
    expect(joined.body).toEqual({ count: 12, steps: ['first', 'second'] });
    expect(readsOf(runId) - before).toBe(0);
    expect(h.engine.queuedHere(t, runId)).toBeUndefined();
    await h.call('GET', `/threads/${busy}/runs/${slow}/join`);
  });

  it('a queued run deleted before the join is a 404; one interrupted while queued ends the join', async () => {
    const { busy, slow, t, runId } = await queuedBehindSlow({ count: 2 });
    expect((await h.call('DELETE', `/threads/${t}/runs/${runId}`)).status).toBe(204);
    expect(h.engine.queuedHere(t, runId)).toBeUndefined();
    expect((await h.call('GET', `/threads/${t}/runs/${runId}/join`)).status).toBe(404);

    const t2 = await newThread();
    const queued = (await h.call('POST', `/threads/${t2}/runs`, { assistant_id: 'counter', input: { count: 3 } })).body
      .run_id as string;
    expect(h.engine.queuedHere(t2, queued)).toBeDefined();
    expect((await h.call('POST', `/threads/${t2}/runs/${queued}/cancel`)).status).toBeLessThan(300);
    expect(h.engine.queuedHere(t2, queued)).toBeUndefined();
    const joined = await h.call('GET', `/threads/${t2}/runs/${queued}/join`);
    expect(joined.status).toBe(200);
    expect((await h.call('GET', `/threads/${t2}/runs/${queued}`)).body.status).toBe('interrupted');

    // The thread of a queued run deleted: its run is gone too.
    const t3 = await newThread();
    const gone = (await h.call('POST', `/threads/${t3}/runs`, { assistant_id: 'counter', input: { count: 4 } })).body
      .run_id as string;
    expect(h.engine.queuedHere(t3, gone)).toBeDefined();
    expect((await h.call('DELETE', `/threads/${t3}`)).status).toBe(204);
    expect(h.engine.queuedHere(t3, gone)).toBeUndefined();
    expect((await h.call('GET', `/threads/${t3}/runs/${gone}/join`)).status).toBe(404);
    await h.call('GET', `/threads/${busy}/runs/${slow}/join`);
  });
});

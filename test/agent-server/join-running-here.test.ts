// A join of a run that executes in this process takes its record from the engine instead of reading it: it still
// answers the run's final values, a finished run is read as before, and a run asked for on another thread is a 404
// whether or not it runs here.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startHarness, type Harness } from './helpers/harness.ts';

describe.each(['embedded', 'postgres'] as const)('join of a run executing here (%s)', (store) => {
  let h: Harness;
  const reads: string[] = [];
  beforeAll(async () => {
    h = await startHarness({ store });
    const inner = h.storage.runs.get.bind(h.storage.runs);
    h.storage.runs.get = async (threadId, runId) => {
      reads.push(runId);
      return inner(threadId, runId);
    };
  });
  afterAll(async () => h?.close());

  const readsOf = (runId: string) => reads.filter((r) => r === runId).length;

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

    // Finished: no longer running here, so the join reads it.
    expect(h.engine.runningHere(t, runId)).toBeUndefined();
    const again = await h.call('GET', `/threads/${t}/runs/${runId}/join`);
    expect(again.body).toEqual(joined.body);
    expect(readsOf(runId) - before).toBe(1);
    expect((await h.call('GET', `/threads/${t}/runs/${runId}`)).body.status).toBe('success');
  });
});

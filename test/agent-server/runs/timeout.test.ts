// BG_JOB_TIMEOUT_SECS: a run that takes longer ends with status timeout, the thread in error, join answers __error__.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startHarness, type Harness } from '../helpers/harness.ts';

describe('run timeout (embedded)', () => {
  let h: Harness;
  beforeAll(async () => {
    h = await startHarness({ store: 'embedded', runTimeoutMs: 300 });
  });
  afterAll(async () => h?.close());

  it('ends a run that outlives the timeout', async () => {
    const t = JSON.parse((await h.app.inject({ method: 'POST', url: '/threads', payload: {} })).body);
    const r = JSON.parse(
      (
        await h.app.inject({
          method: 'POST',
          url: `/threads/${t.thread_id}/runs`,
          payload: { assistant_id: 'slow', input: { delay_ms: 30_000 } },
        })
      ).body,
    );
    const joined = JSON.parse(
      (await h.app.inject({ method: 'GET', url: `/threads/${t.thread_id}/runs/${r.run_id}/join` })).body,
    );
    expect(joined.__error__).toMatchObject({ error: 'TimeoutError' });
    const run = JSON.parse(
      (await h.app.inject({ method: 'GET', url: `/threads/${t.thread_id}/runs/${r.run_id}` })).body,
    );
    expect(run.status).toBe('timeout');
    const thread = JSON.parse((await h.app.inject({ method: 'GET', url: `/threads/${t.thread_id}` })).body);
    expect(thread.status).toBe('error');
  });
});

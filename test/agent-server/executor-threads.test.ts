// Executor threads: a thread that dies takes only its own runs down (they end in error, never stuck running)
// and is replaced, so the next run succeeds. Everything else about them runs through the API suite.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startHarness, type Harness } from './helpers/harness.ts';

describe.each(['embedded', 'postgres'] as const)('executor threads (%s)', (store) => {
  let h: Harness;
  beforeAll(async () => {
    h = await startHarness({ store, executorThreads: 1 });
  });
  afterAll(async () => h?.close());

  async function call(method: string, url: string, payload?: unknown) {
    const res = await h.app.inject({ method: method as 'GET', url, payload: payload as Record<string, unknown> });
    return { status: res.statusCode, body: res.body.trim() ? JSON.parse(res.body) : undefined };
  }

  it('a run whose thread exits ends in error; a new thread takes the next run', async () => {
    const t = (await call('POST', '/threads', {})).body.thread_id as string;
    const r = (await call('POST', `/threads/${t}/runs`, { assistant_id: 'fail', input: { x: -1 } })).body;
    const joined = await call('GET', `/threads/${t}/runs/${r.run_id}/join`);
    expect(joined.body.__error__).toMatchObject({ error: 'ExecutorThreadExited' });
    expect((await call('GET', `/threads/${t}/runs/${r.run_id}`)).body.status).toBe('error');
    expect((await call('GET', `/threads/${t}`)).body.status).toBe('error');

    const t2 = (await call('POST', '/threads', {})).body.thread_id as string;
    const ok = await call('POST', `/threads/${t2}/runs/wait`, { assistant_id: 'counter', input: {} });
    expect(ok.status).toBe(200);
    expect(ok.body.__error__).toBeUndefined();
    expect((await call('GET', `/threads/${t2}`)).body.status).toBe('idle');
  });
});

// Service tests through HTTP (app.inject) on the fixture graphs, against both stores.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { systemAssistantId } from '../../../src/agent-server/graphs/index.ts';
import { startHarness, type Harness } from '../helpers/harness.ts';

type Json = Record<string, any>;

// Graphs execute on the engine's thread, and (in the "threads" variants) on an executor thread.
describe.each([
  ['embedded', 0],
  ['postgres', 0],
  ['embedded', 1],
  ['postgres', 1],
] as const)('agent server API (%s, executor threads: %i)', (store, executorThreads) => {
  let h: Harness;

  beforeAll(async () => {
    h = await startHarness({ store, bodyLimit: 64 * 1024, executorThreads });
  });
  afterAll(async () => {
    await h?.close();
  });

  async function call(method: string, url: string, payload?: unknown) {
    const res = await h.app.inject({ method: method as 'GET', url, payload: payload as Json });
    const text = res.body.trim();
    return { status: res.statusCode, headers: res.headers, body: text ? (JSON.parse(text) as any) : undefined };
  }

  async function newThread(metadata: Json = {}): Promise<string> {
    const r = await call('POST', '/threads', { metadata });
    expect(r.status).toBe(200);
    return r.body.thread_id;
  }

  async function runAndJoin(threadId: string, body: Json) {
    const created = await call('POST', `/threads/${threadId}/runs`, body);
    expect(created.status).toBe(200);
    const joined = await call('GET', `/threads/${threadId}/runs/${created.body.run_id}/join`);
    const run = await call('GET', `/threads/${threadId}/runs/${created.body.run_id}`);
    return { created, joined, run: run.body };
  }

  it('runs a graph by name: pending, Content-Location, join values, resolved assistant, state with writes', async () => {
    const t = await newThread();
    const created = await call('POST', `/threads/${t}/runs`, { assistant_id: 'counter', input: { count: 1 } });
    expect(created.body.status).toBe('pending');
    expect(created.headers['content-location']).toBe(`/threads/${t}/runs/${created.body.run_id}`);
    expect(created.body.assistant_id).toBe(systemAssistantId('counter'));
    expect(created.body.multitask_strategy).toBe('reject');
    expect(created.body.kwargs).toMatchObject({
      input: { count: 1 },
      config: {
        metadata: { created_by: 'system' },
        configurable: {
          run_id: created.body.run_id,
          user_id: '',
          graph_id: 'counter',
          thread_id: t,
          assistant_id: systemAssistantId('counter'),
          checkpoint_id: null,
        },
      },
      webhook: null,
      temporary: false,
      stream_mode: ['values'],
      feedback_keys: null,
      interrupt_after: null,
      interrupt_before: null,
    });
    const joined = await call('GET', `/threads/${t}/runs/${created.body.run_id}/join`);
    expect(joined.body).toEqual({ count: 12, steps: ['first', 'second'] });
    const run = await call('GET', `/threads/${t}/runs/${created.body.run_id}`);
    expect(run.body.status).toBe('success');
    const state = await call('GET', `/threads/${t}/state`);
    expect(state.body).toMatchObject({ values: { count: 12 }, next: [], tasks: [] });
    expect(state.body.metadata).toMatchObject({
      step: expect.any(Number),
      source: 'loop',
      run_id: created.body.run_id,
      graph_id: 'counter',
      thread_id: t,
      user_id: '',
      created_by: 'system',
      assistant_id: systemAssistantId('counter'),
      writes: { second: { count: 10, steps: ['second'] } },
    });
    expect(typeof state.body.checkpoint_id).toBe('string');
    expect(typeof state.body.parent_checkpoint_id).toBe('string');
    expect(state.body.checkpoint).toMatchObject({
      thread_id: t,
      checkpoint_ns: '',
      checkpoint_id: state.body.checkpoint_id,
    });
    expect(state.body.parent_checkpoint.checkpoint_id).toBe(state.body.parent_checkpoint_id);
    const byId = await call('GET', `/threads/${t}/state/${state.body.parent_checkpoint_id}`);
    expect(byId.body.values).toEqual({ count: 2, steps: ['first'] });
    const thread = await call('GET', `/threads/${t}`);
    expect(thread.body).toMatchObject({ status: 'idle', values: { count: 12 }, metadata: { graph_id: 'counter' } });
    const list = await call('GET', `/threads/${t}/runs`);
    expect(list.body.map((r: Json) => r.run_id)).toEqual([created.body.run_id]);
  });

  it('rejects bad input with 4xx and writes nothing', async () => {
    const threadsBefore = (await call('POST', '/threads/count', {})).body;
    const t = await newThread();
    const bad = [
      await call('POST', '/threads/not-a-uuid/runs', { assistant_id: 'counter' }),
      await call('POST', `/threads/${t}/runs`, { assistant_id: 5 }),
      await call('POST', `/threads/${t}/runs`, { input: {} }),
      await call('POST', `/threads/${t}/runs`, { assistant_id: 'counter', multitask_strategy: 'sometimes' }),
      await call('POST', '/threads', { metadata: 'nope' }),
    ];
    for (const r of bad) expect(r.status).toBe(422);
    expect(JSON.stringify(bad[1]!.body.detail)).toContain('assistant_id');
    expect(JSON.stringify(bad[3]!.body.detail)).toContain('multitask_strategy');
    expect(JSON.stringify(bad[4]!.body.detail)).toContain('metadata');
    const malformed = await h.app.inject({
      method: 'POST',
      url: '/threads',
      headers: { 'content-type': 'application/json' },
      payload: '{"metadata": ',
    });
    expect(malformed.statusCode).toBe(422);
    const unknownThread = await call('POST', '/threads/00000000-0000-4000-8000-000000000000/runs', {
      assistant_id: 'counter',
    });
    expect(unknownThread.status).toBe(404);
    expect(unknownThread.body.detail).toMatch(/Thread/);
    const unknownAssistant = await call('POST', `/threads/${t}/runs`, { assistant_id: 'no-such-graph' });
    expect(unknownAssistant.status).toBe(404);
    expect((await call('GET', `/threads/${t}/runs/00000000-0000-4000-8000-000000000000`)).status).toBe(404);
    expect((await call('GET', '/threads/00000000-0000-4000-8000-000000000000')).status).toBe(404);
    expect((await call('GET', '/assistants/00000000-0000-4000-8000-000000000000')).status).toBe(404);
    const big = await call('POST', `/threads/${t}/runs`, {
      assistant_id: 'counter',
      input: { blob: 'x'.repeat(100_000) },
    });
    expect(big.status).toBe(413);
    expect(big.body.detail).toBeTruthy();
    // Only the one thread created above exists, with no run and still idle.
    expect((await call('POST', '/threads/count', {})).body).toBe(threadsBefore + 1);
    expect((await call('GET', `/threads/${t}/runs`)).body).toEqual([]);
    expect((await call('GET', `/threads/${t}`)).body.status).toBe('idle');
  });

  it('multitask reject answers 409 with the reference detail; enqueue runs in order', async () => {
    const t = await newThread();
    const first = await call('POST', `/threads/${t}/runs`, {
      assistant_id: 'slow',
      input: { delay_ms: 300, mark: 'a' },
    });
    const rejected = await call('POST', `/threads/${t}/runs`, {
      assistant_id: 'slow',
      input: { delay_ms: 0, mark: 'b' },
    });
    expect(rejected.status).toBe(409);
    expect(rejected.body.detail).toBe(
      'Thread is already running a task. Wait for it to finish or choose a different multitask strategy.',
    );
    const second = await call('POST', `/threads/${t}/runs`, {
      assistant_id: 'slow',
      input: { delay_ms: 0, mark: 'b' },
      multitask_strategy: 'enqueue',
    });
    expect(second.status).toBe(200);
    const joined = await call('GET', `/threads/${t}/runs/${second.body.run_id}/join`);
    expect(joined.body.marks).toEqual(['start:a', 'done:a', 'start:b', 'done:b']);
    expect((await call('GET', `/threads/${t}/runs/${first.body.run_id}`)).body.status).toBe('success');
  });

  it('multitask interrupt stops the running run; the new one runs on top of its checkpoints', async () => {
    const t = await newThread();
    const first = await call('POST', `/threads/${t}/runs`, {
      assistant_id: 'slow',
      input: { delay_ms: 30_000, mark: 'a' },
    });
    // Wait until its first step is checkpointed, so what the interrupted run leaves behind is known.
    await expect.poll(async () => (await call('GET', `/threads/${t}/state`)).body.values?.marks).toEqual(['start:a']);
    const second = await call('POST', `/threads/${t}/runs`, {
      assistant_id: 'slow',
      input: { delay_ms: 0, mark: 'b' },
      multitask_strategy: 'interrupt',
    });
    const joined = await call('GET', `/threads/${t}/runs/${second.body.run_id}/join`);
    expect((await call('GET', `/threads/${t}/runs/${first.body.run_id}`)).body.status).toBe('interrupted');
    // The interrupted run's first step stays in the thread.
    expect(joined.body.marks).toEqual(['start:a', 'start:b', 'done:b']);
  });

  it('multitask rollback deletes the running run and its checkpoints', async () => {
    const t = await newThread();
    const base = await runAndJoin(t, { assistant_id: 'slow', input: { delay_ms: 0, mark: 'base' } });
    expect(base.run.status).toBe('success');
    const historyBefore = (await call('POST', `/threads/${t}/history`, { limit: 100 })).body.length;
    const doomed = await call('POST', `/threads/${t}/runs`, {
      assistant_id: 'slow',
      input: { delay_ms: 30_000, mark: 'x' },
    });
    await expect
      .poll(async () => (await call('GET', `/threads/${t}/runs/${doomed.body.run_id}`)).body.status)
      .toBe('running');
    await expect
      .poll(async () => (await call('POST', `/threads/${t}/history`, { limit: 100 })).body.length)
      .toBeGreaterThan(historyBefore);
    const next = await call('POST', `/threads/${t}/runs`, {
      assistant_id: 'slow',
      input: { delay_ms: 0, mark: 'c' },
      multitask_strategy: 'rollback',
    });
    const joined = await call('GET', `/threads/${t}/runs/${next.body.run_id}/join`);
    expect(joined.body.marks).toEqual(['start:base', 'done:base', 'start:c', 'done:c']);
    expect((await call('GET', `/threads/${t}/runs/${doomed.body.run_id}`)).status).toBe(404);
    const history = (await call('POST', `/threads/${t}/history`, { limit: 100 })).body as Json[];
    expect(history.some((s) => s.metadata?.run_id === doomed.body.run_id)).toBe(false);
  });

  it('human in the loop: interrupt() leaves the thread interrupted; command resume continues', async () => {
    const t = await newThread();
    const first = await runAndJoin(t, { assistant_id: 'hitl', input: { question: 'colour?' } });
    expect(first.run.status).toBe('interrupted');
    const thread = (await call('GET', `/threads/${t}`)).body;
    expect(thread.status).toBe('interrupted');
    const state = (await call('GET', `/threads/${t}/state`)).body;
    expect(state.next).toEqual(['ask']);
    expect(state.tasks[0].interrupts[0].value).toEqual({ question: 'colour?' });
    expect(state.values).toMatchObject({ prepared: true });
    expect(state.values.answer).toBeUndefined();
    const resumed = await runAndJoin(t, { assistant_id: 'hitl', command: { resume: 'blue' } });
    expect(resumed.run.status).toBe('success');
    expect(resumed.joined.body).toMatchObject({ question: 'colour?', answer: 'blue', prepared: true });
    expect((await call('GET', `/threads/${t}/state`)).body.next).toEqual([]);
    expect((await call('GET', `/threads/${t}`)).body.status).toBe('idle');
  });

  it('interrupt_before / interrupt_after pause at the node; a null-input run continues', async () => {
    const t = await newThread();
    const before = await runAndJoin(t, { assistant_id: 'counter', input: { count: 0 }, interrupt_before: ['second'] });
    expect(before.joined.body).toEqual({ count: 1, steps: ['first'] });
    expect((await call('GET', `/threads/${t}/state`)).body.next).toEqual(['second']);
    expect((await call('GET', `/threads/${t}`)).body.status).toBe('interrupted');
    const cont = await runAndJoin(t, { assistant_id: 'counter', input: null });
    expect(cont.joined.body).toEqual({ count: 11, steps: ['first', 'second'] });
    const t2 = await newThread();
    await runAndJoin(t2, { assistant_id: 'counter', input: { count: 0 }, interrupt_after: ['first'] });
    expect((await call('GET', `/threads/${t2}/state`)).body.next).toEqual(['second']);
  });

  it('a failing graph ends in error; join answers __error__; the thread is error', async () => {
    const t = await newThread();
    const r = await runAndJoin(t, { assistant_id: 'fail', input: { x: 1 } });
    expect(r.joined.body).toEqual({
      __error__: { error: 'FixtureFailure', message: 'the fixture graph failed on purpose' },
    });
    expect(r.run.status).toBe('error');
    expect((await call('GET', `/threads/${t}`)).body.status).toBe('error');
    // Join on a finished run answers at once.
    expect((await call('GET', `/threads/${t}/runs/${r.created.body.run_id}/join`)).body.__error__.error).toBe(
      'FixtureFailure',
    );
  });

  it('cancel with wait ends a running run as interrupted (204); without wait answers 202', async () => {
    const t = await newThread();
    const r = await call('POST', `/threads/${t}/runs`, {
      assistant_id: 'slow',
      input: { delay_ms: 30_000, mark: 'a' },
    });
    await expect
      .poll(async () => (await call('GET', `/threads/${t}/runs/${r.body.run_id}`)).body.status)
      .toBe('running');
    const c = await call('POST', `/threads/${t}/runs/${r.body.run_id}/cancel?wait=1&action=interrupt`);
    expect(c.status).toBe(204);
    expect((await call('GET', `/threads/${t}/runs/${r.body.run_id}`)).body.status).toBe('interrupted');
    expect((await call('GET', `/threads/${t}`)).body.status).not.toBe('busy');
    const r2 = await call('POST', `/threads/${t}/runs`, {
      assistant_id: 'slow',
      input: { delay_ms: 30_000, mark: 'b' },
    });
    expect((await call('POST', `/threads/${t}/runs/${r2.body.run_id}/cancel`)).status).toBe(202);
    await call('GET', `/threads/${t}/runs/${r2.body.run_id}/join`);
    expect((await call('GET', `/threads/${t}/runs/${r2.body.run_id}`)).body.status).toBe('interrupted');
    expect((await call('DELETE', `/threads/${t}/runs/${r2.body.run_id}`)).status).toBe(204);
    expect((await call('GET', `/threads/${t}/runs/${r2.body.run_id}`)).status).toBe(404);
  });

  it('waits: thread runs/wait and stateless runs/wait return final values', async () => {
    const t = await newThread();
    const w = await call('POST', `/threads/${t}/runs/wait`, { assistant_id: 'counter', input: { count: 5 } });
    expect(w.status).toBe(200);
    expect(w.body).toEqual({ count: 16, steps: ['first', 'second'] });
    expect(w.headers['content-location']).toMatch(new RegExp(`^/threads/${t}/runs/`));
    const s = await call('POST', '/runs/wait', { assistant_id: 'counter', input: { count: 0 } });
    expect(s.body).toEqual({ count: 11, steps: ['first', 'second'] });
    // The temporary thread is gone.
    const tid = String(s.headers['content-location']).split('/')[2];
    expect((await call('GET', `/threads/${tid}`)).status).toBe(404);
  });

  it('threads: update state as a node, history, copy, search, count, patch, delete', async () => {
    const t = await newThread({ owner: 'ann' });
    await runAndJoin(t, { assistant_id: 'counter', input: { count: 0 } });
    const upd = await call('POST', `/threads/${t}/state`, { values: { count: 100 }, as_node: 'first' });
    expect(upd.status).toBe(200);
    expect(upd.body.checkpoint.checkpoint_id).toEqual(expect.any(String));
    const state = (await call('GET', `/threads/${t}/state`)).body;
    expect(state.values.count).toBe(111);
    expect(state.next).toEqual(['second']);
    expect((await call('GET', `/threads/${t}`)).body.status).toBe('interrupted');
    const badNode = await call('POST', `/threads/${t}/state`, { values: { count: 1 }, as_node: 'nope' });
    expect(badNode.status).toBe(400);
    const hist = (await call('GET', `/threads/${t}/history?limit=3`)).body as Json[];
    expect(hist).toHaveLength(3);
    expect(hist[0]!.checkpoint_id).toBe(state.checkpoint_id);
    expect(hist[0]!.metadata.source).toBe('update');
    const copy = (await call('POST', `/threads/${t}/copy`)).body;
    expect(copy.thread_id).not.toBe(t);
    expect((await call('GET', `/threads/${copy.thread_id}/state`)).body.values).toEqual(state.values);
    const found = (await call('POST', '/threads/search', { metadata: { owner: 'ann' }, limit: 10 })).body as Json[];
    expect(found.map((x) => x.thread_id).sort()).toEqual([t, copy.thread_id].sort());
    expect((await call('POST', '/threads/count', { metadata: { owner: 'ann' } })).body).toBe(2);
    expect((await call('POST', '/threads/search', { ids: [t], select: ['thread_id'] })).body).toEqual([
      { thread_id: t },
    ]);
    const patched = (await call('PATCH', `/threads/${t}`, { metadata: { tag: 'x' } })).body;
    expect(patched.metadata).toMatchObject({ owner: 'ann', tag: 'x' });
    expect((await call('DELETE', `/threads/${t}`)).status).toBe(204);
    expect((await call('GET', `/threads/${t}/state`)).status).toBe(404);
  });

  it('assistants: system ones exist; create, patch, search, count, schemas, graph, delete', async () => {
    const sys = (await call('GET', '/assistants/counter')).body;
    expect(sys).toMatchObject({
      assistant_id: systemAssistantId('counter'),
      graph_id: 'counter',
      metadata: { created_by: 'system' },
    });
    const a = await call('POST', '/assistants', {
      graph_id: 'counter',
      name: 'mine',
      metadata: { team: 'q' },
      config: { tags: ['t'] },
    });
    expect(a.status).toBe(200);
    expect((await call('POST', '/assistants', { graph_id: 'counter', assistant_id: a.body.assistant_id })).status).toBe(
      409,
    );
    expect((await call('POST', '/assistants', { graph_id: 'nope' })).status).toBe(404);
    const p = (await call('PATCH', `/assistants/${a.body.assistant_id}`, { name: 'renamed' })).body;
    expect(p).toMatchObject({ name: 'renamed', version: 2 });
    expect((await call('POST', '/assistants/search', { metadata: { team: 'q' } })).body).toHaveLength(1);
    expect((await call('POST', '/assistants/count', { graph_id: 'counter' })).body).toBe(2);
    const schemas = (await call('GET', `/assistants/${a.body.assistant_id}/schemas`)).body;
    expect(schemas.graph_id).toBe('counter');
    expect(schemas).toHaveProperty('state_schema');
    const g = (await call('GET', '/assistants/counter/graph')).body;
    expect(g.nodes.map((n: Json) => n.id)).toEqual(expect.arrayContaining(['first', 'second']));
    // A run through a user assistant records its UUID.
    const t = await newThread();
    const r = await call('POST', `/threads/${t}/runs`, { assistant_id: a.body.assistant_id, input: { count: 0 } });
    expect(r.body.assistant_id).toBe(a.body.assistant_id);
    expect(r.body.kwargs.config.tags).toEqual(['t']);
    await call('GET', `/threads/${t}/runs/${r.body.run_id}/join`);
    expect((await call('DELETE', `/assistants/${a.body.assistant_id}`)).status).toBe(204);
    expect((await call('GET', `/assistants/${a.body.assistant_id}`)).status).toBe(404);
  });

  it('after_seconds delays the start of a run', async () => {
    const t = await newThread();
    const r = await call('POST', `/threads/${t}/runs`, {
      assistant_id: 'counter',
      input: { count: 0 },
      after_seconds: 1.5,
    });
    expect((await call('GET', `/threads/${t}/runs/${r.body.run_id}`)).body.status).toBe('pending');
    await call('GET', `/threads/${t}/runs/${r.body.run_id}/join`);
    expect((await call('GET', `/threads/${t}/runs/${r.body.run_id}`)).body.status).toBe('success');
    const history = (await call('GET', `/threads/${t}/history?limit=10`)).body as Json[];
    const firstCheckpoint = Math.min(...history.map((s) => Date.parse(s.created_at)));
    expect(firstCheckpoint - Date.parse(r.body.created_at)).toBeGreaterThanOrEqual(1_400);
  });

  it('thread creation with supersteps applies them, or writes nothing when one is rejected', async () => {
    const ok = await call('POST', '/threads', {
      metadata: { graph_id: 'counter' },
      supersteps: [{ updates: [{ values: { count: 5 }, as_node: 'first' }] }],
    });
    expect(ok.status).toBe(200);
    const state = (await call('GET', `/threads/${ok.body.thread_id}/state`)).body;
    expect(state.values.count).toBe(5);
    expect(state.next).toEqual(['second']);
    const before = (await call('POST', '/threads/count', {})).body;
    const bad = await call('POST', '/threads', {
      metadata: { graph_id: 'counter' },
      supersteps: [{ updates: [{ values: { count: 5 }, as_node: 'no-such-node' }] }],
    });
    expect(bad.status).toBe(400);
    expect((await call('POST', '/threads/count', {})).body).toBe(before);
  });

  it('meta: /ok and /info', async () => {
    expect((await call('GET', '/ok')).body).toEqual({ ok: true });
    expect((await call('GET', '/info')).body).toMatchObject({ storage: store });
  });
});

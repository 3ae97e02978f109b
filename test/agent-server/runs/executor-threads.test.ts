// Executor threads: a thread that dies takes only its own runs down (they end in error, never stuck running)
// and is replaced, so the next run succeeds; the events of runs that share a thread (it sends those of one
// event-loop turn together) reach each run's stream in order. Everything else about them runs through the API suite.
import { Worker } from 'node:worker_threads';
import { afterAll, beforeAll, describe, expect, it, vi } from 'vitest';
import { startHarness, type Harness } from '../helpers/harness.ts';

describe.each(['embedded', 'postgres'] as const)('executor threads (%s)', (store) => {
  let h: Harness;
  beforeAll(async () => {
    h = await startHarness({ store, executorThreads: 1 });
  });
  afterAll(async () => h?.close());

  it('a run whose thread exits ends in error; a new thread takes the next run', async () => {
    const t = (await h.call('POST', '/threads', {})).body.thread_id as string;
    const r = (await h.call('POST', `/threads/${t}/runs`, { assistant_id: 'fail', input: { x: -1 } })).body;
    const joined = await h.call('GET', `/threads/${t}/runs/${r.run_id}/join`);
    expect(joined.body.__error__).toMatchObject({ error: 'ExecutorThreadExited' });
    expect((await h.call('GET', `/threads/${t}/runs/${r.run_id}`)).body.status).toBe('error');
    expect((await h.call('GET', `/threads/${t}`)).body.status).toBe('error');

    const t2 = (await h.call('POST', '/threads', {})).body.thread_id as string;
    const ok = await h.call('POST', `/threads/${t2}/runs/wait`, { assistant_id: 'counter', input: {} });
    expect(ok.status).toBe(200);
    expect(ok.body.__error__).toBeUndefined();
    expect((await h.call('GET', `/threads/${t2}`)).body.status).toBe('idle');
  });

  /** The (event, data) pairs of a text/event-stream body. */
  function sse(body: string): Array<[string, unknown]> {
    return body
      .split('\n\n')
      .filter((b) => b.trim())
      .map((b) => {
        const event = /^event: (.*)$/m.exec(b)?.[1] ?? '';
        const data = /^data: (.*)$/m.exec(b)?.[1];
        return [event, data === undefined ? undefined : JSON.parse(data)];
      });
  }

  it('runs sharing a thread get their own events, in order, each stream as a lone run gets it', async () => {
    const streamRun = async () => {
      const t = (await h.call('POST', '/threads', {})).body.thread_id as string;
      const res = await h.app.inject({
        method: 'POST',
        url: `/threads/${t}/runs/stream`,
        payload: { assistant_id: 'counter', input: {}, stream_mode: ['values', 'updates', 'debug'] },
      });
      expect(res.statusCode).toBe(200);
      return { thread: t, events: sse(res.body) };
    };
    const alone = await streamRun();
    const names = alone.events.map(([e]) => e);
    expect(names[0]).toBe('metadata');
    expect(names.filter((e) => e === 'values').length).toBe(2);
    expect(names).toContain('updates');
    expect(names).toContain('debug');

    const together = await Promise.all(Array.from({ length: 12 }, streamRun));
    for (const { thread, events } of together) {
      expect(events.map(([e]) => e)).toEqual(names);
      // The metadata names the thread's own run ({run_id, attempt}, as the platform sends it).
      const runs = (await h.call('GET', `/threads/${thread}/runs`)).body as { run_id: string }[];
      expect((events[0]![1] as { run_id: string }).run_id).toBe(runs[0]!.run_id);
      const values = events.filter(([e]) => e === 'values').map(([, d]) => d);
      expect(values).toEqual([
        { count: 1, steps: ['first'] },
        { count: 11, steps: ['first', 'second'] },
      ]);
      const updates = events.filter(([e]) => e === 'updates').map(([, d]) => Object.keys(d as object)[0]);
      expect(updates).toEqual(['first', 'second']);
      // Nothing of another run's (debug events name their thread in every config).
      const text = JSON.stringify(events);
      for (const other of together) if (other.thread !== thread) expect(text).not.toContain(other.thread);
    }
  });

  it('every finished run is forgotten on its thread once, after its execute: with the next run, or alone soon after', async () => {
    // What the engine's thread sends its executor threads (observed: the real messages go through unchanged).
    type Sent = { type: string; req?: { run: { run_id: string } }; forget?: string[]; runIds?: string[] };
    const spy = vi.spyOn(Worker.prototype, 'postMessage');
    const sent = () => spy.mock.calls.map((c) => c[0] as Sent);
    const forgets = (m: Sent) => (m.type === 'forget' ? m.runIds! : (m.forget ?? []));
    const runIds: string[] = [];
    const oneRun = async () => {
      const t = (await h.call('POST', '/threads', {})).body.thread_id as string;
      const r = (await h.call('POST', `/threads/${t}/runs`, { assistant_id: 'counter', input: {} })).body;
      await h.call('GET', `/threads/${t}/runs/${r.run_id}/join`);
      return r.run_id as string;
    };
    try {
      // A thread replaced by the first test may still be loading (runs execute inline until then).
      const ready = Date.now() + 20_000;
      while (!sent().some((m) => m.type === 'execute') && Date.now() < ready) {
        await oneRun();
        await new Promise((r) => setTimeout(r, 100));
      }
      await new Promise((r) => setTimeout(r, 300));
      spy.mockClear();
      for (let i = 0; i < 4; i++) runIds.push(await oneRun());
      // The last one has no next run to ride on: it goes alone.
      const deadline = Date.now() + 10_000;
      const forgotten = () => sent().flatMap(forgets);
      while (!forgotten().includes(runIds.at(-1)!) && Date.now() < deadline)
        await new Promise((r) => setTimeout(r, 20));
      for (const id of runIds) {
        const executedAt = sent().findIndex((m) => m.type === 'execute' && m.req!.run.run_id === id);
        const forgottenAt = sent().findIndex((m) => forgets(m).includes(id));
        expect(executedAt).toBeGreaterThanOrEqual(0);
        expect(forgottenAt).toBeGreaterThanOrEqual(0);
        // A run's forget rides on a later message than its own execute, never on it.
        expect(forgottenAt).toBeGreaterThan(executedAt);
        expect(forgotten().filter((f) => f === id)).toHaveLength(1);
      }
    } finally {
      spy.mockRestore();
    }
  });
});

// An awake agent gives back the memory its runs needed: idle executor threads end (their isolates and heaps with
// them) and the next run starts them again, running on the engine's thread until they are ready, losing nothing.
describe('executor threads released when idle (embedded)', () => {
  let h: Harness;
  beforeAll(async () => {
    h = await startHarness({ store: 'embedded', executorThreads: 1, executorIdleMs: 300 });
  });
  afterAll(async () => h?.close());

  const counterRun = async () => {
    const t = (await h.call('POST', '/threads', {})).body.thread_id as string;
    const ok = await h.call('POST', `/threads/${t}/runs/wait`, { assistant_id: 'counter', input: {} });
    expect(ok.status).toBe(200);
    expect(ok.body.__error__).toBeUndefined();
    return t;
  };

  it('ends the threads after the idle time and starts them again for the next run, which succeeds', async () => {
    expect(h.threads!.liveThreads()).toBe(1);
    await counterRun();
    await vi.waitFor(() => expect(h.threads!.liveThreads()).toBe(0), { timeout: 30_000, interval: 50 });
    // The next run: executed at once (inline) while a thread starts again; then threads take runs again.
    const t = await counterRun();
    expect((await h.call('GET', `/threads/${t}`)).body.status).toBe('idle');
    expect(h.threads!.liveThreads()).toBe(1);
    await h.threads!.whenReady();
    await counterRun();
    await vi.waitFor(() => expect(h.threads!.liveThreads()).toBe(0), { timeout: 30_000, interval: 50 });
  });
});

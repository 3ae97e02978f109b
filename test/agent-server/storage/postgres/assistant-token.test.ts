// Run creates reuse the assistant they last read, checked by the create itself against the row's token (Postgres:
// its xmin, in the create's own statement; embedded: a digest of its columns, in the create's transaction): a change
// made elsewhere (another replica, straight in the store) is never missed: the create finds it, writes nothing, and
// is built again from a fresh read. Tried the way a race would go: the assistant patched, set to another version and
// deleted behind this process's back.
import { randomUUID } from 'node:crypto';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { StaleAssistantError } from '../../../../src/lib/errors.ts';
import { startHarness, type Harness } from '../../helpers/harness.ts';

describe.each(['embedded', 'postgres'] as const)('run creates and the assistant they were built from (%s)', (store) => {
  let h: Harness;
  const reads: string[] = [];
  beforeAll(async () => {
    h = await startHarness({ store });
    const a = h.storage.assistants;
    const get = a.get.bind(a);
    const versioned = a.getVersioned.bind(a);
    a.get = async (id) => {
      reads.push(id);
      return get(id);
    };
    a.getVersioned = async (id) => {
      reads.push(id);
      return versioned(id);
    };
  });
  afterAll(async () => h?.close());

  const thread = async () => (await h.call('POST', '/threads', {})).body.thread_id as string;
  const readsOf = (id: string) => reads.filter((r) => r === id).length;
  const configured = (run: { kwargs: { config: { configurable: { tag?: string } } } }) =>
    run.kwargs.config.configurable.tag;

  it('reads the assistant once for many runs, and again (once) after it changed elsewhere', async () => {
    const a = await h.call('POST', '/assistants', { graph_id: 'counter', config: { configurable: { tag: 'v1' } } });
    const id = a.body.assistant_id as string;
    const before = readsOf(id);
    const first = await h.call('POST', `/threads/${await thread()}/runs`, { assistant_id: id, input: {} });
    expect(first.status).toBe(200);
    expect(configured(first.body)).toBe('v1');
    for (let i = 0; i < 3; i++) {
      const r = await h.call('POST', `/threads/${await thread()}/runs`, { assistant_id: id, input: {} });
      expect(configured(r.body)).toBe('v1');
    }
    expect(readsOf(id) - before).toBe(1);

    // Another replica patches it: this process's copy is stale, and the create finds out.
    await h.storage.assistants.patch(id, { config: { configurable: { tag: 'v2' } } });
    const t = await thread();
    const second = await h.call('POST', `/threads/${t}/runs/wait`, { assistant_id: id, input: {} });
    expect(second.status).toBe(200);
    const runs = await h.call('GET', `/threads/${t}/runs`);
    expect(runs.body).toHaveLength(1);
    expect(configured(runs.body[0])).toBe('v2');
    expect(readsOf(id) - before).toBe(2);

    // Stateless runs take the slow path (their thread is created in a transaction): the same check.
    await h.storage.assistants.setLatest(id, 1);
    const stateless = await h.call('POST', '/runs', { assistant_id: id, input: {}, on_completion: 'keep' });
    expect(stateless.status).toBe(200);
    expect(configured(stateless.body)).toBe('v1');
    expect(readsOf(id) - before).toBe(3);
  });

  it('a deleted assistant: 404, and nothing of the run is written', async () => {
    const a = await h.call('POST', '/assistants', { graph_id: 'counter' });
    const id = a.body.assistant_id as string;
    const t = await thread();
    expect((await h.call('POST', `/threads/${t}/runs/wait`, { assistant_id: id, input: {} })).status).toBe(200);
    await h.storage.assistants.delete(id);
    const r = await h.call('POST', `/threads/${t}/runs`, { assistant_id: id, input: {} });
    expect(r.status).toBe(404);
    expect(r.body.detail).toContain(id);
    expect((await h.call('GET', `/threads/${t}/runs`)).body).toHaveLength(1);
    const newThread = randomUUID();
    const s = await h.call('POST', `/threads/${newThread}/runs`, {
      assistant_id: id,
      input: {},
      if_not_exists: 'create',
    });
    expect(s.status).toBe(404);
    expect((await h.call('GET', `/threads/${newThread}`)).status).toBe(404);
  });

  it('the store refuses a create whose token is not the row current one, on both paths, writing nothing', async () => {
    const a = await h.call('POST', '/assistants', { graph_id: 'counter' });
    const id = a.body.assistant_id as string;
    const t = await thread();
    const base = {
      assistant_id: id,
      metadata: {},
      kwargs: { input: {}, config: { configurable: { graph_id: 'counter' } } },
      multitask_strategy: 'reject' as const,
      thread_metadata: {},
      assistant_token: '1',
    };
    // Fast path: an existing thread.
    await expect(
      h.storage.queue.create({ ...base, run_id: randomUUID(), thread_id: t, if_not_exists: 'reject' }),
    ).rejects.toBeInstanceOf(StaleAssistantError);
    // Slow path: a thread to create.
    const fresh = randomUUID();
    await expect(
      h.storage.queue.create({ ...base, run_id: randomUUID(), thread_id: fresh, if_not_exists: 'create' }),
    ).rejects.toBeInstanceOf(StaleAssistantError);
    expect(await h.storage.threads.get(fresh)).toBeNull();
    expect(await h.storage.runs.list(t, { limit: 10, offset: 0 })).toHaveLength(0);
    expect((await h.storage.threads.get(t))!.status).toBe('idle');
    // The current token passes.
    const { token } = (await h.storage.assistants.getVersioned(id))!;
    const ok = await h.storage.queue.create({
      ...base,
      assistant_token: token,
      run_id: randomUUID(),
      thread_id: t,
      if_not_exists: 'reject',
    });
    expect(ok.thread_id).toBe(t);
  });
});

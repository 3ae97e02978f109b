// Thread state through the real SDK against a real server process on both stores: threads sorted by when their
// state changed, checkpoint metadata patched in place (patchState), history paged with the SDK's `before` config,
// and threads created from supersteps (several updates as one step, commands included).
import { randomUUID } from 'node:crypto';
import { Client } from '@langchain/langgraph-sdk';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { FIXTURE_CONFIG } from '../helpers/harness.ts';
import type { ServerProc } from '../helpers/process.ts';
import { startServerOnStore, type StoreServer } from '../helpers/store-server.ts';

describe.each(['embedded', 'postgres'] as const)('thread state through the SDK (%s)', (store) => {
  let server: ServerProc;
  let client: Client;
  let running: StoreServer | undefined;

  beforeAll(async () => {
    running = await startServerOnStore(store, ['--config', FIXTURE_CONFIG]);
    server = running.server;
    client = new Client({ apiUrl: server.url, callerOptions: { maxRetries: 0 } });
  });
  afterAll(async () => {
    await running?.close();
  });

  it('sorts threads by state_updated_at (a state change moves a thread, a metadata patch does not)', async () => {
    const batch = randomUUID();
    const ta = await client.threads.create({ metadata: { batch, name: 'a' } });
    await client.threads.create({ metadata: { batch, name: 'b' } });
    const tc = await client.threads.create({ metadata: { batch, name: 'c' } });
    await client.runs.wait(tc.thread_id, 'counter', { input: { count: 1 } });
    await client.runs.wait(ta.thread_id, 'counter', { input: { count: 1 } });
    // Moves c's updated_at past a's, but not its state_updated_at.
    await client.threads.update(tc.thread_id, { metadata: { touched: true } });
    const names = async (sortBy: 'state_updated_at' | 'updated_at', sortOrder: 'asc' | 'desc') =>
      (await client.threads.search({ metadata: { batch }, sortBy, sortOrder })).map((t) => t.metadata!.name);
    expect(await names('state_updated_at', 'desc')).toEqual(['a', 'c', 'b']);
    expect(await names('state_updated_at', 'asc')).toEqual(['b', 'c', 'a']);
    expect(await names('updated_at', 'desc')).toEqual(['c', 'a', 'b']);
  });

  it('patchState merges metadata into the latest checkpoint in place (thread id or config), 404/422 otherwise', async () => {
    const t = await client.threads.create();
    await client.runs.wait(t.thread_id, 'counter', { input: { count: 1 } });
    const before = await client.threads.getState(t.thread_id);
    const historyBefore = await client.threads.getHistory(t.thread_id, { limit: 50 });

    expect(await client.threads.patchState(t.thread_id, { reviewed: true, note: 'first' })).toEqual({});
    await client.threads.patchState({ configurable: { thread_id: t.thread_id } }, { note: 'second' });
    const after = await client.threads.getState(t.thread_id);
    // Same checkpoint, same values; its metadata keeps what it had and gains the patch (the later key wins).
    expect(after.checkpoint.checkpoint_id).toBe(before.checkpoint.checkpoint_id);
    expect(after.values).toEqual(before.values);
    expect(after.metadata).toEqual({ ...before.metadata, reviewed: true, note: 'second' });
    const historyAfter = await client.threads.getHistory(t.thread_id, { limit: 50 });
    expect(historyAfter.map((s) => s.checkpoint.checkpoint_id)).toEqual(
      historyBefore.map((s) => s.checkpoint.checkpoint_id),
    );
    expect(historyAfter[1]!.metadata).toEqual(historyBefore[1]!.metadata);

    // An older checkpoint, named in the body as for POST /threads/{id}/state.
    const older = historyBefore[2]!.checkpoint.checkpoint_id!;
    const res = await fetch(`${server.url}/threads/${t.thread_id}/state`, {
      method: 'PATCH',
      headers: { 'content-type': 'application/json' },
      body: JSON.stringify({ metadata: { pinned: 1 }, checkpoint_id: older }),
    });
    expect(res.status).toBe(200);
    expect(await res.json()).toEqual({});
    expect((await client.threads.getState(t.thread_id, older)).metadata).toMatchObject({ pinned: 1 });
    expect((await client.threads.getState(t.thread_id)).metadata).not.toHaveProperty('pinned');

    await expect(client.threads.patchState(randomUUID(), { a: 1 })).rejects.toThrow(/HTTP 404.*Thread not found/);
    for (const body of [{}, { metadata: 'nope' }, { metadata: [1] }]) {
      const bad = await fetch(`${server.url}/threads/${t.thread_id}/state`, {
        method: 'PATCH',
        headers: { 'content-type': 'application/json' },
        body: JSON.stringify(body),
      });
      expect(bad.status).toBe(422);
      expect(JSON.stringify(((await bad.json()) as { detail: unknown }).detail)).toContain('metadata');
    }
    const doc = (await (await fetch(`${server.url}/openapi.json`)).json()) as { paths: Record<string, any> };
    expect(doc.paths['/threads/{thread_id}/state'].patch.requestBody.content['application/json'].schema).toMatchObject({
      required: ['metadata'],
    });
    // A thread with no checkpoint yet has nothing to patch.
    const empty = await client.threads.create();
    await expect(client.threads.patchState(empty.thread_id, { a: 1 })).rejects.toThrow(/HTTP 404/);
  });

  it('pages history with `before` as the SDK sends it (a config), and as a flat checkpoint or an id', async () => {
    const t = await client.threads.create();
    await client.runs.wait(t.thread_id, 'counter', { input: { count: 1 } });
    await client.runs.wait(t.thread_id, 'counter', { input: { count: 1 } });
    const all = (await client.threads.getHistory(t.thread_id, { limit: 50 })).map((s) => s.checkpoint.checkpoint_id);
    expect(all.length).toBeGreaterThanOrEqual(6);
    const first = await client.threads.getHistory(t.thread_id, { limit: 3 });
    expect(first.map((s) => s.checkpoint.checkpoint_id)).toEqual(all.slice(0, 3));
    const last = first.at(-1)!.checkpoint;
    const next = await client.threads.getHistory(t.thread_id, {
      limit: 3,
      before: { configurable: { checkpoint_id: last.checkpoint_id! } },
    });
    expect(next.map((s) => s.checkpoint.checkpoint_id)).toEqual(all.slice(3, 6));
    const flat = await client.threads.getHistory(t.thread_id, { limit: 3, before: last as never });
    expect(flat.map((s) => s.checkpoint.checkpoint_id)).toEqual(all.slice(3, 6));
    const byId = await client.threads.getHistory(t.thread_id, { limit: 3, before: last.checkpoint_id as never });
    expect(byId.map((s) => s.checkpoint.checkpoint_id)).toEqual(all.slice(3, 6));
  });

  it('creates a thread from supersteps: each superstep is one step, its updates and commands applied together', async () => {
    const t = await client.threads.create({
      graphId: 'counter',
      supersteps: [
        {
          updates: [
            { values: { count: 1, steps: ['a'] }, asNode: 'first' },
            { values: { count: 10, steps: ['b'] }, asNode: 'second' },
          ],
        },
        { updates: [{ values: null, command: { update: { count: 100, steps: ['c'] } }, asNode: 'first' }] },
      ],
    });
    expect(t.values).toEqual({ count: 111, steps: ['a', 'b', 'c'] });
    const state = await client.threads.getState(t.thread_id);
    expect(state.values).toEqual({ count: 111, steps: ['a', 'b', 'c'] });
    const history = await client.threads.getHistory(t.thread_id, { limit: 50 });
    // One checkpoint per superstep.
    expect(history.map((s) => s.metadata!.source)).toEqual(['update', 'update']);
    expect(history.map((s) => s.metadata!.step)).toEqual([1, 0]);
    expect(history[1]!.values).toEqual({ count: 11, steps: ['a', 'b'] });

    // A step the graph refuses (an unknown node) leaves no thread behind.
    const id = randomUUID();
    await expect(
      client.threads.create({
        threadId: id,
        graphId: 'counter',
        supersteps: [{ updates: [{ values: { count: 1 }, asNode: 'nope' }] }],
      }),
    ).rejects.toThrow(/HTTP 400/);
    await expect(client.threads.get(id)).rejects.toThrow(/404/);
  });
});

// Subgraph checkpoints through the real SDK against a real server process on both stores: a checkpoint the client
// names with a subgraph's checkpoint_ns (as the parent's task shows it) is read, listed and updated in that
// subgraph, the thread's own values stay the root graph's, a namespace naming nothing is a 4xx, and the path's
// thread is the one read whatever thread_id the checkpoint object carries.
import { Client, type Checkpoint, type ThreadState } from '@langchain/langgraph-sdk';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { ServerProc } from '../helpers/process.ts';
import { startServerOnStore, type StoreServer } from '../helpers/store-server.ts';

const CONFIG = new URL('../fixtures/subgraph-state/langgraph.json', import.meta.url).pathname;

describe.each(['embedded', 'postgres'] as const)('subgraph checkpoints through the SDK (%s)', (store) => {
  let server: ServerProc;
  let client: Client;
  let running: StoreServer | undefined;

  beforeAll(async () => {
    running = await startServerOnStore(store, ['--config', CONFIG]);
    server = running.server;
    client = new Client({ apiUrl: server.url, callerOptions: { maxRetries: 0 } });
  });
  afterAll(async () => {
    await running?.close();
  });

  /** A thread stopped inside the "review" graph's subgraph, and the subgraph's state as the parent's task has it. */
  async function interruptedInSubgraph(topic: string) {
    const t = await client.threads.create();
    await client.runs.wait(t.thread_id, 'review', { input: { topic } });
    const root = await client.threads.getState(t.thread_id, undefined, { subgraphs: true });
    expect(root.next).toEqual(['child']);
    const task = root.tasks.find((k) => k.name === 'child')!;
    const sub = task.state as ThreadState | null;
    expect(sub).not.toBeNull();
    return { threadId: t.thread_id, root, sub: sub!, checkpoint: sub!.checkpoint };
  }

  const post = (path: string, body: unknown) =>
    fetch(`${server.url}${path}`, {
      method: 'POST',
      headers: { 'content-type': 'application/json' },
      body: JSON.stringify(body),
    });

  it("reads a subgraph's checkpoint named by the parent's task (getState with the checkpoint object)", async () => {
    const { threadId, root, sub, checkpoint } = await interruptedInSubgraph('cats');
    // The parent's task shows the subgraph: its whole state with subgraphs, its namespace without.
    expect(checkpoint.checkpoint_ns).toMatch(/^child:[0-9a-f-]+$/);
    expect(checkpoint.thread_id).toBe(threadId);
    expect(sub.values).toEqual({ topic: 'cats', draft: 'draft about cats' });
    expect(root.values).toEqual({ topic: 'cats' });
    const plain = await client.threads.getState(threadId);
    expect(plain.tasks[0]!.checkpoint).toMatchObject({ thread_id: threadId, checkpoint_ns: checkpoint.checkpoint_ns });
    expect(plain.tasks[0]!.state).toBeNull();

    const state = await client.threads.getState(threadId, checkpoint);
    expect(state.values).toEqual({ topic: 'cats', draft: 'draft about cats' });
    expect(state.next).toEqual(['review']);
    expect(state.checkpoint).toMatchObject({
      thread_id: threadId,
      checkpoint_ns: checkpoint.checkpoint_ns,
      checkpoint_id: checkpoint.checkpoint_id,
    });
    expect(state.parent_checkpoint).toMatchObject({ checkpoint_ns: checkpoint.checkpoint_ns });
    expect(state.parent_checkpoint!.checkpoint_id).not.toBe(checkpoint.checkpoint_id);
    expect(state.tasks.map((k) => k.name)).toEqual(['review']);
    expect(state.tasks[0]!.interrupts[0]!.value).toEqual({ question: 'approve?', draft: 'draft about cats' });
    expect(state.metadata).toMatchObject({ writes: { write: { draft: 'draft about cats' } } });

    // The namespace alone names its latest checkpoint; the task's namespace-only checkpoint works as it is.
    const latest = await client.threads.getState(threadId, { checkpoint_ns: checkpoint.checkpoint_ns } as Checkpoint);
    expect(latest.checkpoint.checkpoint_id).toBe(checkpoint.checkpoint_id);
    const viaTask = await client.threads.getState(threadId, plain.tasks[0]!.checkpoint!);
    expect(viaTask.checkpoint.checkpoint_id).toBe(checkpoint.checkpoint_id);
    // The subgraph's parent checkpoint, by id in the namespace.
    const older = await client.threads.getState(threadId, state.parent_checkpoint!);
    expect(older.checkpoint.checkpoint_ns).toBe(checkpoint.checkpoint_ns);
    expect(older.values).toEqual({ topic: 'cats' });
    expect(older.next).toEqual(['write']);
  });

  it("lists a subgraph's checkpoints with getHistory({ checkpoint: { checkpoint_ns } }), paged with before", async () => {
    const { threadId, checkpoint } = await interruptedInSubgraph('owls');
    const ns = checkpoint.checkpoint_ns;
    const history = await client.threads.getHistory(threadId, { limit: 50, checkpoint: { checkpoint_ns: ns } });
    expect(history.length).toBeGreaterThanOrEqual(3);
    for (const s of history) expect(s.checkpoint).toMatchObject({ thread_id: threadId, checkpoint_ns: ns });
    expect(history[0]!.checkpoint.checkpoint_id).toBe(checkpoint.checkpoint_id);
    expect(history[0]!.values).toEqual({ topic: 'owls', draft: 'draft about owls' });
    expect(history.at(-1)!.metadata).toMatchObject({ source: 'input' });
    const rootIds = (await client.threads.getHistory(threadId, { limit: 50 })).map((s) => s.checkpoint.checkpoint_id);
    for (const s of history) expect(rootIds).not.toContain(s.checkpoint.checkpoint_id);

    const page = await client.threads.getHistory(threadId, {
      limit: 1,
      checkpoint: { checkpoint_ns: ns },
      before: { configurable: { checkpoint_id: history[0]!.checkpoint.checkpoint_id! } },
    });
    expect(page.map((s) => s.checkpoint.checkpoint_id)).toEqual([history[1]!.checkpoint.checkpoint_id]);
    const filtered = await client.threads.getHistory(threadId, {
      limit: 50,
      checkpoint: { checkpoint_ns: ns },
      metadata: { source: 'input' },
    });
    expect(filtered.map((s) => s.checkpoint.checkpoint_id)).toEqual([history.at(-1)!.checkpoint.checkpoint_id]);
  });

  it("updates a subgraph's checkpoint: the subgraph sees it, the thread keeps the root graph's values", async () => {
    const { threadId, checkpoint } = await interruptedInSubgraph('bees');
    const rootBefore = await client.threads.getState(threadId);
    const res = (await client.threads.updateState(threadId, { values: { draft: 'edited draft' }, checkpoint })) as {
      checkpoint: Checkpoint;
    };
    expect(res.checkpoint).toMatchObject({ thread_id: threadId, checkpoint_ns: checkpoint.checkpoint_ns });
    expect(res.checkpoint.checkpoint_id).not.toBe(checkpoint.checkpoint_id);

    const sub = await client.threads.getState(threadId, { checkpoint_ns: checkpoint.checkpoint_ns } as Checkpoint);
    expect(sub.checkpoint.checkpoint_id).toBe(res.checkpoint.checkpoint_id);
    expect(sub.values).toEqual({ topic: 'bees', draft: 'edited draft' });
    expect(sub.metadata).toMatchObject({ source: 'update' });

    // The root graph and the thread's record are as they were.
    const rootAfter = await client.threads.getState(threadId);
    expect(rootAfter.values).toEqual({ topic: 'bees' });
    expect(rootAfter.checkpoint.checkpoint_id).toBe(rootBefore.checkpoint.checkpoint_id);
    expect(rootAfter.next).toEqual(['child']);
    const thread = await client.threads.get(threadId);
    expect(thread.values).toEqual({ topic: 'bees' });
    expect(thread.status).toBe('interrupted');

    // Resumed, the subgraph carries on from the updated checkpoint.
    const out = await client.runs.wait(threadId, 'review', { command: { resume: 'ok' } });
    expect(out).toEqual({ topic: 'bees', result: 'edited draft (ok)' });
  });

  it('answers a namespace that names no subgraph, or no checkpoint of it, with a 4xx and a message', async () => {
    const { threadId, checkpoint } = await interruptedInSubgraph('ants');
    const noSubgraph = /HTTP 404.*Subgraph \\"nope\\" not found/;
    const noCheckpoint = /HTTP 404.*No checkpoint found in namespace \\"child:not-a-task\\"/;
    for (const [ns, re] of [
      ['nope:123', noSubgraph],
      ['child:not-a-task', noCheckpoint],
    ] as const) {
      await expect(client.threads.getState(threadId, { checkpoint_ns: ns } as Checkpoint)).rejects.toThrow(re);
      await expect(
        client.threads.getState(threadId, { ...checkpoint, checkpoint_ns: ns }, { subgraphs: true }),
      ).rejects.toThrow(re);
      await expect(client.threads.getHistory(threadId, { checkpoint: { checkpoint_ns: ns } })).rejects.toThrow(re);
      await expect(
        client.threads.updateState(threadId, {
          values: { draft: 'x' },
          checkpoint: { checkpoint_ns: ns } as Checkpoint,
        }),
      ).rejects.toThrow(re);
    }
    // The refused update started no history there.
    await expect(
      client.threads.getState(threadId, { checkpoint_ns: 'child:not-a-task' } as Checkpoint),
    ).rejects.toThrow(noCheckpoint);
    // A checkpoint id the subgraph's namespace does not have.
    await expect(
      client.threads.getState(threadId, { ...checkpoint, checkpoint_id: '1f000000-0000-6000-8000-000000000000' }),
    ).rejects.toThrow(/HTTP 404.*Checkpoint 1f000000-0000-6000-8000-000000000000 not found in namespace/);

    // Malformed namespaces: 400 with {detail}.
    for (const ns of ['|child:1', ':abc', 'child:1||x', 'x'.repeat(1001)]) {
      for (const [path, body] of [
        [`/threads/${threadId}/state/checkpoint`, { checkpoint: { checkpoint_ns: ns } }],
        [`/threads/${threadId}/history`, { checkpoint: { checkpoint_ns: ns } }],
        [`/threads/${threadId}/state`, { values: { draft: 'x' }, checkpoint: { checkpoint_ns: ns } }],
      ] as const) {
        const res = await post(path, body);
        expect(res.status).toBe(400);
        expect(((await res.json()) as { detail: string }).detail).toMatch(/checkpoint_ns .*(malformed|too long)/);
      }
    }
    const res = await post(`/threads/${threadId}/state/checkpoint`, { checkpoint: { checkpoint_ns: 'nope:1' } });
    expect(res.status).toBe(404);
    expect(await res.json()).toEqual({
      detail: 'Subgraph "nope" not found: checkpoint_ns "nope:1" names no subgraph of the thread\'s graph',
    });

    // A thread that never ran has no subgraph checkpoints either.
    const empty = await client.threads.create();
    await expect(client.threads.getState(empty.thread_id, checkpoint)).rejects.toThrow(/HTTP 404/);
    await expect(
      client.threads.getHistory(empty.thread_id, { checkpoint: { checkpoint_ns: checkpoint.checkpoint_ns } }),
    ).rejects.toThrow(/HTTP 404/);
  });

  it("reads the path's thread whatever thread_id the checkpoint object names", async () => {
    const a = await interruptedInSubgraph('cats');
    const b = await interruptedInSubgraph('dogs');
    const named = { ...a.checkpoint, thread_id: b.threadId };

    const state = await client.threads.getState(a.threadId, named);
    expect(state.values).toEqual({ topic: 'cats', draft: 'draft about cats' });
    expect(state.checkpoint).toMatchObject({ thread_id: a.threadId, checkpoint_ns: a.checkpoint.checkpoint_ns });
    const history = await client.threads.getHistory(a.threadId, { checkpoint: named as never, limit: 50 });
    expect(history[0]!.checkpoint).toMatchObject({ thread_id: a.threadId, checkpoint_ns: a.checkpoint.checkpoint_ns });
    expect(history[0]!.values).toEqual({ topic: 'cats', draft: 'draft about cats' });
    // B's namespace is not one of A's.
    await expect(client.threads.getState(a.threadId, b.checkpoint)).rejects.toThrow(/HTTP 404/);

    const res = await client.threads.updateState(a.threadId, { values: { draft: 'written to a' }, checkpoint: named });
    expect(res.configurable!.thread_id).toBe(a.threadId);
    expect(
      (await client.threads.getState(a.threadId, { checkpoint_ns: a.checkpoint.checkpoint_ns } as Checkpoint)).values,
    ).toEqual({ topic: 'cats', draft: 'written to a' });
    const bSub = await client.threads.getState(b.threadId, { checkpoint_ns: b.checkpoint.checkpoint_ns } as Checkpoint);
    expect(bSub.values).toEqual({ topic: 'dogs', draft: 'draft about dogs' });
    expect(bSub.checkpoint.checkpoint_id).toBe(b.checkpoint.checkpoint_id);
  });

  it("reads a nested subgraph's namespace (child:<id>|grandchild:<id>) found through the child's history", async () => {
    const t = await client.threads.create();
    await client.runs.wait(t.thread_id, 'nested', { input: { depth: 1 } });
    const rootHistory = await client.threads.getHistory(t.thread_id, { limit: 50 });
    const before = rootHistory.find((s) => s.next.includes('child'))!;
    const childCp = before.tasks[0]!.checkpoint!;
    expect(childCp.checkpoint_ns).toMatch(/^child:[0-9a-f-]+$/);

    const childHistory = await client.threads.getHistory(t.thread_id, { limit: 50, checkpoint: childCp });
    const childBefore = childHistory.find((s) => s.next.includes('grandchild'))!;
    const leafCp = childBefore.tasks[0]!.checkpoint!;
    expect(leafCp.checkpoint_ns).toMatch(/^child:[0-9a-f-]+\|grandchild:[0-9a-f-]+$/);
    expect(leafCp.checkpoint_ns.startsWith(`${childCp.checkpoint_ns}|`)).toBe(true);

    const leaf = await client.threads.getState(t.thread_id, leafCp);
    expect(leaf.values).toEqual({ depth: 1, leaf_note: 'leaf' });
    expect(leaf.checkpoint.checkpoint_ns).toBe(leafCp.checkpoint_ns);
    expect(leaf.next).toEqual([]);
    // Reading the child's latest checkpoint with subgraphs shows no pending task (the child finished).
    const child = await client.threads.getState(t.thread_id, childCp, { subgraphs: true });
    expect(child.values).toMatchObject({ depth: 1 });
    expect(child.checkpoint.checkpoint_ns).toBe(childCp.checkpoint_ns);
  });

  it("patches a subgraph checkpoint's metadata in place when the body names it; the root's stays as it was", async () => {
    const { threadId, checkpoint } = await interruptedInSubgraph('owls');
    const rootBefore = await client.threads.getState(threadId);
    const historyBefore = await client.threads.getHistory(threadId, {
      checkpoint: { checkpoint_ns: checkpoint.checkpoint_ns },
    });
    const patch = (body: unknown) =>
      fetch(`${server.url}/threads/${threadId}/state`, {
        method: 'PATCH',
        headers: { 'content-type': 'application/json' },
        body: JSON.stringify(body),
      });
    const res = await patch({ metadata: { reviewed: 'by-owl' }, checkpoint });
    expect(res.status).toBe(200);
    const sub = await client.threads.getState(threadId, checkpoint);
    expect(sub.metadata).toMatchObject({ reviewed: 'by-owl' });
    expect(sub.checkpoint.checkpoint_id).toBe(checkpoint.checkpoint_id);
    const historyAfter = await client.threads.getHistory(threadId, {
      checkpoint: { checkpoint_ns: checkpoint.checkpoint_ns },
    });
    expect(historyAfter.map((h) => h.checkpoint.checkpoint_id)).toEqual(
      historyBefore.map((h) => h.checkpoint.checkpoint_id),
    );
    const rootAfter = await client.threads.getState(threadId);
    expect(rootAfter.metadata).not.toHaveProperty('reviewed');
    expect(rootAfter.checkpoint.checkpoint_id).toBe(rootBefore.checkpoint.checkpoint_id);

    const nowhere = await patch({
      metadata: { x: 1 },
      checkpoint: { checkpoint_ns: 'child:00000000-0000-0000-0000-000000000000' },
    });
    expect(nowhere.status).toBe(404);
    expect(((await nowhere.json()) as { detail: string }).detail).toContain('no checkpoint to patch in namespace');
    const malformed = await patch({ metadata: { x: 1 }, checkpoint: { checkpoint_ns: '|' } });
    expect(malformed.status).toBe(400);
  });
});

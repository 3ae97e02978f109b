// The real @langchain/langgraph-sdk client against a real `agentplane agent-server` process on both stores.
import { Client } from '@langchain/langgraph-sdk';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { systemAssistantId } from '../../../src/agent-server/graphs/index.ts';
import { FIXTURE_CONFIG } from '../helpers/harness.ts';
import type { ServerProc } from '../helpers/process.ts';
import { startServerOnStore, type StoreServer } from '../helpers/store-server.ts';

describe.each(['embedded', 'postgres'] as const)('SDK against a server process (%s)', (store) => {
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

  it('threads and runs: create, get, list, join, state, history, update, copy, search, delete', async () => {
    const thread = await client.threads.create({ metadata: { suite: 'sdk' } });
    let runIdFromHeader: string | undefined;
    const run = await client.runs.create(thread.thread_id, 'counter', {
      input: { count: 2 },
      onRunCreated: (m) => (runIdFromHeader = m.run_id),
    });
    expect(runIdFromHeader).toBe(run.run_id);
    expect(run.status).toBe('pending');
    expect(run.assistant_id).toBe(systemAssistantId('counter'));
    const values = await client.runs.join(thread.thread_id, run.run_id);
    expect(values).toEqual({ count: 13, steps: ['first', 'second'] });
    expect((await client.runs.get(thread.thread_id, run.run_id)).status).toBe('success');
    expect((await client.runs.list(thread.thread_id)).map((r) => r.run_id)).toEqual([run.run_id]);
    const state = await client.threads.getState(thread.thread_id);
    expect(state.values).toEqual(values);
    expect(state.next).toEqual([]);
    expect(state.checkpoint.checkpoint_id).toEqual(expect.any(String));
    const history = await client.threads.getHistory(thread.thread_id, { limit: 2 });
    expect(history).toHaveLength(2);
    await client.threads.updateState(thread.thread_id, { values: { count: 100 }, asNode: 'second' });
    expect((await client.threads.getState(thread.thread_id)).values).toMatchObject({ count: 113 });
    const copy = await client.threads.copy(thread.thread_id);
    expect((await client.threads.getState(copy.thread_id)).values).toMatchObject({ count: 113 });
    const found = await client.threads.search({ metadata: { suite: 'sdk' } });
    expect(found.map((t) => t.thread_id).sort()).toEqual([thread.thread_id, copy.thread_id].sort());
    expect(await client.threads.count({ metadata: { suite: 'sdk' } })).toBe(2);
    await client.threads.delete(copy.thread_id);
    await expect(client.threads.get(copy.thread_id)).rejects.toThrow(/404/);
  });

  it('wait, stateless wait, errors, HITL resume and cancel through the SDK', async () => {
    const t = await client.threads.create();
    expect(await client.runs.wait(t.thread_id, 'counter', { input: { count: 0 } })).toEqual({
      count: 11,
      steps: ['first', 'second'],
    });
    expect(await client.runs.wait(null, 'counter', { input: { count: 1 } })).toEqual({
      count: 12,
      steps: ['first', 'second'],
    });
    await expect(client.runs.wait(t.thread_id, 'fail', { input: { x: 1 } })).rejects.toThrow(/FixtureFailure/);
    expect((await client.threads.get(t.thread_id)).status).toBe('error');

    const h = await client.threads.create();
    await client.runs.wait(h.thread_id, 'hitl', { input: { question: 'why?' } });
    const paused = await client.threads.getState(h.thread_id);
    expect(paused.next).toEqual(['ask']);
    expect((await client.threads.get(h.thread_id)).status).toBe('interrupted');
    const done = await client.runs.wait(h.thread_id, 'hitl', { command: { resume: 'because' } });
    expect(done).toMatchObject({ answer: 'because' });

    const s = await client.threads.create();
    const slow = await client.runs.create(s.thread_id, 'slow', { input: { delay_ms: 30_000, mark: 'a' } });
    await expect(client.runs.create(s.thread_id, 'slow', { input: { delay_ms: 0 } })).rejects.toThrow(/409/);
    await client.runs.cancel(s.thread_id, slow.run_id, true);
    expect((await client.runs.get(s.thread_id, slow.run_id)).status).toBe('interrupted');
  });

  it('streams runs as server-sent events (values, updates, errors, joining a run)', async () => {
    const t = await client.threads.create();
    const events: Array<{ event: string; data: any }> = [];
    for await (const e of client.runs.stream(t.thread_id, 'counter', {
      input: { count: 1 },
      streamMode: ['values', 'updates'],
    })) {
      events.push(e as { event: string; data: any });
    }
    expect(events[0]!.event).toBe('metadata');
    expect(events[0]!.data.run_id).toEqual(expect.any(String));
    expect(events.filter((e) => e.event === 'updates').map((e) => Object.keys(e.data)[0])).toEqual(['first', 'second']);
    expect(events.filter((e) => e.event === 'values').at(-1)!.data).toEqual({ count: 12, steps: ['first', 'second'] });
    expect((await client.runs.get(t.thread_id, events[0]!.data.run_id)).status).toBe('success');

    const failed: string[] = [];
    for await (const e of client.runs.stream(t.thread_id, 'fail', { input: { x: 1 } })) failed.push(e.event);
    expect(failed[0]).toBe('metadata');
    expect(failed.at(-1)).toBe('error');

    const stateless: Array<{ event: string; data: any }> = [];
    for await (const e of client.runs.stream(null, 'counter', { input: { count: 0 } })) stateless.push(e as never);
    expect(stateless.at(-1)!.data).toEqual({ count: 11, steps: ['first', 'second'] });

    const slow = await client.runs.create(t.thread_id, 'slow', { input: { delay_ms: 500, mark: 'j' } });
    const joined: Array<{ event: string; data: any }> = [];
    for await (const e of client.runs.joinStream(t.thread_id, slow.run_id)) joined.push(e as never);
    expect(joined.filter((e) => e.event === 'values').at(-1)!.data.marks).toEqual(['start:j', 'done:j']);
  });

  it('assistants through the SDK', async () => {
    const sys = await client.assistants.get('counter');
    expect(sys.assistant_id).toBe(systemAssistantId('counter'));
    const a = await client.assistants.create({ graphId: 'hitl', name: 'asker', metadata: { k: 1 } });
    expect((await client.assistants.search({ metadata: { k: 1 } })).map((x) => x.assistant_id)).toEqual([
      a.assistant_id,
    ]);
    expect(await client.assistants.count({ graphId: 'hitl' })).toBe(2);
    const updated = await client.assistants.update(a.assistant_id, { name: 'asker2' });
    expect(updated.name).toBe('asker2');
    const graph = await client.assistants.getGraph(a.assistant_id);
    expect(graph.nodes.map((n) => n.id)).toEqual(expect.arrayContaining(['prepare', 'ask']));
    await client.assistants.delete(a.assistant_id);
    await expect(client.assistants.get(a.assistant_id)).rejects.toThrow(/404/);
  });
});

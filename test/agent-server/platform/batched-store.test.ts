// The event-driven AsyncBatchedStore (platform/batched-store.ts): same batching and results as LangGraph's polling
// queue, nothing scheduled while idle, and the store still reaches nodes through getStore() / config.store; in a
// real server process, runs on the main thread and on executor threads get the event-driven wrapper.
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path, { join } from 'node:path';
import { Client } from '@langchain/langgraph-sdk';
import { AsyncBatchedStore, InMemoryStore, type Operation } from '@langchain/langgraph-checkpoint';
import { Annotation, getStore, MemorySaver, StateGraph } from '@langchain/langgraph';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { makeBatchedStoreEventDriven, patchBatchedStoreOf } from '../../../src/agent-server/platform/batched-store.ts';
import { startServerProcess, type ServerProc } from '../helpers/process.ts';

const PROBE_CONFIG = new URL('../fixtures/store-wrapper/langgraph.json', import.meta.url).pathname;

class CountingStore extends InMemoryStore {
  batches: number[] = [];
  override async batch<Op extends readonly Operation[]>(ops: Op) {
    this.batches.push(ops.length);
    return super.batch(ops);
  }
}

type Internals = { processingTask: Promise<void> | null; running: boolean };

beforeAll(async () => {
  const langgraphDir = path.resolve('node_modules/@langchain/langgraph');
  expect(await patchBatchedStoreOf(langgraphDir)).toBe(true);
});

describe('event-driven AsyncBatchedStore', () => {
  it('refuses a class of another shape and is idempotent on the patched one', () => {
    expect(makeBatchedStoreEventDriven(class {})).toBe(false);
    expect(makeBatchedStoreEventDriven(undefined)).toBe(false);
    expect(makeBatchedStoreEventDriven(AsyncBatchedStore)).toBe(true);
  });

  it('sends operations issued together as one batch and answers each', async () => {
    const inner = new CountingStore();
    const store = new AsyncBatchedStore(inner);
    await store.start();
    await Promise.all([store.put(['a'], 'k1', { v: 1 }), store.put(['a'], 'k2', { v: 2 })]);
    const [one, two, missing] = await Promise.all([
      store.get(['a'], 'k1'),
      store.get(['a'], 'k2'),
      store.get(['a'], 'nope'),
    ]);
    expect(one?.value).toEqual({ v: 1 });
    expect(two?.value).toEqual({ v: 2 });
    expect(missing).toBeNull();
    expect(inner.batches).toEqual([2, 3]);
    const found = await store.search(['a']);
    expect(found.map((i) => i.key).sort()).toEqual(['k1', 'k2']);
    await store.stop();
  });

  it('schedules nothing while idle and stops without waiting on a poll', async () => {
    const inner = new CountingStore();
    const store = new AsyncBatchedStore(inner);
    await store.start();
    expect((store as unknown as Internals).processingTask).toBeNull();
    await new Promise((r) => setTimeout(r, 20));
    expect(inner.batches).toEqual([]);
    expect((store as unknown as Internals).processingTask).toBeNull();
    await store.stop();
    expect((store as unknown as Internals).running).toBe(false);
  });

  it('rejects every operation of a batch the wrapped store fails, then keeps serving', async () => {
    const inner = new CountingStore();
    let fail = true;
    const original = inner.batch.bind(inner);
    inner.batch = (async (ops: Operation[]) => {
      if (fail) throw new Error('store down');
      return original(ops);
    }) as typeof inner.batch;
    const store = new AsyncBatchedStore(inner);
    await store.start();
    const results = await Promise.allSettled([store.get(['x'], 'a'), store.get(['x'], 'b')]);
    expect(results.map((r) => r.status)).toEqual(['rejected', 'rejected']);
    expect((results[0] as PromiseRejectedResult).reason.message).toBe('store down');
    fail = false;
    await store.put(['x'], 'a', { ok: true });
    expect((await store.get(['x'], 'a'))?.value).toEqual({ ok: true });
    await store.stop();
  });

  it('answers operations still queued when stop() is called', async () => {
    const inner = new CountingStore();
    const store = new AsyncBatchedStore(inner);
    await store.start();
    const put = store.put(['q'], 'k', { n: 1 });
    await store.stop();
    await put;
    expect(inner.batches).toEqual([1]);
  });

  it('reaches graph nodes: getStore() and config.store write and read through it', async () => {
    const inner = new CountingStore();
    const State = Annotation.Root({ seen: Annotation<string>() });
    const graph = new StateGraph(State)
      .addNode('write', async () => {
        await getStore()!.put(['mem', 'u1'], 'fact', { text: 'likes tea' });
        return {};
      })
      .addNode('read', async (_s, config) => {
        const item = await config.store!.get(['mem', 'u1'], 'fact');
        return { seen: (item?.value as { text: string }).text };
      })
      .addEdge('__start__', 'write')
      .addEdge('write', 'read')
      .compile({ checkpointer: new MemorySaver(), store: inner });
    const out = await graph.invoke({}, { configurable: { thread_id: 't1' } });
    expect(out.seen).toBe('likes tea');
    expect(inner.batches.length).toBeGreaterThanOrEqual(2);
  });
});

describe.each([0, 1])('a real server process (executor threads: %i)', (threads) => {
  let dir: string;
  let server: ServerProc;

  beforeAll(async () => {
    dir = mkdtempSync(join(tmpdir(), 'ap-as-wrapper-'));
    server = await startServerProcess([
      '--config',
      PROBE_CONFIG,
      '--data-dir',
      join(dir, 'data'),
      '--executor-threads',
      String(threads),
    ]);
  }, 90_000);
  afterAll(async () => {
    await server?.stop();
    rmSync(dir, { recursive: true, force: true });
  });

  it('gives runs the event-driven wrapper around the server store', async () => {
    const client = new Client({ apiUrl: server.url });
    // Executor threads start with the first run and load in the background: poll until one runs the graph.
    let out: Record<string, unknown> = {};
    for (let i = 0; i < 100; i++) {
      const thread = await client.threads.create();
      out = (await client.runs.wait(thread.thread_id, 'probe', { input: {} })) as Record<string, unknown>;
      if (out.on_main_thread === (threads === 0)) break;
      await new Promise((r) => setTimeout(r, 200));
    }
    expect(out).toEqual({ event_driven: true, polling: false, read_back: { ok: true }, on_main_thread: threads === 0 });
  }, 120_000);
});

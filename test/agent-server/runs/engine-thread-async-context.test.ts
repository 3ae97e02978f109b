// The engine's thread runs graphs itself only until its executor threads are ready. Those runs switch LangChain's
// AsyncLocalStorage on, and an enabled one keeps Node's promise hooks on for every promise the thread makes later.
// Once the last of them is over and a thread runs the next ones, the engine's thread switches it off again
// (ThreadExecutor.forget -> releaseRunContext); a later graph call on the thread switches it on as it needs.
import { join } from 'node:path';
import { AsyncLocalStorageProviderSingleton } from '@langchain/core/singletons';
import { Annotation, END, getConfig, MemorySaver, START, StateGraph } from '@langchain/langgraph';
import { describe, expect, it } from 'vitest';
import type { ExecRequest, ExecResult, RunExecutor } from '../../../src/agent-server/runs/executor.ts';
import { installLeanRunContext } from '../../../src/agent-server/shims/lean-run-context.ts';
import { useThreadExecutor } from '../helpers/thread-executor.ts';

const State = Annotation.Root({ seen: Annotation<string | undefined>() });
const graph = new StateGraph(State)
  .addNode('who', async () => {
    // Gives the other run a turn in between, so both are in flight at once.
    await new Promise((r) => setTimeout(r, 5));
    return { seen: String(getConfig().configurable?.thread_id) };
  })
  .addEdge(START, 'who')
  .addEdge('who', END)
  .compile({ checkpointer: new MemorySaver() });

/** Stands in for the engine's inline executor: runs a real graph on this thread, in LangChain's context. */
class GraphOnThisThread implements RunExecutor {
  readonly seen: string[] = [];
  async execute(req: ExecRequest): Promise<ExecResult> {
    const out = await graph.invoke({}, { configurable: { thread_id: req.run.thread_id } });
    this.seen.push(String(out.seen));
    return { ok: true, outcome: { status: 'success', values: out } } as ExecResult;
  }
  discard(): void {}
  async settle(): Promise<void> {}
  forget(): void {}
  async close(): Promise<void> {}
}

const request = (n: number) => ({ run: { run_id: `run-${n}`, thread_id: `thread-${n}` } }) as unknown as ExecRequest;
const langchainContext = () => AsyncLocalStorageProviderSingleton.getInstance() as unknown as { enabled?: boolean };

describe("the engine thread's async context", () => {
  const startExecutor = useThreadExecutor();

  it('is switched off once the runs it executed before the threads were ready are over, and on again when needed', async () => {
    installLeanRunContext();
    const inline = new GraphOnThisThread();
    const executor = startExecutor({ inline });
    // No thread can have said it is ready yet (that comes as a message): both runs execute on this thread.
    const signal = new AbortController().signal;
    const runs = [executor.execute(request(1), () => {}, signal), executor.execute(request(2), () => {}, signal)];
    const results = await Promise.all(runs);
    expect(results.map((r) => r.ok)).toEqual([true, true]);
    expect(inline.seen.sort()).toEqual(['thread-1', 'thread-2']);
    expect(langchainContext().enabled).toBe(true);

    await executor.whenReady();
    executor.forget('run-1');
    expect(langchainContext().enabled).toBe(true); // run-2 is not forgotten yet
    executor.forget('run-2');
    expect(langchainContext().enabled).toBe(false);

    // A graph called on this thread later still sees its own config.
    const again = await graph.invoke({}, { configurable: { thread_id: 'later' } });
    expect(again.seen).toBe('later');
    expect(langchainContext().enabled).toBe(true);
  });

  it('stays on while no executor thread is ready to take the next run', async () => {
    installLeanRunContext();
    // A config that cannot load: the thread never becomes ready, and runs stay on this thread.
    const executor = startExecutor({
      inline: new GraphOnThisThread(),
      configPath: (dir) => join(dir, 'missing/langgraph.json'),
    });
    const result = await executor.execute(request(3), () => {}, new AbortController().signal);
    expect(result.ok).toBe(true);
    await executor.whenReady();
    executor.forget('run-3');
    expect(langchainContext().enabled).toBe(true);
  });
});

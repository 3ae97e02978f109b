// CPU that 32 concurrent runs cost while each waits 3 s in a node, with a memory store attached: LangGraph's
// polling AsyncBatchedStore ("poll") against the event-driven one the agent server installs ("event",
// src/agent-server/platform/batched-store.ts), and without a store ("none"). No HTTP, no database.
//   node --import tsx bench/store-wrapper-idle.ts poll|event|none
import path from 'node:path';
import { Annotation, InMemoryStore, MemorySaver, START, StateGraph } from '@langchain/langgraph';
import { patchBatchedStoreOf } from '../src/agent-server/platform/batched-store.ts';

const mode = process.argv[2];
if (mode !== 'poll' && mode !== 'event' && mode !== 'none')
  throw new Error('usage: store-wrapper-idle.ts poll|event|none');
if (mode === 'event' && !(await patchBatchedStoreOf(path.resolve('node_modules/@langchain/langgraph')))) {
  throw new Error('could not patch AsyncBatchedStore');
}
const State = Annotation.Root({ done: Annotation<boolean>() });
const graph = new StateGraph(State)
  .addNode('wait', async () => {
    await new Promise((r) => setTimeout(r, 3000));
    return { done: true };
  })
  .addEdge(START, 'wait')
  .compile({ checkpointer: new MemorySaver(), ...(mode === 'none' ? {} : { store: new InMemoryStore() }) });
const before = process.cpuUsage();
const started = Date.now();
await Promise.all(Array.from({ length: 32 }, (_, i) => graph.invoke({}, { configurable: { thread_id: `t${i}` } })));
const cpu = process.cpuUsage(before);
console.log(
  JSON.stringify({ mode, runs: 32, wall_ms: Date.now() - started, cpu_ms: Math.round((cpu.user + cpu.system) / 1000) }),
);

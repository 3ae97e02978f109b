// Which graph (and run) the code executing right now belongs to, carried across awaits, so that log lines written
// by graph code name their graph and run without the graph passing anything along.
import { AsyncLocalStorage } from 'node:async_hooks';

export interface GraphContext {
  graph_id: string;
  run_id?: string;
  thread_id?: string;
  assistant_id?: string;
}

const storage = new AsyncLocalStorage<GraphContext>();

export function withGraphContext<T>(ctx: GraphContext, fn: () => T): T {
  return storage.run(ctx, fn);
}

export function currentGraphContext(): GraphContext | undefined {
  return storage.getStore();
}

// Which graph (and run) the code executing right now belongs to, so that log lines written by graph code name
// their graph and run without the graph passing anything along. Inside a run that is LangGraph's own runnable
// config (its configurable carries the run's ids); while a graph module's top-level code runs, an async context
// set around the import. That context is switched off once the graphs are loaded: every enabled
// AsyncLocalStorage adds work to every promise the process creates, runs included.
import { AsyncLocalStorage } from 'node:async_hooks';
import { getConfig } from '@langchain/langgraph';

export interface GraphContext {
  graph_id: string;
  run_id?: string;
  thread_id?: string;
  assistant_id?: string;
  langgraph_node?: string;
}

const importing = new AsyncLocalStorage<GraphContext>();

/** Runs a graph module's import with its graph id as the context of what it logs at top level. */
export function withImportContext<T>(ctx: GraphContext, fn: () => T): T {
  return importing.run(ctx, fn);
}

/** Called when loading is over: later code (runs) finds its context in the runnable config. */
export function endImportContexts(): void {
  importing.disable();
}

function runContext(): GraphContext | undefined {
  let config: ReturnType<typeof getConfig> | undefined;
  try {
    config = getConfig();
  } catch {
    return undefined;
  }
  const c = config?.configurable as Record<string, unknown> | undefined;
  if (typeof c?.graph_id !== 'string') return undefined;
  const ctx: GraphContext = { graph_id: c.graph_id };
  for (const k of ['run_id', 'thread_id', 'assistant_id'] as const) if (typeof c[k] === 'string') ctx[k] = c[k];
  const node = (config?.metadata as Record<string, unknown> | undefined)?.langgraph_node;
  if (typeof node === 'string') ctx.langgraph_node = node;
  return ctx;
}

export function currentGraphContext(): GraphContext | undefined {
  return importing.getStore() ?? runContext();
}

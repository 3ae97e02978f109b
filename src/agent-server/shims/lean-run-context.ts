// LangChain puts every runnable call (each graph node, each tool, each model call) in an AsyncLocalStorage scope
// holding a langsmith RunTree, so getRunnableConfig(), context variables and `traceable` code inside see it. With
// tracing on, that RunTree is the tracer's and is what gets posted to LangSmith. With tracing off, @langchain/core
// builds a fresh RunTree({ tracingEnabled: false }) per call anyway: a uuid7 from crypto random bytes, dozens of
// property definitions and environment reads, about 0.1 ms each, ~10 per run of a small graph. Nothing reads its id
// or posts it (tracing is off for it, and children inherit that).
//
// installLeanRunContext() keeps LangChain's own code for every call that traces (tracing on in the environment, a
// LangChain tracer among the call's callbacks, or a traced RunTree around it) and, for the rest, puts in the scope
// a copy of one disabled RunTree built once per thread with the call's config: the same kind of object LangChain
// would have built (a RunTree, tracing disabled, the config under LangChain's child-config key, the context
// variables carried over), minus the per-call uuid and env reads. The copies share that RunTree's id, which nothing
// reads while tracing is off.
import { AsyncLocalStorageProviderSingleton } from '@langchain/core/singletons';
import { RunTree } from 'langsmith/run_trees';

/** LangChain's keys in the scope's RunTree (Symbol.for: the same symbols @langchain/core uses). */
const LC_CHILD_KEY = Symbol.for('lc:child_config');
const CONTEXT_VARIABLES_KEY = Symbol.for('lc:context_variables');
const INSTALLED = Symbol.for('agentplane.lean-run-context');

const TRACING_ENV = ['LANGSMITH_TRACING_V2', 'LANGCHAIN_TRACING_V2', 'LANGSMITH_TRACING', 'LANGCHAIN_TRACING'];

/** Tracing switched on in the environment, as @langchain/core reads it (per call: it may change at run time). */
export function tracingEnabledByEnv(): boolean {
  for (const name of TRACING_ENV) if (process.env[name] === 'true') return true;
  return false;
}

type Handler = { name?: unknown };
type Callbacks = Handler[] | { handlers?: Handler[]; inheritableHandlers?: Handler[] } | undefined;

const isTracer = (h: Handler | undefined) => h?.name === 'langchain_tracer';

/** Whether a call's callbacks carry a LangChain tracer (then LangChain's own scope, with the tracer's RunTree). */
function hasTracer(callbacks: Callbacks): boolean {
  if (!callbacks) return false;
  if (Array.isArray(callbacks)) return callbacks.some(isTracer);
  return !!(callbacks.handlers?.some(isTracer) || callbacks.inheritableHandlers?.some(isTracer));
}

type Scope = Record<PropertyKey, unknown> & { tracingEnabled?: boolean; extra?: Record<PropertyKey, unknown> };
type RunWithConfig = (config: unknown, callback: () => unknown, avoidCreatingRootRunTree?: boolean) => unknown;

/** Installs the lean scope on this thread's LangChain (once; later calls do nothing). */
export function installLeanRunContext(): void {
  const provider = AsyncLocalStorageProviderSingleton as unknown as Record<PropertyKey, unknown> & {
    runWithConfig: RunWithConfig;
    getInstance(): { getStore(): Scope | undefined; run(store: unknown, cb: () => unknown): unknown };
  };
  if (provider[INSTALLED]) return;
  provider[INSTALLED] = true;
  const original = provider.runWithConfig.bind(provider);
  const template: Record<string, unknown> = { ...new RunTree({ name: '<runnable_lambda>', tracingEnabled: false }) };
  provider.runWithConfig = (config, callback, avoidCreatingRootRunTree) => {
    const cfg = config as { callbacks?: Callbacks } | undefined;
    const storage = provider.getInstance();
    const previous = storage.getStore();
    // Everything that may trace, and calls that want no new RunTree, go through LangChain unchanged.
    if (avoidCreatingRootRunTree || tracingEnabledByEnv() || hasTracer(cfg?.callbacks) || previous?.tracingEnabled)
      return original(config, callback, avoidCreatingRootRunTree);
    const scope = Object.assign(Object.create(RunTree.prototype) as Scope, template, {
      child_runs: [],
      start_time: Date.now(),
      extra: { metadata: {}, [LC_CHILD_KEY]: config },
    });
    const vars = previous?.[CONTEXT_VARIABLES_KEY];
    if (vars !== undefined) scope[CONTEXT_VARIABLES_KEY] = vars;
    return storage.run(scope, callback);
  };
}

/**
 * Switches LangChain's async context off on this thread, for a thread that runs no graph now (the engine's thread
 * once its executor threads took over from the inline executor): an enabled AsyncLocalStorage keeps Node's promise
 * hooks on, which adds a call and an allocation to every promise the thread makes (about 6 % of what the engine's
 * thread allocates per run cycle after a start under load). Reads see no scope afterwards, as before the first run;
 * the next run that needs the context switches it on again.
 */
export function releaseRunContext(): void {
  const storage = AsyncLocalStorageProviderSingleton.getInstance() as { disable?: () => void };
  storage.disable?.();
}

// An executor thread's process.env is already a copy of the process's environment (Node gives each worker thread its
// own, which no other thread sees), but it is still a host object: every read goes through an interceptor into C++
// (~200 ns, against ~30 ns for an object). LangChain and LangGraph read the environment on every runnable call
// (tracing switches, callback settings), some hundreds of reads a run.
//
// useObjectEnv() swaps in an ordinary object holding the same variables, behind a proxy that stores what is assigned
// as a string, as the environment does (`process.env.N = 5` reads back "5"). Everything else about it is what graph
// code expects of this thread's environment: reads, writes, deletes, `in` and Object.keys see the same variables, a
// child process started from this thread inherits them, and changes stay on this thread as before.
//
// It holds nothing new: the thread's environment is the agent-server process's, which graph code on the main thread
// reads as well, and which the platform builds for the deployment (its own secrets, never the platform's: see
// operator/runtimes/local/env.ts and test/operator/runtimes/local/local-isolation.test.ts).
const SWAPPED = Symbol.for('agentplane.object-env');

export function useObjectEnv(): void {
  if ((process.env as Record<PropertyKey, unknown>)[SWAPPED]) return;
  const vars: Record<PropertyKey, unknown> = { ...process.env };
  Object.defineProperty(vars, SWAPPED, { value: true, enumerable: false });
  process.env = new Proxy(vars, {
    set(target, key, value) {
      // A template string throws for a symbol, as assigning one to the real environment does (String() would not).
      target[key] = `${value as string}`;
      return true;
    },
  }) as NodeJS.ProcessEnv;
}

// Users' code (graphs, auth, custom routes, embeddings) is TypeScript as often as not. Started from the sources,
// agentplane runs under tsx already; started from its prebuilt bundle (bin/agentplane.mjs), our code needs no
// loader and tsx's module hooks are registered only here, right before the first import of a user's file, so that
// commands that never load one (api-key, deploy, the control plane) do not pay for them. The agent-server command
// (the one process kind that imports users' files) calls it first thing; executor threads started from the sources
// register tsx in their entry (executor-worker.mjs), those started from the bundle call it before the graphs load.
const BUNDLE = Symbol.for('agentplane.bundle');
const REGISTERED = Symbol.for('agentplane.typescript-imports.registered');

/** `late`: our code runs from the bundle, so nothing registered tsx yet (bin/agentplane.mjs says so for the process). */
export async function ensureTypeScriptImports(late = bundleDir() !== undefined): Promise<void> {
  const g = globalThis as Record<symbol, unknown>;
  if (!late || g[REGISTERED] === true) return;
  g[REGISTERED] = true;
  const { register } = await import('tsx/esm/api');
  register();
}

/**
 * The folder of the bundle this process runs our code from (bin/agentplane.mjs found it up to date with every source
 * and said so); undefined when it runs from the sources. Worker threads then start from the same build's entries.
 */
export function bundleDir(): string | undefined {
  const dir = (globalThis as Record<symbol, unknown>)[BUNDLE];
  return typeof dir === 'string' ? dir : undefined;
}

// Users' code (graphs, auth, custom routes, embeddings) is TypeScript as often as not. Started from the sources,
// agentplane runs under tsx already; started from its prebuilt bundle (bin/agentplane.mjs), our code needs no
// loader and tsx's module hooks are registered only here, right before the first import of a user's file, so that
// commands that never load one (api-key, deploy, the control plane) do not pay for them. The agent-server command
// (the one process kind that imports users' files) calls it first thing; executor threads register tsx themselves.
const LATE = Symbol.for('agentplane.typescript-imports.late');
const REGISTERED = Symbol.for('agentplane.typescript-imports.registered');

export async function ensureTypeScriptImports(): Promise<void> {
  const g = globalThis as Record<symbol, unknown>;
  if (g[LATE] !== true || g[REGISTERED] === true) return;
  g[REGISTERED] = true;
  const { register } = await import('tsx/esm/api');
  register();
}

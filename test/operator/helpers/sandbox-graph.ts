// What the sandbox attack tests share: whether bubblewrap works on this machine, a branch of the example repository
// that adds the attacker's graph, the deployment proxy in front of a runtime, and waiting for a build or a server.
import { spawnSync } from 'node:child_process';
import { readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import Fastify, { type FastifyInstance } from 'fastify';
import type { LocalRuntime } from '../../../src/operator/runtimes/local/index.ts';
import { deploymentProxy } from '../../../src/operator/runtimes/local/proxy.ts';
import { git, type ExampleRepo } from './example-repo.ts';

/** bubblewrap runs here (installed, and the kernel grants its namespaces). */
export const BWRAP = spawnSync('bwrap', ['--unshare-all', '--share-net', '--ro-bind', '/', '/', 'true']).status === 0;

/** Commits, on a new branch from main, `source` as src/<graph>.ts and a graph of that name in langgraph.json. */
export function addGraphBranch(repo: ExampleRepo, branch: string, graph: string, source: string, message: string) {
  git(repo.path, 'checkout', '--quiet', '-b', branch, 'main');
  writeFileSync(join(repo.path, `src/${graph}.ts`), source);
  const file = join(repo.path, 'langgraph.json');
  const config = JSON.parse(readFileSync(file, 'utf8')) as { graphs: Record<string, string> };
  config.graphs[graph] = `./src/${graph}.ts:graph`;
  writeFileSync(file, JSON.stringify(config, null, 2));
  git(repo.path, 'add', '-A');
  git(repo.path, 'commit', '--quiet', '-m', message);
}

/** The deployment proxy on a free port, resolving through whichever runtime `runtime()` returns at the time. */
export async function startProxy(runtime: () => LocalRuntime): Promise<{ app: FastifyInstance; url: string }> {
  const app = Fastify();
  await deploymentProxy(app, { resolve: (id) => runtime().backend(id) });
  return { app, url: await app.listen({ host: '127.0.0.1', port: 0 }) };
}

/** Asks again (as a reconcile would) until the status is `done`; a timeout names the last status and `context()`. */
export async function settle<T extends { phase: string }>(
  ask: () => Promise<T>,
  done: (s: T) => boolean,
  limitMs = 120_000,
  context: () => string = () => '',
): Promise<T> {
  const until = Date.now() + limitMs;
  for (;;) {
    const s = await ask();
    if (done(s)) return s;
    if (Date.now() > until) throw new Error(`still ${JSON.stringify(s)}\n${context()}`.trimEnd());
    await new Promise((r) => setTimeout(r, 100));
  }
}

// Steps the local runtime's tests share: wait for a condition, build and serve a revision the way its controllers
// would, and one greeting run of the example agent through a deployment's URL.
import type { Client } from '@langchain/langgraph-sdk';
import type { LocalRuntime } from '../../../src/operator/runtimes/local/index.ts';
import type { ServerSpec, ServerStatus } from '../../../src/operator/runtimes/types.ts';
import { LINKED_INSTALL } from '../../support/linked-install.ts';

/** Polls `fn` until it answers something truthy. Generous: on a loaded machine a server's start alone can take tens of seconds. */
export async function until<T>(
  what: string,
  fn: () => Promise<T | undefined | false> | T | undefined | false,
  ms = 150_000,
): Promise<T> {
  const end = Date.now() + ms;
  for (;;) {
    const v = await fn();
    if (v) return v;
    if (Date.now() > end) throw new Error(`gave up waiting for ${what}`);
    await new Promise((r) => setTimeout(r, 50));
  }
}

/**
 * Builds `spec`'s revision from the repository at `repoPath` (branch main), with agentplane's packages linked
 * (LINKED_INSTALL: no test using this is about the install), serves it until Ready, and routes to it.
 */
export async function buildAndServe(runtime: LocalRuntime, spec: ServerSpec, repoPath: string): Promise<void> {
  const dep = { namespace: spec.namespace, deployment: spec.deployment, deploymentId: spec.deploymentId };
  const build = {
    ...dep,
    revision: spec.revision,
    repoUrl: repoPath,
    repoRef: 'main',
    graphConfigPath: spec.graphConfigPath,
    installCommand: LINKED_INSTALL,
  };
  await runtime.build(build);
  await until('the build', async () => (await runtime.build(build)).phase === 'Succeeded');
  let last: ServerStatus | undefined;
  await until('the server', async () => (last = await runtime.deploy(spec)).phase === 'Ready').catch((err: Error) => {
    throw new Error(`${err.message}; last status: ${JSON.stringify(last)}`);
  });
  await runtime.route(dep, spec.revision);
}

/** One run of the example agent on a new thread: the last message it left ("Hello, <name>!"). */
export async function greet(client: Client, name = 'Ada'): Promise<string> {
  const thread = await client.threads.create();
  const run = await client.runs.create(thread.thread_id, 'agent', {
    input: { messages: [{ role: 'human', content: name }] },
  });
  await client.runs.join(thread.thread_id, run.run_id);
  const state = await client.threads.getState<{ messages: { content: unknown }[] }>(thread.thread_id);
  return String(state.values.messages.at(-1)!.content);
}

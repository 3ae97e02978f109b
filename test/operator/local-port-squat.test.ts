// An attacker on the same machine (another deployment's graph code shares the loopback network) tries to take the
// port the local runtime chose for an agent server, in the seconds the server spends loading before it would bind
// it: if it got the port, its /ok would pass the health check and the proxy would send it this deployment's
// requests, API keys included. The runtime holds the port from the moment it picks it and hands the socket to the
// server, so the port is never free to take.
import { mkdtempSync, rmSync } from 'node:fs';
import { createServer, type Server } from 'node:http';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import Fastify, { type FastifyInstance } from 'fastify';
import { Client } from '@langchain/langgraph-sdk';
import { afterEach, expect, it } from 'vitest';
import { silentLogger } from '../../src/lib/logger.ts';
import { LocalRuntime } from '../../src/operator/runtimes/local/index.ts';
import { deploymentProxy } from '../../src/operator/runtimes/local/proxy.ts';
import type { ServerSpec } from '../../src/operator/runtimes/types.ts';
import { makeExampleRepo } from './helpers/example-repo.ts';

const dep = { namespace: 'default', deployment: 'squat', deploymentId: 'dep-squat' };
const spec: ServerSpec = {
  ...dep,
  revision: 'squat-r1',
  graphConfigPath: 'langgraph.json',
  env: {},
  tenantId: 't1',
  access: 'public',
};

let tmp: string | undefined;
let runtime: LocalRuntime | undefined;
let app: FastifyInstance | undefined;
const squatters: Server[] = [];

afterEach(async () => {
  for (const s of squatters.splice(0)) s.close();
  await runtime?.shutdown();
  await app?.close();
  if (tmp) rmSync(tmp, { recursive: true, force: true });
});

async function until<T>(what: string, fn: () => Promise<T | undefined | false> | T | undefined | false): Promise<T> {
  const end = Date.now() + 150_000;
  for (;;) {
    const v = await fn();
    if (v) return v;
    if (Date.now() > end) throw new Error(`gave up waiting for ${what}`);
    await new Promise((r) => setTimeout(r, 50));
  }
}

it("gives no other process a chance to take an agent server's port before the server listens", async () => {
  tmp = mkdtempSync(join(tmpdir(), 'ap-squat-'));
  const repo = makeExampleRepo(tmp);
  // The squatter: as soon as the runtime names the port it chose, bind it and answer everything with 200,
  // remembering what it was sent.
  const captured: string[] = [];
  const attempts: Promise<string>[] = [];
  const squat = (port: number) =>
    new Promise<string>((resolve) => {
      const s = createServer((req, res) => {
        captured.push(`${req.method} ${req.url} key=${String(req.headers['x-api-key'])}`);
        res.writeHead(200, { 'content-type': 'application/json' }).end('{"ok":true}');
      });
      s.once('error', (err: NodeJS.ErrnoException) => resolve(err.code ?? err.message));
      s.listen(port, '127.0.0.1', () => {
        squatters.push(s);
        resolve('bound');
      });
    });
  runtime = new LocalRuntime({
    dataDir: join(tmp, 'data'),
    logs: {
      append: async (_ref, _type, lines) => {
        for (const line of lines) {
          const m = /starting agent server on 127\.0\.0\.1:(\d+)/.exec(String(line));
          if (m) attempts.push(squat(Number(m[1])));
        }
      },
    },
    logger: silentLogger(),
    stopGraceMs: 2_000,
    allowLocalRepos: [tmp],
  });
  app = Fastify();
  await deploymentProxy(app, { resolve: (id) => runtime!.backend(id) });
  runtime.setBaseUrl(await app.listen({ host: '127.0.0.1', port: 0 }));
  const url = await runtime.url(dep);

  const build = {
    ...dep,
    revision: spec.revision,
    repoUrl: repo.path,
    repoRef: 'main',
    graphConfigPath: 'langgraph.json',
  };
  await runtime.build(build);
  await until('the build', async () => (await runtime!.build(build)).phase === 'Succeeded');
  await until('the server', async () => (await runtime!.deploy(spec)).phase === 'Ready');
  await runtime.route(dep, spec.revision);

  // The preflight start and the real one each named a port; neither could be taken.
  expect(attempts.length).toBeGreaterThanOrEqual(1);
  expect(await Promise.all(attempts)).toEqual(attempts.map(() => 'EADDRINUSE'));

  // And the deployment's requests reach its own agent server, not a squatter.
  const client = new Client({ apiUrl: url, apiKey: 'secret-of-a-user', callerOptions: { maxRetries: 0 } });
  const thread = await client.threads.create();
  const run = await client.runs.create(thread.thread_id, 'agent', {
    input: { messages: [{ role: 'human', content: 'Ada' }] },
  });
  await client.runs.join(thread.thread_id, run.run_id);
  const state = await client.threads.getState<{ messages: { content: unknown }[] }>(thread.thread_id);
  expect(String(state.values.messages.at(-1)!.content)).toContain('Hello, Ada!');
  expect(captured).toEqual([]);
}, 300_000);

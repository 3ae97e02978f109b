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
import { silentLogger } from '../../../../src/lib/logger.ts';
import { LocalRuntime } from '../../../../src/operator/runtimes/local/index.ts';
import { deploymentProxy } from '../../../../src/operator/runtimes/local/proxy.ts';
import type { ServerSpec } from '../../../../src/operator/runtimes/types.ts';
import { makeExampleRepo } from '../../helpers/example-repo.ts';
import { buildAndServe, greet } from '../../helpers/local-serve.ts';

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
    agentExecutorThreads: 0,
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

  await buildAndServe(runtime, spec, repo.path);

  // Every start named the port it got; none could be taken.
  expect(attempts.length).toBeGreaterThanOrEqual(1);
  expect(await Promise.all(attempts)).toEqual(attempts.map(() => 'EADDRINUSE'));

  // And the deployment's requests reach its own agent server, not a squatter.
  const client = new Client({ apiUrl: url, apiKey: 'secret-of-a-user', callerOptions: { maxRetries: 0 } });
  expect(await greet(client)).toContain('Hello, Ada!');
  expect(captured).toEqual([]);
}, 300_000);

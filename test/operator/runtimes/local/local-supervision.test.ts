// The local runtime supervises its agent servers like a kubelet: a server killed with -9 is started again after a
// backoff (doubling in a crash loop, which its status names), the deployment's URL answers 503 with Retry-After
// meanwhile (never 404 "no live revision"), and it serves again by itself. The test plays the controllers' part:
// every change notification is answered with deploy(), as the revision controller's reconcile would.
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import Fastify, { type FastifyInstance } from 'fastify';
import { Client } from '@langchain/langgraph-sdk';
import { afterEach, beforeEach, expect, it } from 'vitest';
import { silentLogger } from '../../../../src/lib/logger.ts';
import { LocalRuntime } from '../../../../src/operator/runtimes/local/index.ts';
import { deploymentProxy } from '../../../../src/operator/runtimes/local/proxy.ts';
import type { RevisionRef, ServerSpec, ServerStatus } from '../../../../src/operator/runtimes/types.ts';
import { makeExampleRepo, type ExampleRepo } from '../../helpers/example-repo.ts';
import { buildAndServe, greet, until } from '../../helpers/local-serve.ts';

const dep = { namespace: 'default', deployment: 'sup', deploymentId: 'dep-sup' };
const spec: ServerSpec = {
  ...dep,
  revision: 'sup-r1',
  graphConfigPath: 'langgraph.json',
  env: {},
  tenantId: 't1',
  access: 'public',
};

let tmp: string;
let repo: ExampleRepo;
let runtime: LocalRuntime;
let app: FastifyInstance;
let url: string;
/** Every status the runtime reported for the revision, in order. */
const seen: ServerStatus[] = [];

// Each attempt (CI retries a failed test) starts from a fresh runtime and data folder, not from what a failed
// attempt left behind.
beforeEach(async () => {
  seen.length = 0;
  tmp = mkdtempSync(join(tmpdir(), 'ap-supervision-'));
  repo = makeExampleRepo(tmp);
  runtime = new LocalRuntime({
    agentExecutorThreads: 0,
    dataDir: join(tmp, 'data'),
    logs: { append: async () => undefined },
    logger: silentLogger(),
    stopGraceMs: 2_000,
    allowLocalRepos: [tmp],
    restartPolicy: { initialMs: 500, maxMs: 2_000, resetAfterMs: 60_000, crashLoopAfter: 2 },
  });
  app = Fastify();
  await deploymentProxy(app, { resolve: (id) => runtime.backend(id) });
  runtime.setBaseUrl(await app.listen({ host: '127.0.0.1', port: 0 }));
  url = await runtime.url(dep);
  // The controller: each notification is a reconcile that asks for the server again.
  runtime.onChange((ref: RevisionRef) => {
    if (ref.revision === spec.revision) void runtime.deploy(spec).then((s) => seen.push(s));
  });
}, 60_000);

afterEach(async () => {
  await runtime?.shutdown();
  await app?.close();
  rmSync(tmp, { recursive: true, force: true });
});

/** Kills the serving agent server with -9; resolves with what the URL answered until it served again. */
async function killAndWatch(): Promise<number[]> {
  const [pid] = runtime.pids();
  expect(pid).toBeGreaterThan(0);
  process.kill(pid!, 'SIGKILL');
  await until('the runtime to see the exit', () => !runtime.pids().includes(pid!));
  const statuses: number[] = [];
  await until('the deployment to serve again', async () => {
    const res = await fetch(`${url}/ok`);
    statuses.push(res.status);
    if (res.status === 503) expect(Number(res.headers.get('retry-after'))).toBeGreaterThanOrEqual(1);
    await res.arrayBuffer();
    return res.status === 200;
  });
  return statuses;
}

it('restarts a killed agent server with backoff, answers 503 meanwhile, and says why it is not serving', async () => {
  await buildAndServe(runtime, spec, repo.path);
  const client = new Client({ apiUrl: url, callerOptions: { maxRetries: 0 } });
  expect(await greet(client)).toContain('Hello, Ada!');

  // One crash: restarted after the first delay; the URL never says "no live revision".
  const first = await killAndWatch();
  expect(first).toContain(503);
  // Not 404 "no live revision", and not 500 for a forward that found nobody listening.
  expect(first.filter((s) => s !== 200 && s !== 503)).toEqual([]);
  expect(first.at(-1)).toBe(200);
  expect(runtime.routedRevision(dep)).toBe(spec.revision);
  expect(await runtime.deploy(spec)).toEqual({ phase: 'Ready' });
  expect(await greet(client)).toContain('Hello, Ada!');

  // A second crash in a row (crashLoopAfter 2 here): a crash loop, named so in the status while it waits, and
  // still restarted.
  expect(seen.map((s) => s.phase === 'Starting' && s.trouble?.reason)).toContain('Restarting');
  seen.length = 0;
  expect((await killAndWatch()).filter((s) => s !== 200 && s !== 503)).toEqual([]);
  const troubles = seen.flatMap((s) => (s.phase === 'Starting' && s.trouble ? [s.trouble] : []));
  expect(troubles.map((t) => t.reason)).toContain('CrashLoopBackOff');
  expect(troubles.find((t) => t.reason === 'CrashLoopBackOff')?.message).toMatch(/killed \(SIGKILL\)/);
  expect(seen.some((s) => s.phase === 'Failed')).toBe(false);

  // Healthy again, one process, and serving.
  expect(runtime.serverStatus({ ...dep, revision: spec.revision })).toEqual({ phase: 'Ready' });
  expect(runtime.pids()).toHaveLength(1);
  expect(await greet(client)).toContain('Hello, Ada!');
}, 600_000);

// The idle policy of the local runtime, with a real agent server behind the real proxy and the SDK as the caller:
// an idle deployment's server stops and its status says so; the first requests after it (many at once) share one
// start and are all answered; a request that comes while the server is stopping waits for the stop and wakes it;
// and a cron whose tick falls while it sleeps wakes it, its run happening once. The idle window is a second-long
// "minute" here (the runtime's test knob); the test plays the controllers' part like local-supervision.test.ts.
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import Fastify, { type FastifyInstance } from 'fastify';
import { Client } from '@langchain/langgraph-sdk';
import { afterAll, beforeAll, expect, it } from 'vitest';
import { silentLogger } from '../../../../src/lib/logger.ts';
import { LocalRuntime } from '../../../../src/operator/runtimes/local/index.ts';
import { deploymentProxy } from '../../../../src/operator/runtimes/local/proxy.ts';
import type { RevisionRef, ServerSpec, ServerStatus } from '../../../../src/operator/runtimes/types.ts';
import { makeExampleRepo } from '../../helpers/example-repo.ts';
import { buildAndServe, greet, until } from '../../helpers/local-serve.ts';

const dep = { namespace: 'default', deployment: 'idle', deploymentId: 'dep-idle' };
const ref = { ...dep, revision: 'idle-r1' };
const spec: ServerSpec = { ...ref, graphConfigPath: 'langgraph.json', env: {}, tenantId: 't1', access: 'public' };
// A "minute" of one second: idle windows of seconds.
const IDLE = { minuteMs: 1_000, checkMs: 200, wakeWaitMs: 60_000 };

/** A cron schedule (seconds first) that ticks once a minute, the next time `aheadMs` from now: the test knows when
 * the tick is due instead of sitting out an interval, and ticks a minute apart never meet. */
const tickIn = (aheadMs: number) => `${new Date(Date.now() + aheadMs).getUTCSeconds()} * * * * *`;

let tmp: string;
let runtime: LocalRuntime;
let app: FastifyInstance;
let url: string;
let client: Client;
let baseUrl: string;
/** Every line of the revision's deploy log. */
const deployLog: string[] = [];
const starts = () => deployLog.filter((l) => l.startsWith('starting agent server on')).length;
/** The spec the "controller" deploys: the tests turn the idle policy on. */
let live: ServerSpec = spec;

/** A runtime on the test's data folder (a second one plays the platform after a restart). */
function newRuntime(): LocalRuntime {
  const made = new LocalRuntime({
    agentExecutorThreads: 0,
    dataDir: join(tmp, 'data'),
    logs: {
      append: async (_ref, type, lines) => {
        if (type === 'deploy') deployLog.push(...lines);
      },
    },
    logger: silentLogger(),
    stopGraceMs: 10_000,
    allowLocalRepos: [tmp],
    idle: IDLE,
  });
  // The controller: each notification is a reconcile that asks for the routed revision again.
  made.onChange((r: RevisionRef) => {
    if (r.revision === spec.revision) void made.deploy(live);
  });
  if (baseUrl) made.setBaseUrl(baseUrl);
  return made;
}

beforeAll(async () => {
  tmp = mkdtempSync(join(tmpdir(), 'ap-idle-'));
  const repo = makeExampleRepo(tmp);
  runtime = newRuntime();
  app = Fastify();
  await deploymentProxy(app, { resolve: (id) => runtime.backend(id) });
  baseUrl = await app.listen({ host: '127.0.0.1', port: 0 });
  runtime.setBaseUrl(baseUrl);
  url = await runtime.url(dep);
  client = new Client({ apiUrl: url, callerOptions: { maxRetries: 0 } });
  // Built and served with the policy off, so nothing sleeps before the tests ask for it.
  await buildAndServe(runtime, spec, repo.path);
}, 600_000);

afterAll(async () => {
  await runtime?.shutdown();
  await app?.close();
  rmSync(tmp, { recursive: true, force: true });
});

const status = (): ServerStatus | undefined => runtime.serverStatus(ref);
const asleep = () => {
  const s = status();
  return s?.phase === 'Ready' && s.sleeping ? s.sleeping : undefined;
};

it('stops an idle server, says it sleeps, and wakes it once for many requests at once, answering them all', async () => {
  // Turned on for the server that runs (no restart): it falls asleep once idle for the window.
  live = { ...spec, idleTimeoutMinutes: 2 };
  expect(await runtime.deploy(live)).toEqual({ phase: 'Ready' });

  await until('the idle server to sleep', () => asleep() && runtime.pids().length === 0, 60_000);
  expect(asleep()).toMatchObject({ since: expect.any(String) });
  expect(asleep()?.wakeAt).toBeUndefined(); // nothing is due
  expect(runtime.routedRevision(dep)).toBe(spec.revision);
  expect(await runtime.deploy(live)).toMatchObject({ phase: 'Ready', sleeping: { since: expect.any(String) } });
  expect(runtime.pids()).toEqual([]); // a reconcile does not start it

  const before = starts();
  const answers = await Promise.all(Array.from({ length: 8 }, (_, i) => greet(client, `caller ${i}`)));
  answers.forEach((a, i) => expect(a).toContain(`Hello, caller ${i}!`));
  await until('the deploy log', () => starts() > before);
  expect(starts() - before).toBe(1);
  expect(runtime.pids()).toHaveLength(1);
  expect(asleep()).toBeUndefined();
  expect(status()).toEqual({ phase: 'Ready' });
}, 300_000);

it('holds a request that comes while the server is stopping, then wakes the server for it', async () => {
  const [pid] = runtime.pids();
  expect(pid).toBeGreaterThan(0);
  // Caught as the sleep begins (its SIGTERM is sent by then): frozen, the server cannot finish its stop before the
  // request is on its way.
  const end = Date.now() + 60_000;
  while (!asleep() && Date.now() < end) await new Promise((r) => setImmediate(r));
  process.kill(pid!, 'SIGSTOP');
  expect(asleep()).toBeDefined();
  const before = starts();
  const answer = greet(client, 'Grace');
  let settled = false;
  void answer.finally(() => (settled = true)).catch(() => undefined);
  await new Promise((r) => setTimeout(r, 500));
  expect(settled).toBe(false); // held, not refused
  process.kill(pid!, 'SIGCONT');
  expect(await answer).toContain('Hello, Grace!');
  expect(starts() - before).toBe(1);
  expect(runtime.pids()).toHaveLength(1);
  expect(runtime.pids()).not.toContain(pid);
}, 300_000);

it('wakes a sleeping deployment when a cron tick is due, and runs the tick once', async () => {
  const thread = await client.threads.create(); // the server is awake from here on: the tick's time is counted from now
  // Due in 10 s: time for the deployment to fall asleep (2 s idle) first. A machine so loaded that it is still awake
  // then runs that tick awake and sleeps until the next one, a minute later (the waits below allow for it).
  const cron = await client.crons.createForThread(thread.thread_id, 'agent', {
    schedule: tickIn(10_000),
    input: { messages: [{ role: 'human', content: 'cron' }] },
  });
  const sleep = await until(
    'the deployment to sleep with a wake time',
    () => {
      const s = asleep();
      return s?.wakeAt && runtime.pids().length === 0 ? s : undefined;
    },
    90_000,
  );
  const sleptAt = Date.parse(sleep.since);
  // No request reaches it meanwhile: only the timer at the cron's due time can start it.
  await until('the server to wake for the tick', () => runtime.pids().length === 1, 90_000);
  const runsAfter = async () =>
    (await client.runs.list(thread.thread_id)).filter((r) => Date.parse(r.created_at) >= sleptAt);
  await until('the tick to run', async () => (await runsAfter()).some((r) => r.status === 'success'), 60_000);
  await client.crons.delete(cron.cron_id);
  // Once per tick: no two runs for the same due time.
  const times = (await client.runs.list(thread.thread_id)).map((r) => Date.parse(r.created_at)).sort((a, b) => a - b);
  expect(times.length).toBeGreaterThan(0);
  for (let i = 1; i < times.length; i++) expect(times[i]! - times[i - 1]!).toBeGreaterThan(10_000);
  const state = await client.threads.getState<{ messages: { content: unknown }[] }>(thread.thread_id);
  expect(String(state.values.messages.at(-1)!.content)).toContain('Hello, cron!');
}, 300_000);

it('keeps a sleeping deployment asleep across a restart of the runtime, and still wakes it for a due cron tick', async () => {
  const thread = await client.threads.create();
  // Due in 12 s: asleep after 2 s, with time left for the restart before the tick.
  const cron = await client.crons.createForThread(thread.thread_id, 'agent', {
    schedule: tickIn(12_000),
    input: { messages: [{ role: 'human', content: 'restart' }] },
  });
  // Asleep with the tick far enough ahead for the restart to happen before it.
  const sleep = await until(
    'the deployment to sleep well before its next tick',
    () => {
      const s = asleep();
      return s?.wakeAt && Date.parse(s.wakeAt) - Date.now() > 5_000 && runtime.pids().length === 0 ? s : undefined;
    },
    120_000,
  );
  await runtime.shutdown();
  runtime = newRuntime();
  const before = starts();
  // The controllers' first reconcile after the restart: the sleep was written down, with its wake time.
  expect(await runtime.deploy(live)).toEqual({ phase: 'Ready', sleeping: sleep });
  expect(runtime.routedRevision(dep)).toBe(spec.revision);
  expect(runtime.pids()).toEqual([]);
  expect(deployLog.at(-1)).toMatch(/the platform started again: the agent server stays asleep; due work wakes it at/);
  // Nothing but the timer at the tick's due time starts it.
  await until('the server to wake for the tick', () => runtime.pids().length === 1, 90_000);
  await until('the deploy log', () => starts() > before);
  expect(starts() - before).toBe(1);
  expect(Date.now()).toBeGreaterThanOrEqual(Date.parse(sleep.wakeAt!));
  const sleptAt = Date.parse(sleep.since);
  await until('the tick to run', async () => {
    const runs = await client.runs.list(thread.thread_id);
    return runs.some((r) => r.status === 'success' && Date.parse(r.created_at) >= sleptAt);
  });
  await client.crons.delete(cron.cron_id);
  const times = (await client.runs.list(thread.thread_id)).map((r) => Date.parse(r.created_at)).sort((a, b) => a - b);
  for (let i = 1; i < times.length; i++) expect(times[i]! - times[i - 1]!).toBeGreaterThan(10_000);
  const state = await client.threads.getState<{ messages: { content: unknown }[] }>(thread.thread_id);
  expect(String(state.values.messages.at(-1)!.content)).toContain('Hello, restart!');
}, 300_000);

// An operator's bad day, bounded: `agentplane dev --database-url` on a PostgreSQL of the test's own, deployments
// answering runs from a client that keeps going, and meanwhile an agent server killed with -9, PostgreSQL shut
// down (57P01 to every connection) with a second agent server killed while it is down, PostgreSQL back, the
// platform killed with -9 and started again, and a deployment deleted. At the end: every run the API accepted
// finished exactly once, every revision and deployment says truthfully that it serves, one agent process per
// serving revision, nothing left of the deleted deployment (folder, process, database).
import { execFileSync } from 'node:child_process';
import { existsSync, mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import pg from 'pg';
import { Client } from '@langchain/langgraph-sdk';
import { afterAll, beforeAll, expect, it } from 'vitest';
import { makeExampleRepo, type ExampleRepo } from '../operator/helpers/example-repo.ts';
import { startThrowawayPostgres, type ThrowawayPostgres } from '../support/throwaway-postgres.ts';
import {
  LINKED_INSTALL,
  alive,
  api,
  childPids,
  startDev,
  stopDev,
  waitFor,
  workspaceKey,
  type DevProcess,
} from '../dev/helpers.ts';

/** A key of the test's workspace: agents refuse the bootstrap key. */
let agentKey = '';

let tmp: string;
let repo: ExampleRepo;
let pgServer: ThrowawayPostgres;
let dev: DevProcess | undefined;

beforeAll(async () => {
  tmp = mkdtempSync(join(tmpdir(), 'ap-chaos-'));
  repo = makeExampleRepo(tmp);
  pgServer = await startThrowawayPostgres();
}, 60_000);

afterAll(async () => {
  if (dev) await stopDev(dev, 'SIGKILL');
  await pgServer?.stop();
  rmSync(tmp, { recursive: true, force: true });
});

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

/** Pids of every process whose command line names this deployment's folder (its agent server, sandbox or not). */
function agentProcesses(depId: string): number[] {
  const out = execFileSync('ps', ['-eo', 'pid=,args='], { encoding: 'utf8' });
  return out
    .split('\n')
    .filter((l) => l.includes(`/deployments/${depId}/`) && l.includes('agent-server'))
    .map((l) => Number(l.trim().split(/\s+/)[0]))
    .filter((pid) => pid > 0 && pid !== process.pid);
}

/** Outcomes of a client that keeps calling through outages, as a careful client does: 503 and refusals are retried. */
type Ledger = {
  accepted: { url: string; thread: string; run: string }[];
  /** Threads whose run request got no clear answer: it may or may not have been created. */
  unclear: { url: string; thread: string }[];
  retried: number;
};

/** Creates runs on `urls` in turn until stopped; each on a thread of its own, so a thread shows what its run did. */
function runClient(urls: () => string[], ledger: Ledger) {
  let stop = false;
  const loop = (async () => {
    for (let i = 0; !stop; i++) {
      const list = urls();
      const url = list[i % list.length]!;
      const client = new Client({ apiUrl: url, apiKey: agentKey, callerOptions: { maxRetries: 0 } });
      let thread: string | undefined;
      while (!stop && !thread) {
        thread = await client.threads.create().then(
          (t) => t.thread_id,
          async () => {
            ledger.retried++;
            await sleep(200);
            return undefined;
          },
        );
      }
      while (!stop && thread) {
        const res = await fetch(`${url}/threads/${thread}/runs`, {
          method: 'POST',
          headers: { 'content-type': 'application/json', 'x-api-key': agentKey },
          body: JSON.stringify({ assistant_id: 'agent', input: { messages: [{ role: 'human', content: 'Ada' }] } }),
        }).catch(() => undefined);
        if (res?.status === 200) {
          ledger.accepted.push({ url, thread, run: ((await res.json()) as { run_id: string }).run_id });
          break;
        }
        await res?.arrayBuffer();
        // No answer, or 502 (the agent server went away mid-request): it may or may not have been handled; that
        // thread is not counted (a careful client does not send it again blindly).
        if (!res || res.status === 502) {
          ledger.unclear.push({ url, thread });
          break;
        }
        ledger.retried++;
        await sleep(res.status === 503 ? Math.min(Number(res.headers.get('retry-after') ?? 1), 2) * 250 : 200);
      }
      await sleep(50);
    }
  })();
  return {
    async end() {
      stop = true;
      await loop;
    },
  };
}

it('heals itself through agent kills, a PostgreSQL restart and a platform kill, and tells the truth', async () => {
  const started = Date.now();
  const dataDir = join(tmp, 'data');
  // Graphs run on executor threads, as they do by default on a machine of 2 or more cores: exactly once must hold there.
  const devArgs = ['--database-url', pgServer.url, '--agent-executor-threads', '1'];
  dev = await startDev(dataDir, 0, devArgs);
  const cp = () => api(dev!.url);
  agentKey = await workspaceKey(dev.url);

  const create = async (name: string) => {
    const res = await cp().post('/v2/deployments', {
      name,
      source: 'github',
      source_config: { repo_url: repo.path, deployment_type: 'dev', install_command: LINKED_INSTALL },
      source_revision_config: { repo_ref: 'main', graph_config_path: 'langgraph.json' },
      secrets: [],
    });
    expect(res.status).toBe(201);
    return { id: String(res.body.id), revision: String(res.body.latest_revision_id) };
  };
  const deployed = (d: { id: string; revision: string }) =>
    waitFor(`${d.id} DEPLOYED`, async () => {
      const { body } = await cp().get(`/v2/deployments/${d.id}/revisions/${d.revision}`);
      if (String(body.status).includes('FAILED')) throw new Error(`${d.id}: ${body.status} ${body.status_message}`);
      return body.status === 'DEPLOYED' ? true : undefined;
    });
  const deps = [await create('chaos-a'), await create('chaos-b')];
  for (const d of deps) await deployed(d);
  const [a, b] = deps as [(typeof deps)[0], (typeof deps)[0]];
  const figures: Record<string, number | string> = { deployed_after_ms: Date.now() - started };
  // Each deployment has an origin of its own (the url the API gives), kept across platform restarts.
  const urls = new Map<string, string>();
  const learnUrls = async () => {
    for (const d of deps) urls.set(d.id, String((await cp().get(`/v2/deployments/${d.id}`)).body.url));
  };
  await learnUrls();
  const urlOf = (d: { id: string }) => urls.get(d.id)!;
  const serving = (d: { id: string }) =>
    waitFor(
      `${d.id} to serve`,
      async () => ((await fetch(`${urlOf(d)}/ok`)).status === 200 ? true : undefined),
      90_000,
    );

  const ledger: Ledger = { accepted: [], unclear: [], retried: 0 };
  const client = runClient(() => [urlOf(a), urlOf(b)], ledger);
  let kills = 0;

  // The flag reached the agent servers, whatever this machine's cores.
  const commandLine = (pid: number) => readFileSync(`/proc/${pid}/cmdline`, 'utf8').split('\0').join(' ');
  expect(agentProcesses(a.id).map(commandLine).join('\n')).toContain('--executor-threads 1');

  // 1. An agent server killed with -9: its URL says 503 (never 404) until it serves again; its revision says why.
  await sleep(1_500);
  const seenA = new Set<number>();
  const healthA = new Set<string>();
  for (const pid of agentProcesses(a.id)) process.kill(pid, 'SIGKILL');
  const killedAt = Date.now();
  kills++;
  await waitFor('a to come back', async () => {
    const res = await fetch(`${urlOf(a)}/ok`);
    seenA.add(res.status);
    await res.arrayBuffer();
    const { body } = await cp().get(`/v2/deployments/${a.id}/revisions/${a.revision}`);
    healthA.add(`${body.status} ${body.health?.ready} ${body.health?.reason}`);
    return res.status === 200 ? true : undefined;
  });
  figures.agent_kill_to_serving_ms = Date.now() - killedAt;
  figures.agent_kill_answers = [...seenA].sort().join(',');
  // 503 while it restarts (also in the moment before the supervisor noticed the exit), never 404 or 500.
  expect([...seenA].filter((s) => s !== 200 && s !== 503)).toEqual([]);
  expect(seenA.has(503)).toBe(true);
  expect([...healthA].some((h) => /^DEPLOYED false (Restarting|Starting)/.test(h))).toBe(true);

  // 2. PostgreSQL shut down; while it is down, b's agent server is killed (its restart cannot make its database).
  await sleep(1_000);
  await pgServer.down();
  const downAt = Date.now();
  for (const pid of agentProcesses(b.id)) process.kill(pid, 'SIGKILL');
  kills++;
  const during = await fetch(`${urlOf(a)}/threads`, {
    method: 'POST',
    headers: { 'content-type': 'application/json', 'x-api-key': agentKey },
    body: '{}',
  });
  expect(during.status).toBe(503);
  expect(Number(during.headers.get('retry-after'))).toBeGreaterThan(0);
  const bDown = await waitFor('b to say why it does not serve', async () => {
    const { body } = await cp().get(`/v2/deployments/${b.id}`);
    return body.health?.ready === false ? (body.health as { reason: string; message: string }) : undefined;
  });
  expect(bDown.message).toMatch(/not serving/);
  await sleep(Math.max(0, 4_000 - (Date.now() - downAt)));
  await pgServer.up();
  const upAt = Date.now();
  await Promise.all([serving(a), serving(b)]);
  const runAfter = async (d: { id: string }) => {
    const c = new Client({ apiUrl: urlOf(d), apiKey: agentKey, callerOptions: { maxRetries: 0 } });
    const t = await waitFor('a thread after the restart', () => c.threads.create().catch(() => undefined), 60_000);
    const r = await c.runs.create(t.thread_id, 'agent', { input: { messages: [{ role: 'human', content: 'Ada' }] } });
    await c.runs.join(t.thread_id, r.run_id);
  };
  await Promise.all([runAfter(a), runAfter(b)]);
  figures.recovery_after_postgres_returned_ms = Date.now() - upAt;
  figures.postgres_down_ms = upAt - downAt;

  // 3. The platform killed with -9 and started again on the same port.
  const platformChildren = childPids(dev.child.pid!);
  await stopDev(dev, 'SIGKILL');
  kills++;
  await waitFor('agent servers to end with the platform', async () =>
    platformChildren.some(alive) ? undefined : true,
  );
  const platformKilledAt = Date.now();
  dev = await startDev(dataDir, dev.port, devArgs);
  await learnUrls();
  await Promise.all([serving(a), serving(b)]);
  figures.platform_kill_to_serving_ms = Date.now() - platformKilledAt;

  await sleep(1_500);
  await client.end();

  // Every run the API accepted finished, once: each thread holds one exchange (a run executed twice would add its
  // input again), and the run says success.
  const sdk = (url: string) => new Client({ apiUrl: url, apiKey: agentKey, callerOptions: { maxRetries: 0 } });
  for (const r of ledger.accepted) {
    const c = sdk(r.url);
    await waitFor(`run ${r.run}`, () => c.runs.join(r.thread, r.run).catch(() => undefined), 60_000);
    expect((await c.runs.get(r.thread, r.run)).status).toBe('success');
    const state = await c.threads.getState<{ messages: { type: string }[] }>(r.thread);
    expect(state.values.messages.filter((m) => m.type === 'human')).toHaveLength(1);
    expect((await c.runs.list(r.thread)).length).toBe(1);
  }
  expect(ledger.accepted.length).toBeGreaterThan(5);
  // A request without a clear answer made at most one run, and that one finished once too.
  for (const u of ledger.unclear) {
    const c = sdk(u.url);
    const runs = await waitFor(`runs of ${u.thread}`, () => c.runs.list(u.thread).catch(() => undefined), 60_000);
    expect(runs.length).toBeLessThanOrEqual(1);
    if (!runs.length) continue;
    await waitFor(`run ${runs[0]!.run_id}`, () => c.runs.join(u.thread, runs[0]!.run_id).catch(() => undefined));
    expect((await c.runs.get(u.thread, runs[0]!.run_id)).status).toBe('success');
  }

  // Truthful status: both deployments and their revisions say Ready, and answer.
  for (const d of [a, b]) {
    const dep = (await cp().get(`/v2/deployments/${d.id}`)).body;
    expect(dep.health).toMatchObject({ ready: true });
    const rev = (await cp().get(`/v2/deployments/${d.id}/revisions/${d.revision}`)).body;
    expect(rev).toMatchObject({ status: 'DEPLOYED', health: { ready: true } });
  }
  // One agent process tree per serving revision.
  expect(childPids(dev.child.pid!)).toHaveLength(2);

  // A deployment deleted: nothing of it is left (folder, process, database); the other one keeps serving.
  expect((await cp().delete(`/v2/deployments/${b.id}`)).status).toBe(204);
  await waitFor('the deleted deployment to be gone', async () =>
    (await cp().get(`/v2/deployments/${b.id}`)).status === 404 ? true : undefined,
  );
  expect(agentProcesses(b.id)).toEqual([]);
  expect(childPids(dev.child.pid!)).toHaveLength(1);
  expect(existsSync(join(dataDir, 'deployments', b.id))).toBe(false);
  const admin = new pg.Client({ connectionString: pgServer.url });
  await admin.connect();
  try {
    const left = await admin.query('SELECT datname FROM pg_database WHERE datname LIKE $1', [
      `%${b.id.toLowerCase().replace(/[^a-z0-9]/g, '_')}%`,
    ]);
    expect(left.rows).toEqual([]);
  } finally {
    await admin.end();
  }
  expect((await fetch(`${urlOf(a)}/ok`)).status).toBe(200);

  figures.b_reason_while_postgres_down = bDown.reason;
  figures.runs_accepted = ledger.accepted.length;
  figures.requests_retried = ledger.retried;
  figures.runs_unclear_no_answer = ledger.unclear.length;
  figures.kills = kills;
  figures.postgres_restarts = 1;
  figures.total_ms = Date.now() - started;
  process.stdout.write(`chaos figures: ${JSON.stringify(figures)}\n`);
}, 300_000);

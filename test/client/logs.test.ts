// `agentplane logs <deployment> [--follow]`: the serving agent's log lines, the last ones first, then live as they
// are stored, following the traffic to the next revision, ending when the deployment is deleted. The real CLI in a
// child process against a real control plane (embedded store); the test writes the agent's lines and the statuses
// as the runtime would. Another workspace's deployment is a 404, before any line. Every event carries an id; a
// stream opened again with the last one (Last-Event-ID) gets exactly the lines after it, and the CLI does so itself
// when its connection is cut (a TCP proxy in between plays the network).
import { spawn, execFile, type ChildProcessWithoutNullStreams } from 'node:child_process';
import { createServer, connect, type Server, type Socket } from 'node:net';
import { resolve } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { deploymentName, revisionName } from '../../src/resources/index.ts';
import { apiHarness, githubBody, type ApiHarness } from '../control-plane/helpers/harness.ts';
import { serve, setRevision } from '../control-plane/helpers/operator-role.ts';
import { liveLogs } from '../../src/control-plane/services/deployments/live-logs.ts';
import type { DeploymentDeps } from '../../src/control-plane/services/deployments/deps.ts';

const BIN = resolve(import.meta.dirname, '../../bin/agentplane.mjs');
let h: ApiHarness;
let url: string;
const env = (key = h.key, tenant = 'tenant-a') => ({
  ...process.env,
  AGENTPLANE_URL: url,
  AGENTPLANE_API_KEY: key,
  AGENTPLANE_TENANT: tenant,
});

function cli(args: string[], key?: string, tenant?: string) {
  return new Promise<{ code: number; stdout: string; stderr: string }>((res) => {
    execFile(process.execPath, [BIN, ...args], { env: env(key, tenant) }, (err, stdout, stderr) =>
      res({ code: err ? ((err as { code?: number }).code ?? 1) : 0, stdout, stderr }),
    );
  });
}

const call = (method: 'POST' | 'PATCH' | 'DELETE', path: string, payload?: object) =>
  h.app.inject({ method, url: path, headers: { 'x-api-key': h.key, 'x-tenant-id': 'tenant-a' }, payload });

/** What the agent server of revision n prints, as the runtime stores it (pino JSON). */
const agentSays = (id: string, n: number, ...msgs: string[]) =>
  h.store.appendLogs(
    h.store.namespace,
    revisionName(deploymentName(id), n),
    'deploy',
    msgs.map((msg) => JSON.stringify({ level: 30, time: Date.parse('2026-12-01T10:00:00Z'), msg })),
  );

/** Output of a running child, awaited until it holds `text`. */
function reader(child: ChildProcessWithoutNullStreams) {
  let out = '';
  let err = '';
  child.stdout.on('data', (d: Buffer) => (out += d.toString()));
  child.stderr.on('data', (d: Buffer) => (err += d.toString()));
  const until = (text: string) =>
    new Promise<void>((res, rej) => {
      const check = () => out.includes(text) && (res(), true);
      if (check()) return;
      const onData = () => check() && child.stdout.off('data', onData);
      child.stdout.on('data', onData);
      child.once(
        'exit',
        (code) => !out.includes(text) && rej(new Error(`exited ${code} before "${text}":\n${out}${err}`)),
      );
    });
  return { until, out: () => out, err: () => err };
}

beforeAll(async () => {
  h = await apiHarness();
  url = await h.app.listen({ host: '127.0.0.1', port: 0 });
});
afterAll(async () => {
  await h.close();
});

describe('agentplane logs', () => {
  it('prints the last lines, follows new ones live and into the next revision, ends with the deployment', async () => {
    const res = await call('POST', '/v2/deployments', githubBody('chatty'));
    const id = (res.json() as { id: string }).id;
    await setRevision(h.store, id, 1, 'DEPLOYED');
    await serve(h.store, id, 1);
    await agentSays(id, 1, ...Array.from({ length: 5 }, (_, i) => `old line ${i}`));

    // Without --follow: the last --tail lines, read as people read logs.
    const last = await cli(['logs', 'chatty', '--tail', '2']);
    expect(last.code, last.stderr).toBe(0);
    expect(last.stdout).toBe('10:00:00 INFO  old line 3\n10:00:00 INFO  old line 4\n');

    const child = spawn(process.execPath, [BIN, 'logs', 'chatty', '--follow', '--tail', '1'], { env: env() });
    const out = reader(child);
    try {
      await out.until('old line 4');
      expect(out.out()).not.toContain('old line 3');
      // Lines the agent logs now arrive while the command runs.
      await agentSays(id, 1, 'a run started');
      await out.until('a run started');
      // Traffic moves to revision 2: its lines follow, under a line saying so.
      await call('PATCH', `/v2/deployments/${id}`, { source_revision_config: { repo_ref: 'next' } });
      await setRevision(h.store, id, 2, 'DEPLOYED');
      await agentSays(id, 2, 'revision two listening');
      await serve(h.store, id, 2);
      await out.until('revision two listening');
      expect(out.err()).toContain('--- chatty revision 2 ---');
      // Deleting the deployment ends the stream (and the command, exit 0).
      const exited = new Promise<number | null>((r) => child.once('exit', r));
      expect((await call('DELETE', `/v2/deployments/${id}`)).statusCode).toBe(204);
      await h.store.delete('AgentDeployment', h.store.namespace, deploymentName(id)).catch(() => undefined);
      expect(await exited).toBe(0);
      expect(out.out().split('\n').filter(Boolean)).toEqual([
        '10:00:00 INFO  old line 4',
        '10:00:00 INFO  a run started',
        '10:00:00 INFO  revision two listening',
      ]);
    } finally {
      child.kill();
    }
  });

  it("another workspace's deployment, or a missing one, is a 404 before any line", async () => {
    const res = await call('POST', '/v2/deployments', githubBody('private'));
    const id = (res.json() as { id: string }).id;
    await setRevision(h.store, id, 1, 'DEPLOYED');
    await serve(h.store, id, 1);
    await agentSays(id, 1, 'secret business');
    const other = await cli(['logs', id, '--follow'], h.otherKey, 'tenant-c');
    expect(other.code).toBe(1);
    expect(other.stderr).toBe(`agentplane logs: no deployment named or with id "${id}"\n`);
    expect(other.stdout).toBe('');
    const stream = await fetch(`${url}/v2/deployments/${id}/logs/stream`, {
      headers: { 'x-api-key': h.otherKey, 'x-tenant-id': 'tenant-c' },
    });
    expect(stream.status).toBe(404);
    expect(await stream.text()).not.toContain('secret');
  });
});

/** A TCP proxy to the control plane whose connections the test can cut, and hold new ones until released. */
async function cuttableProxy(
  target: URL,
): Promise<{ url: string; cut(): void; hold(): void; release(): void; server: Server }> {
  const open = new Set<Socket>();
  let held: Socket[] | undefined;
  const pipe = (client: Socket) => {
    const upstream = connect(Number(target.port), target.hostname);
    for (const s of [client, upstream]) {
      open.add(s);
      s.on('error', () => undefined);
      s.on('close', () => (open.delete(s), client.destroy(), upstream.destroy()));
    }
    client.pipe(upstream).pipe(client);
  };
  const server = createServer((client) => (held ? held.push(client) : pipe(client)));
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
  const port = (server.address() as { port: number }).port;
  return {
    url: `http://127.0.0.1:${port}`,
    server,
    cut: () => open.forEach((s) => s.destroy()),
    hold: () => void (held ??= []),
    release: () => {
      const waiting = held ?? [];
      held = undefined;
      waiting.forEach(pipe);
    },
  };
}

/** Reads a stream's SSE events until `count` log events came, then closes it. */
async function events(id: string, count: number, headers: Record<string, string> = {}) {
  const stop = new AbortController();
  const res = await fetch(`${url}/v2/deployments/${id}/logs/stream?tail=100`, {
    headers: { 'x-api-key': h.key, 'x-tenant-id': 'tenant-a', ...headers },
    signal: stop.signal,
  });
  const got: { id: string; msg: string }[] = [];
  if (!res.ok) return { status: res.status, body: await res.text(), got };
  let buffer = '';
  for await (const chunk of res.body as unknown as AsyncIterable<Uint8Array>) {
    buffer += Buffer.from(chunk).toString();
    let end: number;
    while ((end = buffer.indexOf('\n\n')) >= 0) {
      const lines = buffer.slice(0, end).split('\n');
      buffer = buffer.slice(end + 2);
      const data = lines.find((l) => l.startsWith('data: '));
      const eid = lines.find((l) => l.startsWith('id: '));
      if (!data || !eid) continue;
      got.push({ id: eid.slice(4), msg: (JSON.parse(JSON.parse(data.slice(6)).message) as { msg: string }).msg });
    }
    if (got.length >= count) break;
  }
  stop.abort();
  return { status: res.status, body: '', got };
}

async function servingDeployment(name: string, ...lines: string[]) {
  const id = ((await call('POST', '/v2/deployments', githubBody(name))).json() as { id: string }).id;
  await setRevision(h.store, id, 1, 'DEPLOYED');
  await serve(h.store, id, 1);
  if (lines.length) await agentSays(id, 1, ...lines);
  return id;
}

describe('agentplane logs: live and resumable', () => {
  it('a line appended through the store reaches a tail at once: pushed, not found by the poll', async () => {
    const id = await servingDeployment('pushed', 'before');
    const stop = new AbortController();
    // A poll of an hour: only the store's own signal can bring the second line within the test.
    const deps = { store: h.store, ns: h.store.namespace } as DeploymentDeps;
    const lines = await liveLogs(deps, 'tenant-a', id, { tail: 10, pollMs: 3_600_000, signal: stop.signal });
    expect((await lines.next()).value?.message).toContain('before');
    const next = lines.next();
    await agentSays(id, 1, 'after');
    expect((await next).value?.message).toContain('after');
    stop.abort();
    expect((await lines.next()).done).toBe(true);
  });

  it('every event has an id; Last-Event-ID resumes with exactly the lines after it', async () => {
    const id = await servingDeployment('resumed', 'one', 'two');
    const first = await events(id, 2);
    expect(first.got.map((e) => e.msg)).toEqual(['one', 'two']);
    expect(first.got.every((e) => /^1-\d+$/.test(e.id))).toBe(true);
    await agentSays(id, 1, 'three', 'four');
    const resumed = await events(id, 2, { 'last-event-id': first.got[1]!.id });
    expect(resumed.got.map((e) => e.msg)).toEqual(['three', 'four']);
    const fromFirst = await events(id, 3, { 'last-event-id': first.got[0]!.id });
    expect(fromFirst.got.map((e) => e.msg)).toEqual(['two', 'three', 'four']);
  });

  it('attacker: a Last-Event-ID of another deployment reads nothing of it; garbage is a 400; other workspace 404', async () => {
    const mine = await servingDeployment('mine', 'my line');
    const theirs = await servingDeployment('theirs', 'their secret line');
    const theirIds = (await events(theirs, 1)).got.map((e) => e.id);
    // Their event id names revision 1 of MY deployment: only my lines can come after it (here: the next one).
    const crossed = events(mine, 1, { 'last-event-id': theirIds[0]! });
    await agentSays(mine, 1, 'my next line');
    expect((await crossed).got.map((e) => e.msg)).toEqual(['my next line']);
    const all = await events(mine, 2, { 'last-event-id': '1-0' });
    expect(all.got.map((e) => e.msg)).toEqual(['my line', 'my next line']);
    for (const garbage of ['x', '1-', '-1-2', '1-2; DROP', '99999999999-1', '1.2']) {
      const bad = await events(mine, 1, { 'last-event-id': garbage });
      expect(bad.status, garbage).toBe(400);
      expect(JSON.parse(bad.body).detail).toMatch(/^Last-Event-ID is not an event id of this log stream/);
    }
    const other = await fetch(`${url}/v2/deployments/${mine}/logs/stream`, {
      headers: { 'x-api-key': h.otherKey, 'x-tenant-id': 'tenant-c', 'last-event-id': 'x' },
    });
    expect(other.status).toBe(404);
    expect(await other.text()).not.toContain('my line');
  });

  it('the CLI resumes a cut connection: the lines written meanwhile once each, none twice', async () => {
    const id = await servingDeployment('flaky', 'first');
    const proxy = await cuttableProxy(new URL(url));
    const child = spawn(process.execPath, [BIN, 'logs', 'flaky', '--follow'], {
      env: { ...env(), AGENTPLANE_URL: proxy.url },
    });
    const out = reader(child);
    try {
      await out.until('first');
      await agentSays(id, 1, 'second');
      await out.until('second');
      // The network drops; while the CLI is away the agent logs on.
      proxy.hold();
      proxy.cut();
      await agentSays(id, 1, 'third', 'fourth');
      await expect.poll(() => out.err()).toContain('resuming after the last line');
      proxy.release();
      await out.until('fourth');
      await agentSays(id, 1, 'fifth');
      await out.until('fifth');
      expect(out.out().split('\n').filter(Boolean)).toEqual(
        ['first', 'second', 'third', 'fourth', 'fifth'].map((m) => `10:00:00 INFO  ${m}`),
      );
    } finally {
      child.kill();
      proxy.cut();
      proxy.server.close();
    }
  });
});

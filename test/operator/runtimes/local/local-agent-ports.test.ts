// A deployment's port is its own for as long as it exists: across restarts, while another program squats on it, while
// deployments are created and deleted around it, and when two deployments ask at once. Each test plays a sequence a
// user (or someone after another workspace's traffic) could cause, on real sockets and the real ports file.
import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { createServer, request, type Server } from 'node:http';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, afterEach, describe, expect, it } from 'vitest';
import { silentLogger } from '../../../../src/lib/logger.ts';
import { AgentOrigins, type AgentPorts } from '../../../../src/operator/runtimes/local/agent-origins.ts';

const dir = mkdtempSync(join(tmpdir(), 'agent-ports-'));
afterAll(() => rmSync(dir, { recursive: true, force: true }));

const open: AgentOrigins[] = [];
const squatters: Server[] = [];
afterEach(async () => {
  await Promise.all(open.splice(0).map((o) => o.close()));
  await Promise.all(squatters.splice(0).map((s) => new Promise((r) => s.close(r))));
});

let n = 0;
/** One platform's view of its ports file; `again()` is the same data folder after a restart. */
function platform(ports: AgentPorts, stateFile = join(dir, `ports-${++n}.json`)) {
  const origins = new AgentOrigins({
    host: '127.0.0.1',
    ports,
    stateFile,
    // Answers with the deployment the port belongs to, as the proxy would route it.
    handler: (req, res) => res.end(origins.deploymentAt(req) ?? 'nobody'),
    logger: silentLogger(),
  });
  open.push(origins);
  return { origins, stateFile, again: (p: AgentPorts = ports) => platform(p, stateFile) };
}

const portOf = (url: string) => Number(new URL(url).port);

/** Who answers on a URL, through a real HTTP request. */
function whoAnswers(url: string): Promise<string> {
  return new Promise((resolve, reject) => {
    request(url, (res) => {
      let body = '';
      res.on('data', (c: Buffer) => (body += c.toString()));
      res.on('end', () => resolve(body));
    })
      .on('error', reject)
      .end();
  });
}

/** Another program listening on a port (what a user's other dev server does). */
async function squat(port: number): Promise<Server> {
  const s = createServer((_req, res) => res.end('squatter'));
  await new Promise<void>((resolve, reject) => s.once('error', reject).listen(port, '127.0.0.1', resolve));
  squatters.push(s);
  return s;
}

/** A small range of ports free right now (asked from the system, so any machine and any parallel run works). */
async function freeRange(size: number): Promise<{ from: number; to: number }> {
  for (let attempt = 0; attempt < 50; attempt++) {
    const probe = createServer();
    await new Promise<void>((r) => probe.listen(0, '127.0.0.1', r));
    const from = (probe.address() as { port: number }).port;
    await new Promise((r) => probe.close(r));
    if (from + size > 65535) continue;
    const held: Server[] = [];
    try {
      for (let p = from; p < from + size; p++) held.push(await squat(p));
      return { from, to: from + size - 1 };
    } catch {
      // one of them is taken: try elsewhere
    } finally {
      await Promise.all(held.map((s) => new Promise((r) => s.close(r))));
      for (const s of held) squatters.splice(squatters.indexOf(s), 1);
    }
  }
  throw new Error('no free range of ports on this machine');
}

describe('ports of the deployments on one machine', () => {
  it('a deployment whose port another program took at restart waits for it: its old URL never goes to the next deployment', async () => {
    const range = await freeRange(3);
    const first = platform(range);
    const a = await first.origins.open('deployment-a');
    await first.origins.close();

    // While the platform is down, another program takes A's port; the platform comes back.
    const squatter = await squat(portOf(a));
    const second = first.again();
    await second.origins.restore(['deployment-a']);
    await expect(second.origins.open('deployment-a')).rejects.toMatchObject({
      code: 'EADDRINUSE',
      message: expect.stringContaining(`port ${portOf(a)}`),
    });
    // New deployments are created meanwhile; then the other program ends.
    const b = await second.origins.open('deployment-b');
    await new Promise((r) => squatter.close(r));
    squatters.splice(squatters.indexOf(squatter), 1);
    const c = await second.origins.open('deployment-c');

    // Before: A moved to a new port and its old one went to C, so a client holding A's URL reached C's agent.
    expect([portOf(b), portOf(c)]).not.toContain(portOf(a));
    expect(await second.origins.open('deployment-a')).toBe(a);
    expect(await whoAnswers(a)).toBe('deployment-a');
    expect(await whoAnswers(c)).toBe('deployment-c');
  });

  it('create, delete, recreate and restart: each existing deployment keeps its port, no two ever share one', async () => {
    const range = await freeRange(4);
    const first = platform(range);
    const [a, b] = await Promise.all([first.origins.open('a'), first.origins.open('b')]);
    expect(portOf(a)).not.toBe(portOf(b));
    await first.origins.forget('a');
    // A reconcile racing the delete must not take a port again for the deleted deployment.
    await expect(first.origins.open('a')).rejects.toThrow(/deleted/);
    const c = await first.origins.open('c');
    await first.origins.close();

    const second = first.again();
    await second.origins.restore(['b', 'c']);
    const [b2, c2, d] = await Promise.all([
      second.origins.open('b'),
      second.origins.open('c'),
      second.origins.open('d'),
    ]);
    expect([b2, c2]).toEqual([b, c]);
    expect(new Set([b2, c2, d].map(portOf)).size).toBe(3);
    expect(await whoAnswers(b)).toBe('b');
    expect(JSON.parse(readFileSync(second.stateFile, 'utf8'))).toEqual({
      b: portOf(b),
      c: portOf(c),
      d: portOf(d),
    });
  });

  it('twenty deployments asking at once over a range just big enough each get a port of their own; the next is refused', async () => {
    const range = await freeRange(20);
    const { origins } = platform(range);
    const ids = Array.from({ length: 20 }, (_, i) => `racer-${i}`);
    const urls = await Promise.all(ids.map((id) => origins.open(id)));
    expect(new Set(urls.map(portOf)).size).toBe(20);
    for (const [i, url] of urls.entries()) expect(await whoAnswers(url)).toBe(ids[i]);
    await expect(origins.open('one-too-many')).rejects.toThrow(`every port of ${range.from}-${range.to} is taken`);
  });

  it('with ports picked by the system, a port held by a deployment that waits for it is never given to another', async () => {
    // A's port is taken by another program at restart, so A holds it without listening; then that program ends and
    // the system is free to offer the port again.
    const first = platform('auto');
    const a = await first.origins.open('a');
    await first.origins.close();
    const squatter = await squat(portOf(a));
    const second = first.again();
    await second.origins.restore(['a']);
    await new Promise((r) => squatter.close(r));
    squatters.splice(squatters.indexOf(squatter), 1);
    const others = await Promise.all(Array.from({ length: 10 }, (_, i) => second.origins.open(`other-${i}`)));
    expect(others.map(portOf)).not.toContain(portOf(a));
    expect(await second.origins.open('a')).toBe(a);
  });
});

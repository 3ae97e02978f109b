// Run webhooks against a real agent-server process: a receiver in the test gets exactly one accepted POST per
// finished run (also when it fails the first try), with the run record and its final values; loopback targets are
// refused unless --webhook-allow names them; a webhook that is not http(s) is refused at run create.
import { createServer, type IncomingMessage, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { Client } from '@langchain/langgraph-sdk';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { FIXTURE_CONFIG } from './helpers/harness.ts';
import { startServerProcess, type ServerProc } from './helpers/process.ts';

interface Received {
  path: string;
  body: Record<string, any>;
  answered: number;
}

function readBody(req: IncomingMessage): Promise<string> {
  return new Promise((resolve) => {
    let data = '';
    req.on('data', (c: Buffer) => (data += c.toString()));
    req.on('end', () => resolve(data));
  });
}

describe('run webhooks', { timeout: 120_000 }, () => {
  let receiver: Server;
  let hookBase: string;
  const received: Received[] = [];
  const dirs: string[] = [];
  const servers: ServerProc[] = [];

  beforeAll(async () => {
    // Fails the first POST of every run with 503, accepts the next ones.
    const seen = new Set<string>();
    receiver = createServer(async (req, res) => {
      const body = JSON.parse(await readBody(req)) as Record<string, any>;
      const first = !seen.has(String(body.run_id));
      seen.add(String(body.run_id));
      const answered = first && req.url?.includes('flaky') ? 503 : 200;
      received.push({ path: req.url ?? '', body, answered });
      res.writeHead(answered).end();
    });
    await new Promise<void>((r) => receiver.listen(0, '127.0.0.1', r));
    hookBase = `http://127.0.0.1:${(receiver.address() as AddressInfo).port}`;
  });
  afterAll(async () => {
    for (const s of servers) await s.stop();
    for (const d of dirs) rmSync(d, { recursive: true, force: true });
    await new Promise((r) => receiver.close(r));
  });

  async function start(extra: string[]): Promise<Client> {
    const dir = mkdtempSync(join(tmpdir(), 'ap-as-hooks-'));
    dirs.push(dir);
    const s = await startServerProcess(['--config', FIXTURE_CONFIG, '--data-dir', dir, ...extra]);
    servers.push(s);
    return new Client({ apiUrl: s.url, callerOptions: { maxRetries: 0 } });
  }

  it('POSTs each finished run once, retrying a receiver that failed the first try', async () => {
    const client = await start(['--webhook-allow', '127.0.0.1']);
    const thread = await client.threads.create();
    const ok = await client.runs.create(thread.thread_id, 'counter', { webhook: `${hookBase}/flaky?token=t1`, input: { count: 0 } });
    const failed = await client.runs.create(null, 'fail', { webhook: `${hookBase}/flaky`, input: { x: 1 } });
    const plain = await client.runs.wait(null, 'counter', { webhook: `${hookBase}/plain`, input: { count: 0 } });
    expect(plain).toMatchObject({ count: 11 });
    const accepted = (runId: string) => received.filter((r) => r.body.run_id === runId && r.answered === 200);
    for (const id of [ok.run_id, failed.run_id]) {
      await expect.poll(() => accepted(id).length, { timeout: 60_000, interval: 200 }).toBe(1);
      // The first try failed (503) and was retried once.
      expect(received.filter((r) => r.body.run_id === id).map((r) => r.answered)).toEqual([503, 200]);
    }
    await expect.poll(() => received.filter((r) => r.path === '/plain').length, { timeout: 60_000 }).toBe(1);

    const hook = accepted(ok.run_id)[0]!;
    expect(hook.path).toBe('/flaky?token=t1');
    expect(hook.body).toMatchObject({
      run_id: ok.run_id,
      thread_id: thread.thread_id,
      status: 'success',
      values: { count: 11, steps: ['first', 'second'] },
      error: null,
      kwargs: { webhook: `${hookBase}/flaky?token=t1` },
    });
    expect(Date.parse(hook.body.webhook_sent_at)).toBeGreaterThan(0);
    expect(accepted(failed.run_id)[0]!.body).toMatchObject({
      status: 'error',
      error: { error: 'FixtureFailure', message: 'the fixture graph failed on purpose' },
    });
    // Nothing more arrives later (no duplicate deliveries).
    const total = received.length;
    await new Promise((r) => setTimeout(r, 1_500));
    expect(received.length).toBe(total);
  });

  it('refuses loopback targets unless --webhook-allow names them, and non-http(s) URLs at create', async () => {
    const client = await start([]);
    const server = servers.at(-1)!;
    const thread = await client.threads.create();
    const run = await client.runs.create(thread.thread_id, 'counter', { webhook: `${hookBase}/refused` });
    await client.runs.join(thread.thread_id, run.run_id);
    await expect.poll(() => server.output().includes('webhook refused; not retrying'), { timeout: 30_000 }).toBe(true);
    expect(received.filter((r) => r.path === '/refused')).toHaveLength(0);
    // Written as a decimal number, 127.0.0.1 is still loopback.
    const port = new URL(hookBase).port;
    const sneaky = await client.runs.create(thread.thread_id, 'counter', { webhook: `http://2130706433:${port}/sneaky` });
    await client.runs.join(thread.thread_id, sneaky.run_id);
    await expect.poll(() => server.output().split('webhook refused; not retrying').length, { timeout: 30_000 }).toBe(3);
    expect(received.filter((r) => r.path === '/sneaky')).toHaveLength(0);

    for (const webhook of ['ftp://example.com/x', 'not a url', 'javascript:alert(1)']) {
      const res = await fetch(`${server.url}/runs`, {
        method: 'POST',
        headers: { 'content-type': 'application/json' },
        body: JSON.stringify({ assistant_id: 'counter', webhook }),
      });
      expect(res.status).toBe(422);
      expect(((await res.json()) as { detail: string }).detail).toContain('webhook');
    }
  });
});

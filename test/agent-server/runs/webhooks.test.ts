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
import { FIXTURE_CONFIG } from '../helpers/harness.ts';
import { EXECUTOR_THREAD, startServerProcess, type ServerProc } from '../helpers/process.ts';

const HOOKS_CONFIG = new URL('../fixtures/webhooks/langgraph.json', import.meta.url).pathname;

interface Received {
  path: string;
  secret: string | undefined;
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
      received.push({
        path: req.url ?? '',
        secret: req.headers['x-hook-secret'] as string | undefined,
        body,
        answered,
      });
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

  async function start(extra: string[], config = FIXTURE_CONFIG, env: Record<string, string> = {}): Promise<Client> {
    const dir = mkdtempSync(join(tmpdir(), 'ap-as-hooks-'));
    dirs.push(dir);
    const s = await startServerProcess([...EXECUTOR_THREAD, '--config', config, '--data-dir', dir, ...extra], env);
    servers.push(s);
    return new Client({ apiUrl: s.url, callerOptions: { maxRetries: 0 } });
  }

  /**
   * The server on the langgraph.json with webhooks settings, shared by the tests that use it (a start is ~1 s of
   * CPU). Its allow-list names the receiver's loopback address only: other private targets stay refused.
   */
  let withHooks: Promise<Client> | undefined;
  const hooksServer = () =>
    (withHooks ??= start(['--webhook-allow', '127.0.0.1'], HOOKS_CONFIG, { LG_WEBHOOK_SECRET: 'xyz' }));

  it('POSTs each finished run once, retrying a receiver that failed the first try', async () => {
    // langgraph.json webhooks.headers: sent with each delivery, env templates resolved at start.
    const client = await hooksServer();
    const thread = await client.threads.create();
    const ok = await client.runs.create(thread.thread_id, 'counter', {
      webhook: `${hookBase}/flaky?token=t1`,
      input: { count: 0 },
    });
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
    expect(hook.secret).toBe('s3cret-xyz');
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

  it('refuses private targets unless --webhook-allow names them: at create when the URL says so, else at delivery', async () => {
    const client = await start([]);
    const server = servers.at(-1)!;
    const port = new URL(hookBase).port;
    // A name that resolves to loopback is refused when the delivery connects.
    const thread = await client.threads.create();
    const run = await client.runs.create(thread.thread_id, 'counter', {
      webhook: `http://localhost:${port}/refused`,
      input: { count: 0 },
    });
    await client.runs.join(thread.thread_id, run.run_id);
    await expect.poll(() => server.output().includes('webhook refused; not retrying'), { timeout: 30_000 }).toBe(true);
    expect(server.output()).toMatch(/resolves only to non-public addresses/);
    expect(received.filter((r) => r.path === '/refused')).toHaveLength(0);

    const refusedAtCreate = [
      `http://127.0.0.1:${port}/x`,
      `http://2130706433:${port}/x`,
      `http://[::ffff:127.0.0.1]:${port}/x`,
      'http://169.254.169.254/latest/meta-data',
      'http://0.0.0.0/',
      'http://[::1]/',
      // IPv6 literal spellings of loopback, link-local and private IPv4 addresses.
      `http://[::127.0.0.1]:${port}/x`,
      `http://[0:0:0:0:0:ffff:127.0.0.1]:${port}/x`,
      'http://[::169.254.169.254]/latest/meta-data',
      'http://[64:ff9b::a9fe:a9fe]/latest/meta-data',
      'http://[::10.0.0.1]/',
      'http://[2002:7f00:1::]/',
      'ftp://example.com/x',
      'not a url',
      'javascript:alert(1)',
    ];
    for (const webhook of refusedAtCreate) {
      for (const path of ['/runs', '/runs/crons']) {
        const res = await fetch(`${server.url}${path}`, {
          method: 'POST',
          headers: { 'content-type': 'application/json' },
          body: JSON.stringify({ assistant_id: 'counter', webhook, schedule: '0 9 * * *' }),
        });
        expect(res.status, `${path} ${webhook}`).toBe(422);
        expect(((await res.json()) as { detail: string }).detail).toContain('webhook');
      }
    }
  });

  it('applies langgraph.json webhooks.url at create', async () => {
    // A public host, which the allow-list has no say over: the length limit is what refuses it.
    const client = await hooksServer();
    await expect(
      client.runs.create(null, 'counter', { webhook: `https://example.com/${'x'.repeat(300)}` }),
    ).rejects.toThrow(/longer than 200 characters/);
  });
});

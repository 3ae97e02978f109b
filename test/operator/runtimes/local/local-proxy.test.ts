// The local runtime's proxy (<dev>/deployments/<id>/...) in front of a real agent server process, attacked the way a
// client can: oversized bodies (with a length, chunked, behind `Expect: 100-continue`) get a 413 and leave the pooled
// upstream connections clean for the next callers; curl's `Expect: 100-continue` for a large allowed body works;
// hop-by-hop headers, garbage, bodies that break off and slow senders get 4xx (or nothing), never a 5xx; the front
// server's header and request timeouts answer 408 while a long event stream is not cut; a credential check that fails
// is a 503 with Retry-After, and nothing goes on.
import { execFile } from 'node:child_process';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { connect } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { promisify } from 'node:util';
import Fastify from 'fastify';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createFrontServer } from '../../../../src/lib/http.ts';
import { deploymentProxy } from '../../../../src/operator/runtimes/local/proxy.ts';
import { startServerProcess, type ServerProc } from '../../../agent-server/helpers/process.ts';

const CONFIG = new URL('../../../fixtures/streams/langgraph.json', import.meta.url).pathname;
/** Short front-server timeouts, so slow senders are cut within the test. */
const TIMEOUTS = { headersTimeoutMs: 1_500, requestTimeoutMs: 3_000 };
const LIMIT = 1024 * 1024;

let server: ServerProc;
let dir: string;
let port: number;
let base: string;
let front: ReturnType<typeof createFrontServer>;

/** Writes `parts` to a fresh socket (waiting `gapMs` between them), then reads until the server closes it. */
function rawExchange(parts: (string | Buffer)[], opts: { gapMs?: number; end?: boolean; waitMs?: number } = {}) {
  return new Promise<string>((resolve) => {
    const s = connect(port, '127.0.0.1');
    let out = '';
    const timer = setTimeout(() => s.destroy(), opts.waitMs ?? 10_000);
    s.on('data', (d) => (out += d.toString('latin1')));
    s.on('close', () => {
      clearTimeout(timer);
      resolve(out);
    });
    s.on('error', () => undefined);
    void (async () => {
      for (const p of parts) {
        if (s.destroyed) return;
        s.write(p);
        if (opts.gapMs) await new Promise((r) => setTimeout(r, opts.gapMs));
      }
      if (opts.end) s.end();
    })();
  });
}

const statusOf = (raw: string) => Number(/^HTTP\/1\.1 (\d{3})/.exec(raw)?.[1] ?? 0);

async function search(): Promise<number> {
  const res = await fetch(`${base}/assistants/search`, {
    method: 'POST',
    headers: { 'content-type': 'application/json' },
    body: JSON.stringify({ limit: 1 }),
  });
  await res.arrayBuffer();
  return res.status;
}

beforeAll(async () => {
  dir = mkdtempSync(join(tmpdir(), 'ap-proxy-'));
  server = await startServerProcess(['--config', CONFIG, '--data-dir', join(dir, 'data')]);
  const upstream = Number(new URL(server.url).port);
  const proxy = Fastify();
  await deploymentProxy(proxy, {
    resolve: async () => ({ port: upstream, tenant: 'ws', acquire: () => () => undefined }),
    bodyLimit: LIMIT,
  });
  await proxy.ready();
  front = createFrontServer((req, res) => proxy.routing(req, res), TIMEOUTS);
  await new Promise<void>((r) => front.listen(0, '127.0.0.1', () => r()));
  port = (front.address() as { port: number }).port;
  base = `http://127.0.0.1:${port}/deployments/d1`;
}, 90_000);

afterAll(async () => {
  front?.closeAllConnections();
  front?.close();
  await server?.stop();
  rmSync(dir, { recursive: true, force: true });
});

describe('the local proxy', { timeout: 60_000 }, () => {
  it('answers an oversized body 413 without poisoning the upstream connections', async () => {
    const big = Buffer.alloc(LIMIT + 1, 'a');
    const withLength = fetch(`${base}/assistants/search`, {
      method: 'POST',
      headers: { 'content-type': 'application/json' },
      body: big,
    }).then(
      (r) => r.status,
      () => 'reset',
    );
    // Chunked, no length: only counting tells it is too large.
    const chunked = rawExchange(
      [
        'POST /deployments/d1/assistants/search HTTP/1.1\r\nHost: x\r\ncontent-type: application/json\r\n' +
          'transfer-encoding: chunked\r\n\r\n',
        ...Array.from({ length: 5 }, () => `40000\r\n${'b'.repeat(0x40000)}\r\n`),
        '0\r\n\r\n',
      ],
      { gapMs: 20 },
    );
    // Callers in between and after all get their own answers.
    const during = await Promise.all(Array.from({ length: 6 }, search));
    expect([await withLength, statusOf(await chunked)]).toEqual([413, 413]);
    expect(during).toEqual(Array(6).fill(200));
    expect(await Promise.all(Array.from({ length: 6 }, search))).toEqual(Array(6).fill(200));
  });

  it('takes curl bodies sent with Expect: 100-continue (large and allowed: 200; too large: 413)', async () => {
    const file = join(dir, 'body.json');
    writeFileSync(file, JSON.stringify({ limit: 1, metadata: { pad: 'p'.repeat(LIMIT / 2) } }));
    const curl = async (args: string[]) =>
      (
        await promisify(execFile)('curl', [
          '-s',
          '-o',
          '/dev/null',
          '-w',
          '%{http_code}',
          '-H',
          'Expect: 100-continue',
          '-H',
          'content-type: application/json',
          ...args,
          `${base}/assistants/search`,
        ])
      ).stdout;
    expect(await curl(['--data-binary', `@${file}`])).toBe('200');
    writeFileSync(file, JSON.stringify({ pad: 'p'.repeat(LIMIT) }));
    expect(await curl(['--data-binary', `@${file}`])).toBe('413');
    expect(await search()).toBe(200);
  });

  it('answers what a client can send wrong with a 4xx or a pass-through, never a 5xx', async () => {
    const head = (extra: string, body = '{}') =>
      `POST /deployments/d1/assistants/search HTTP/1.1\r\nHost: x\r\ncontent-type: application/json\r\n${extra}` +
      `content-length: ${Buffer.byteLength(body)}\r\nconnection: close\r\n\r\n${body}`;
    const cases: [string, string | (string | Buffer)[]][] = [
      ['garbage', 'GARBAGE\r\n\r\n'],
      ['a hop-by-hop Keep-Alive header', head('keep-alive: timeout=5\r\n')],
      ['an Upgrade header', head('upgrade: h2c\r\n')],
      ['a TE header', head('te: gzip\r\n')],
      ['Expect: 100-continue on a small body', head('expect: 100-continue\r\n')],
      ['an unknown Expect', head('expect: something-else\r\n')],
      [
        'a GET with a body',
        `GET /deployments/d1/ok HTTP/1.1\r\nHost: x\r\ncontent-length: 5\r\nconnection: close\r\n\r\nhello`,
      ],
      [
        'a body without content type',
        `POST /deployments/d1/assistants/search HTTP/1.1\r\nHost: x\r\ncontent-length: 2\r\nconnection: close\r\n\r\n{}`,
      ],
      ['a length and chunked at once', head('transfer-encoding: chunked\r\n')],
      [
        'a bad chunk',
        'POST /deployments/d1/assistants/search HTTP/1.1\r\nHost: x\r\ntransfer-encoding: chunked\r\n\r\nzz\r\n',
      ],
      [
        'a body shorter than its length, then the end',
        [
          'POST /deployments/d1/assistants/search HTTP/1.1\r\nHost: x\r\ncontent-type: application/json\r\ncontent-length: 100\r\n\r\n{"li',
        ],
      ],
    ];
    for (const [what, parts] of cases) {
      const raw = await rawExchange(Array.isArray(parts) ? parts : [parts], { end: true });
      const status = statusOf(raw);
      expect(status === 0 || status < 500, `${what}: ${raw.slice(0, 120)}`).toBe(true);
    }
    // A client that aborts mid-body: nothing to answer, and the next callers are served.
    await Promise.all(
      Array.from({ length: 4 }, () => {
        const s = connect(port, '127.0.0.1');
        s.on('error', () => undefined);
        s.write(
          'POST /deployments/d1/assistants/search HTTP/1.1\r\nHost: x\r\ncontent-type: application/json\r\n' +
            `content-length: 100000\r\n\r\n${'{"x":"'.padEnd(5000, 'y')}`,
        );
        return new Promise((r) => setTimeout(() => r(s.destroy()), 200));
      }),
    );
    expect(await Promise.all(Array.from({ length: 4 }, search))).toEqual(Array(4).fill(200));
  });

  it("answers 503 with Retry-After, not 500, when the platform's credential check fails, and sends nothing on", async () => {
    // The dev process's check reads its key store (PostgreSQL in production): that store being away is a moment to
    // wait out, not a failure of the proxy, and the request must not reach the agent unchecked.
    const upstream = Number(new URL(server.url).port);
    let acquired = 0;
    const proxy = Fastify();
    await deploymentProxy(proxy, {
      resolve: async () => ({
        port: upstream,
        tenant: 'ws',
        acquire: () => {
          acquired++;
          return () => undefined;
        },
      }),
      refuse: async () => {
        throw new Error('connect ECONNREFUSED 127.0.0.1:5432');
      },
    });
    try {
      const res = await proxy.inject({
        method: 'POST',
        url: '/deployments/d1/assistants/search',
        headers: { 'content-type': 'application/json', 'x-api-key': 'some-key' },
        payload: '{}',
      });
      expect(res.statusCode).toBe(503);
      expect(res.headers['retry-after']).toBe('2');
      expect(res.json()).toEqual({
        detail:
          "Deployment d1 cannot take requests right now: the platform could not check this request's credentials; retry after 2 s.",
      });
      expect(acquired).toBe(0);
    } finally {
      await proxy.close();
    }
  });

  it('cuts slow headers and slow bodies with 408, and lets a long event stream run past both timeouts', async () => {
    const slowHeaders = await rawExchange(['GET /deployments/d1/ok HTTP/1.1\r\n', 'Host: x\r\n'], { gapMs: 100 });
    expect(statusOf(slowHeaders)).toBe(408);
    const slowBody = await rawExchange([
      'POST /deployments/d1/assistants/search HTTP/1.1\r\nHost: x\r\ncontent-type: application/json\r\n' +
        'content-length: 100\r\n\r\n{"limit"',
    ]);
    expect(statusOf(slowBody)).toBe(408);

    const thread = (await (
      await fetch(`${base}/threads`, { method: 'POST', headers: { 'content-type': 'application/json' }, body: '{}' })
    ).json()) as { thread_id: string };
    const stream = await fetch(`${base}/threads/${thread.thread_id}/stream`);
    expect(stream.status).toBe(200);
    const reader = stream.body!.getReader();
    const started = Date.now();
    let text = '';
    // Longer than the request timeout; the stream keeps its heartbeats coming through the proxy.
    while (Date.now() - started < TIMEOUTS.requestTimeoutMs + 3_500) {
      const { value, done } = await reader.read();
      expect(done).toBe(false);
      text += Buffer.from(value!).toString();
    }
    await reader.cancel();
    expect(text).toContain('heartbeat');
  });
});

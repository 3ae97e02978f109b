// The `feedback` event of runs with feedback_keys, against a local HTTP server speaking LangSmith's
// POST /feedback/tokens (what the langsmith client calls): one presigned URL per key for the run's id, after the
// run's other events, on the run's stream and on a later join; the request carries the API key, the run id, the
// key and the expiry; no keys or a refusing LangSmith mean no event (the run is unaffected, the key never logged);
// without LangSmith configured the server says so once at start and sends no feedback event.
import http from 'node:http';
import { randomUUID } from 'node:crypto';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { Client } from '@langchain/langgraph-sdk';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { EXECUTOR_THREAD, startServerProcess, type ServerProc } from '../helpers/process.ts';

const CONFIG = new URL('../../fixtures/streams/langgraph.json', import.meta.url).pathname;
const API_KEY = `lsv2_test_${randomUUID()}`;
type Ev = { event: string; data: any };
type TokenRequest = { apiKey: string | undefined; body: any };

describe('feedback events (LangSmith feedback tokens)', { timeout: 120_000 }, () => {
  const dirs: string[] = [];
  const servers: ServerProc[] = [];
  const requests: TokenRequest[] = [];
  let langsmith: http.Server;
  let langsmithUrl: string;
  let withLs: ServerProc;
  let client: Client;

  beforeAll(async () => {
    // LangSmith's feedback-token endpoint: {id, url, expires_at} per token; the key "refused" gets a 403.
    langsmith = http.createServer((req, res) => {
      let raw = '';
      req.on('data', (d: Buffer) => (raw += d.toString()));
      req.on('end', () => {
        if (req.method !== 'POST' || req.url !== '/feedback/tokens') {
          res.writeHead(404).end();
          return;
        }
        const body = JSON.parse(raw);
        requests.push({ apiKey: req.headers['x-api-key'] as string | undefined, body });
        if (body.feedback_key === 'refused') {
          res.writeHead(403, { 'content-type': 'application/json' }).end('{"detail":"Forbidden"}');
          return;
        }
        const id = randomUUID();
        res.writeHead(200, { 'content-type': 'application/json' }).end(
          JSON.stringify({
            id,
            url: `${langsmithUrl}/feedback/tokens/${id}?key=${body.feedback_key}`,
            expires_at: new Date(Date.now() + 3 * 3600_000).toISOString(),
          }),
        );
      });
    });
    await new Promise<void>((r) => langsmith.listen(0, '127.0.0.1', r));
    langsmithUrl = `http://127.0.0.1:${(langsmith.address() as { port: number }).port}`;
    const dir = mkdtempSync(join(tmpdir(), 'ap-feedback-'));
    dirs.push(dir);
    withLs = await startServerProcess([...EXECUTOR_THREAD, '--config', CONFIG, '--data-dir', dir], {
      LANGSMITH_API_KEY: API_KEY,
      LANGSMITH_ENDPOINT: langsmithUrl,
      LANGSMITH_TRACING: 'false',
    });
    servers.push(withLs);
    client = new Client({ apiUrl: withLs.url, callerOptions: { maxRetries: 0 } });
  });
  afterAll(async () => {
    for (const s of servers) await s.stop();
    await new Promise((r) => langsmith?.close(r));
    for (const d of dirs) rmSync(d, { recursive: true, force: true });
  });

  async function streamRun(
    c: Client,
    feedbackKeys?: string[],
  ): Promise<{ threadId: string; runId: string; events: Ev[] }> {
    const t = await c.threads.create();
    const events: Ev[] = [];
    for await (const e of c.runs.stream(t.thread_id, 'chat', {
      input: { text: 'ok', messages: [{ role: 'user', content: 'hi' }] },
      streamMode: ['values'],
      ...(feedbackKeys ? { feedbackKeys } : {}),
    })) {
      events.push({ event: e.event, data: e.data });
    }
    return { threadId: t.thread_id, runId: (events[0]!.data as { run_id: string }).run_id, events };
  }

  it('sends {key: presigned URL} for every key after the run, made for the run id with the API key and an expiry', async () => {
    const before = requests.length;
    const { threadId, runId, events } = await streamRun(client, ['correctness', 'helpfulness']);
    const mine = requests.slice(before);
    expect(mine).toHaveLength(2);
    for (const r of mine) {
      expect(r.apiKey).toBe(API_KEY);
      expect(r.body.run_id).toBe(runId);
      expect(r.body.expires_in).toEqual({ hours: 3 });
    }
    expect(mine.map((r) => r.body.feedback_key).sort()).toEqual(['correctness', 'helpfulness']);
    const names = events.map((e) => e.event);
    expect(names.filter((n) => n === 'feedback')).toHaveLength(1);
    // After everything the run streamed.
    expect(names.at(-1)).toBe('feedback');
    const feedback = events.at(-1)!.data as Record<string, string>;
    expect(Object.keys(feedback).sort()).toEqual(['correctness', 'helpfulness']);
    expect(feedback.correctness).toMatch(new RegExp(`^${langsmithUrl}/feedback/tokens/[0-9a-f-]+\\?key=correctness$`));
    expect(feedback.helpfulness).toMatch(/\?key=helpfulness$/);
    // It is part of the run's stream: a later join (even asking for values only) gets the same event.
    const joined: Ev[] = [];
    for await (const e of client.runs.joinStream(threadId, runId, { streamMode: ['values'] }))
      joined.push({ event: e.event, data: e.data });
    expect(joined.filter((e) => e.event === 'feedback')).toEqual([{ event: 'feedback', data: feedback }]);
  });

  it('no feedback_keys: no token request and no feedback event', async () => {
    const before = requests.length;
    const { events } = await streamRun(client);
    expect(requests.length).toBe(before);
    expect(events.map((e) => e.event)).not.toContain('feedback');
  });

  it('LangSmith refusing: the run succeeds without a feedback event, the reason is logged, the API key never is', async () => {
    const { threadId, runId, events } = await streamRun(client, ['refused']);
    expect(events.map((e) => e.event)).not.toContain('feedback');
    expect(events.map((e) => e.event)).not.toContain('error');
    expect((await client.runs.get(threadId, runId)).status).toBe('success');
    await expect
      .poll(() => withLs.output().includes('creating LangSmith feedback tokens failed'), { timeout: 10_000 })
      .toBe(true);
    expect(withLs.output()).not.toContain(API_KEY);
  });

  it('without LangSmith configured: one log line at start, and runs with feedback_keys have no feedback event', async () => {
    const dir = mkdtempSync(join(tmpdir(), 'ap-feedback-none-'));
    dirs.push(dir);
    const plain = await startServerProcess([...EXECUTOR_THREAD, '--config', CONFIG, '--data-dir', dir], {
      LANGSMITH_API_KEY: '',
      LANGCHAIN_API_KEY: '',
    });
    servers.push(plain);
    const before = requests.length;
    const { events } = await streamRun(new Client({ apiUrl: plain.url, callerOptions: { maxRetries: 0 } }), ['x']);
    expect(events.map((e) => e.event)).not.toContain('feedback');
    expect(requests.length).toBe(before);
    expect(plain.output().split('LangSmith not configured').length - 1).toBe(1);
  });

  it('a LANGSMITH_ENDPOINT that is not an http(s) URL stops the server with a message naming it', async () => {
    const dir = mkdtempSync(join(tmpdir(), 'ap-feedback-bad-'));
    dirs.push(dir);
    await expect(
      startServerProcess([...EXECUTOR_THREAD, '--config', CONFIG, '--data-dir', dir], {
        LANGSMITH_API_KEY: API_KEY,
        LANGSMITH_ENDPOINT: 'file:///etc/passwd',
      }),
    ).rejects.toThrow(/LANGSMITH_ENDPOINT: must be an http\(s\) URL/);
  });
});

// What a run takes from the request besides its body: headers in config.configurable (the platform's default, and
// langgraph.json http.configurable_headers), never the platform's credentials; checkpoint_during, durability's
// older name that the SDK still sends.
import { mkdtempSync, rmSync } from 'node:fs';
import type { AddressInfo } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { Client } from '@langchain/langgraph-sdk';
import type { FastifyInstance } from 'fastify';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { buildApp } from '../../../src/agent-server/app.ts';
import { loadGraphs } from '../../../src/agent-server/graphs/index.ts';
import { INTERNAL_CALL_HEADER } from '../../../src/agent-server/platform/internal-call.ts';
import { RunEngine } from '../../../src/agent-server/runs/engine.ts';
import { ensureSystemAssistants } from '../../../src/agent-server/server.ts';
import { openEmbeddedStorage } from '../../../src/agent-server/storage/embedded/index.ts';
import { silentLogger } from '../../../src/lib/logger.ts';

const fixture = (name: string) => new URL(`../fixtures/request-headers/${name}`, import.meta.url).pathname;

async function serve(configPath: string): Promise<{ url: string; close(): Promise<void> }> {
  const logger = silentLogger();
  const dir = mkdtempSync(join(tmpdir(), 'ap-req-config-'));
  const graphs = await loadGraphs(configPath, { logger });
  const storage = openEmbeddedStorage({ dataDir: dir });
  await ensureSystemAssistants(storage, graphs);
  const engine = new RunEngine({ storage, graphs, logger, concurrency: 2, runTimeoutMs: 30_000 });
  const app: FastifyInstance = await buildApp({ storage, graphs, engine, logger, keepAliveMs: 200 });
  await engine.start();
  await app.listen({ port: 0, host: '127.0.0.1' });
  return {
    url: `http://127.0.0.1:${(app.server.address() as AddressInfo).port}`,
    async close() {
      await engine.stop(2_000);
      await app.close();
      await storage.close();
      rmSync(dir, { recursive: true, force: true });
    },
  };
}

/** Headers an attacker or a client might send along with a run. */
const SENT = {
  'x-user-id': 'user-7',
  'x-user-secret': 'hunter2',
  'my-org': 'acme',
  'x-api-key': 'the-deployment-key',
  'x-tenant-id': 'tenant-a',
  'x-service-key': 'service-key',
  [INTERNAL_CALL_HEADER]: 'forged-or-real-internal-token',
  'x-agentplane-fallthrough': '1',
  authorization: 'Bearer abc',
  'user-agent': 'my-app/1.0',
};

type Seen = { seen: Record<string, unknown>; steps: string[] };

/** A server of `config` for the enclosing describe, and an SDK client sending `headers`. */
function serving(config: string, headers: Record<string, string> = {}) {
  let server: Awaited<ReturnType<typeof serve>> | undefined;
  let client: Client | undefined;
  beforeAll(async () => {
    server = await serve(fixture(config));
    client = new Client({ apiUrl: server.url, defaultHeaders: headers, callerOptions: { maxRetries: 0 } });
  });
  afterAll(() => server?.close());
  return {
    get url() {
      return server!.url;
    },
    get client() {
      return client!;
    },
  };
}

describe('headers in config.configurable, platform default', () => {
  const s = serving('langgraph.json', SENT);

  it('passes x-* headers and user-agent on every kind of run creation, never credentials or internal headers', async () => {
    const t = await s.client.threads.create();
    const waited = (await s.client.runs.wait(t.thread_id, 'headers', { input: {} })) as Seen;
    const stateless = (await s.client.runs.wait(null, 'headers', { input: {} })) as Seen;
    let streamed: Seen | undefined;
    for await (const part of s.client.runs.stream(null, 'headers', { input: {}, streamMode: 'values' })) {
      if (part.event === 'values') streamed = part.data as Seen;
    }
    for (const out of [waited, stateless, streamed!]) {
      expect(out.seen).toMatchObject({ 'x-user-id': 'user-7', 'x-user-secret': 'hunter2', 'user-agent': 'my-app/1.0' });
      for (const name of [
        'my-org',
        'authorization',
        'x-api-key',
        'x-tenant-id',
        'x-service-key',
        INTERNAL_CALL_HEADER,
        'x-agentplane-fallthrough',
      ]) {
        expect(out.seen).not.toHaveProperty(name);
      }
    }
    // What the graph saw is what the run record keeps, and nothing more.
    const [run] = await s.client.runs.list(t.thread_id);
    const stored = JSON.stringify(run);
    expect(stored).toContain('user-7');
    for (const secret of ['the-deployment-key', 'forged-or-real-internal-token', 'Bearer abc', 'service-key']) {
      expect(stored).not.toContain(secret);
    }
  });

  it("batch runs take the headers too, and the SDK's camelCase payload keys", async () => {
    const [run] = await s.client.runs.createBatch([
      { assistantId: 'headers', input: {}, streamMode: ['updates'], metadata: { from: 'batch' }, afterSeconds: 0 },
    ]);
    const kwargs = (run as unknown as { kwargs: unknown }).kwargs as {
      config: { configurable: Record<string, unknown> };
      stream_mode: string[];
    };
    expect(kwargs.config.configurable).toMatchObject({ 'x-user-id': 'user-7', 'user-agent': 'my-app/1.0' });
    expect(kwargs.config.configurable).not.toHaveProperty('x-api-key');
    expect(kwargs.stream_mode).toEqual(['updates']);
    expect(run!.metadata).toMatchObject({ from: 'batch' });
  });

  it("a header overrides the body's configurable key of the same name; reserved keys stay the server's", async () => {
    const t = await s.client.threads.create();
    const out = (await s.client.runs.wait(t.thread_id, 'headers', {
      input: {},
      config: { configurable: { 'x-user-id': 'from-body', kept: 'body-only' } },
    })) as Seen;
    expect(out.seen).toMatchObject({ 'x-user-id': 'user-7', kept: 'body-only', thread_id: t.thread_id });
  });
});

describe('headers in config.configurable, http.configurable_headers', () => {
  const s = serving('langgraph.narrow.json', SENT);

  it('takes only the included patterns, exclusions first, and never credentials even when a pattern names them', async () => {
    const out = (await s.client.runs.wait(null, 'headers', { input: {} })) as Seen;
    expect(out.seen).toMatchObject({ 'x-user-id': 'user-7', 'my-org': 'acme' });
    for (const name of ['x-user-secret', 'user-agent', 'x-api-key', INTERNAL_CALL_HEADER, 'x-agentplane-fallthrough']) {
      expect(out.seen).not.toHaveProperty(name);
    }
  });
});

describe('checkpoint_during', () => {
  const s = serving('langgraph.json');

  it('false keeps only the checkpoints of the run’s end, as durability "exit" does; true or absent keeps every step', async () => {
    const history = async (opts: { checkpointDuring?: boolean }) => {
      const t = await s.client.threads.create();
      const out = (await s.client.runs.wait(t.thread_id, 'headers', { input: {}, ...opts })) as Seen;
      expect(out.steps).toEqual(['look', 'again']);
      return (await s.client.threads.getHistory(t.thread_id, { limit: 50 })).length;
    };
    const every = await history({});
    expect(await history({ checkpointDuring: true })).toBe(every);
    const exitOnly = await history({ checkpointDuring: false });
    expect(exitOnly).toBeLessThan(every);
  });
});

describe('runs.list select', () => {
  const s = serving('langgraph.json');

  it('answers only the selected fields (the SDK sends a JSON list); a malformed select is a 422', async () => {
    const t = await s.client.threads.create();
    await s.client.runs.wait(t.thread_id, 'headers', { input: {} });
    const rows = await s.client.runs.list(t.thread_id, { select: ['run_id', 'status', 'no_such_field' as 'status'] });
    expect(rows).toHaveLength(1);
    expect(Object.keys(rows[0]!).sort()).toEqual(['run_id', 'status']);
    const plain = await fetch(`${s.url}/threads/${t.thread_id}/runs?select=status`);
    expect(await plain.json()).toEqual([{ status: 'success' }]);
    const bad = await fetch(`${s.url}/threads/${t.thread_id}/runs?select=${encodeURIComponent('[1,')}`);
    expect(bad.status).toBe(422);
    expect(((await bad.json()) as { detail: string }).detail).toContain('select');
  });
});

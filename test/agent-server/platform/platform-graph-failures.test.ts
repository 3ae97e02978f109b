// A langgraph.json with one graph that throws at import and one good graph, against real server processes: the
// server starts and serves the good graph, the broken one is reported (log, /info) and every call that needs it
// answers 422 naming the cause; with --strict the server refuses to start.
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { Client } from '@langchain/langgraph-sdk';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { systemAssistantId } from '../../../src/agent-server/graphs/index.ts';
import { startServerProcess, type ServerProc } from '../helpers/process.ts';

const CONFIG = fileURLToPath(new URL('../fixtures/platform-broken/langgraph.json', import.meta.url));
const CAUSE = /SOME_REQUIRED_SETTING is not set/;

describe.each([0, 1])('a graph that fails to import (--executor-threads %i)', (threads) => {
  let server: ServerProc;
  let client: Client;
  let dir: string;

  beforeAll(async () => {
    dir = mkdtempSync(join(tmpdir(), 'ap-as-broken-'));
    server = await startServerProcess(['--config', CONFIG, '--data-dir', dir, '--executor-threads', String(threads)]);
    client = new Client({ apiUrl: server.url, callerOptions: { maxRetries: 0 } });
  });
  afterAll(async () => {
    await server?.stop();
    rmSync(dir, { recursive: true, force: true });
  });

  async function call(method: string, path: string, body?: unknown) {
    const res = await fetch(`${server.url}${path}`, {
      method,
      headers: body === undefined ? {} : { 'content-type': 'application/json' },
      body: body === undefined ? undefined : JSON.stringify(body),
    });
    return { status: res.status, body: (await res.json()) as Record<string, unknown> };
  }

  it('logs the failure and lists it in /info; the good graph serves', async () => {
    const line = server
      .output()
      .split('\n')
      .find((l) => l.includes('graph failed to load'));
    expect(line).toBeDefined();
    expect(JSON.parse(line!)).toMatchObject({ level: 'error', graph_id: 'broken' });
    expect(line).toMatch(CAUSE);
    const info = await call('GET', '/info');
    expect(info.body.graphs).toEqual(['good', 'broken', 'unbuildable']);
    expect(Object.keys(info.body.graph_errors as object)).toEqual(['broken']);
    expect((info.body.graph_errors as Record<string, string>).broken).toMatch(CAUSE);

    for (let i = 0; i < 3; i++) {
      const thread = await client.threads.create();
      expect(await client.runs.wait(thread.thread_id, 'good', { input: {} })).toEqual({ ok: true });
    }
  });

  it('runs, schemas and the graph of the broken assistant answer 422 naming the cause', async () => {
    const thread = await client.threads.create();
    const byName = await call('POST', `/threads/${thread.thread_id}/runs`, { assistant_id: 'broken', input: {} });
    expect(byName.status).toBe(422);
    expect(byName.body.detail).toMatch(/Graph "broken" is unavailable/);
    expect(byName.body.detail).toMatch(CAUSE);
    // An assistant made on the broken graph (by its UUID) and stateless runs are refused the same way.
    const mine = await client.assistants.create({ graphId: 'broken', name: 'mine' });
    const byId = await call('POST', '/runs/wait', { assistant_id: mine.assistant_id, input: {} });
    expect(byId.status).toBe(422);
    expect(byId.body.detail).toMatch(CAUSE);
    expect((await call('POST', `/threads/${thread.thread_id}/runs/stream`, { assistant_id: 'broken' })).status).toBe(
      422,
    );

    const schemas = await call('GET', `/assistants/${systemAssistantId('broken')}/schemas`);
    expect(schemas.status).toBe(422);
    expect(schemas.body.detail).toMatch(CAUSE);
    expect((await call('GET', '/assistants/broken/graph')).status).toBe(422);
    // Through the SDK the cause reaches the caller at once (422 is not retried).
    await expect(client.runs.wait(thread.thread_id, 'broken', { input: {} })).rejects.toThrow(/422/);
    // The thread was not touched by the refused runs.
    expect((await client.threads.get(thread.thread_id)).status).toBe('idle');
  });

  it('a factory that cannot build its graph fails the calls that need it, naming the cause', async () => {
    const schemas = await call('GET', '/assistants/unbuildable/schemas');
    expect(schemas.status).toBe(500);
    expect(schemas.body.detail).toMatch(/Graph "unbuildable" could not be built: factory fixture: no model configured/);
    const thread = await client.threads.create();
    const waited = await call('POST', `/threads/${thread.thread_id}/runs/wait`, {
      assistant_id: 'unbuildable',
      input: {},
    });
    expect(waited.body.__error__).toMatchObject({
      error: 'GraphBuildError',
      message: expect.stringMatching(/factory fixture: no model configured/),
    });
  });
});

describe('--strict', () => {
  it('refuses to start when a graph fails to load, naming the graph and the cause', async () => {
    const dir = mkdtempSync(join(tmpdir(), 'ap-as-strict-'));
    try {
      const started = startServerProcess(['--config', CONFIG, '--data-dir', dir, '--strict']);
      const err = await started.then(
        async (s) => {
          await s.stop();
          return null;
        },
        (e: unknown) => e as Error,
      );
      expect(err?.message).toMatch(/server exited with 1/);
      expect(err?.message).toMatch(/graph "broken": importing .*broken\.ts failed/);
      expect(err?.message).toMatch(CAUSE);
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  });
});

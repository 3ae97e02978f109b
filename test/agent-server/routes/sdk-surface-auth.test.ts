// Custom auth on the routes of the wider SDK surface (real server process, owner-only threads): every item of a
// batch goes through threads:create_run, a thread-less joinStream only shows runs of threads the caller sees, and
// patchState is a threads:update of the thread.
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { Client } from '@langchain/langgraph-sdk';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startServerProcess, type ServerProc } from '../helpers/process.ts';

const OWNER_CONFIG = new URL('../fixtures/auth-owner/langgraph.json', import.meta.url).pathname;

const client = (url: string, token: string) =>
  new Client({
    apiUrl: url,
    apiKey: null,
    defaultHeaders: { Authorization: `Bearer ${token}` },
    callerOptions: { maxRetries: 0 },
  });

describe('custom auth on batch runs and thread-less streams', () => {
  let dir: string;
  let server: ServerProc;

  beforeAll(async () => {
    dir = mkdtempSync(join(tmpdir(), 'ap-as-surface-auth-'));
    server = await startServerProcess(['--config', OWNER_CONFIG, '--data-dir', dir]);
  });
  afterAll(async () => {
    await server?.stop();
    rmSync(dir, { recursive: true, force: true });
  });

  it("gives each batch item its own create_run decision and hides other owners' runs from joinStream(null, id)", async () => {
    const alice = client(server.url, 'token-alice');
    const bob = client(server.url, 'token-bob');
    const runs = await alice.runs.createBatch([
      { assistantId: 'counter', input: { count: 1 }, on_completion: 'keep' } as never,
      { assistantId: 'counter', input: { count: 2 }, on_completion: 'keep' } as never,
    ]);
    expect(new Set(runs.map((r) => r.run_id)).size).toBe(2);
    for (const r of runs) {
      expect(await alice.runs.join(r.thread_id, r.run_id)).toMatchObject({ count: expect.any(Number) });
      expect((await alice.threads.get(r.thread_id)).metadata).toMatchObject({ owner: 'alice' });
      await expect(bob.threads.get(r.thread_id)).rejects.toThrow(/404/);
    }
    const seen: string[] = [];
    for await (const e of alice.runs.joinStream(null, runs[0]!.run_id)) seen.push(e.event);
    expect(seen).toContain('values');
    await expect(
      (async () => {
        for await (const _ of bob.runs.joinStream(null, runs[0]!.run_id)) void _;
      })(),
    ).rejects.toThrow(/404/);
  });

  it("guards patchState with threads:update: the owner patches the checkpoint's metadata, others get 404", async () => {
    const alice = client(server.url, 'token-alice');
    const bob = client(server.url, 'token-bob');
    const t = await alice.threads.create();
    await alice.runs.wait(t.thread_id, 'counter', { input: { count: 1 } });
    await expect(bob.threads.patchState(t.thread_id, { by: 'bob' })).rejects.toThrow(/HTTP 404/);
    await alice.threads.patchState(t.thread_id, { by: 'alice' });
    expect((await alice.threads.getState(t.thread_id)).metadata).toMatchObject({ by: 'alice' });
  });
});

// Crons under custom auth (the `crons` resource of the SDK's Auth): each user sees, changes and deletes only their
// own crons, a thread cron needs a thread the user can see, and the threads a stateless cron makes belong to its
// creator.
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

describe('crons under custom auth', { timeout: 120_000 }, () => {
  let dir: string;
  let server: ServerProc;
  let alice: Client;
  let bob: Client;

  beforeAll(async () => {
    dir = mkdtempSync(join(tmpdir(), 'ap-as-crons-auth-'));
    server = await startServerProcess(['--config', OWNER_CONFIG, '--data-dir', dir, '--cron-poll-ms', '200']);
    alice = client(server.url, 'token-alice');
    bob = client(server.url, 'token-bob');
  });
  afterAll(async () => {
    await server?.stop();
    rmSync(dir, { recursive: true, force: true });
  });

  it('keeps each user to their own crons', async () => {
    const mine = await alice.crons.create('counter', { schedule: '0 9 * * *', metadata: { owner: 'bob' } });
    // The handler's filter wins over what the caller wrote.
    expect(mine.metadata).toMatchObject({ owner: 'alice' });
    expect(await alice.crons.count()).toBe(1);
    expect(await bob.crons.count()).toBe(0);
    expect(await bob.crons.search()).toEqual([]);
    await expect(bob.crons.update(mine.cron_id, { enabled: false })).rejects.toThrow(/404/);
    await expect(bob.crons.delete(mine.cron_id)).rejects.toThrow(/404/);
    await expect(client(server.url, 'token-reader').crons.create('counter', { schedule: '0 9 * * *' })).rejects.toThrow(
      /403/,
    );

    const aliceThread = await alice.threads.create();
    await expect(
      bob.crons.createForThread(aliceThread.thread_id, 'counter', { schedule: '0 9 * * *' }),
    ).rejects.toThrow(/404/);
    await alice.crons.delete(mine.cron_id);
  });

  it('gives the threads of a stateless cron to its creator', async () => {
    const cron = await alice.crons.create('counter', {
      schedule: '* * * * * *',
      onRunCompleted: 'keep',
      input: { count: 0 },
    });
    await expect
      .poll(async () => (await alice.threads.search({ metadata: { graph_id: 'counter' } })).length, {
        timeout: 30_000,
        interval: 300,
      })
      .toBeGreaterThanOrEqual(1);
    await alice.crons.delete(cron.cron_id);
    const threads = await alice.threads.search({ metadata: { graph_id: 'counter' }, limit: 100 });
    expect(threads.every((t) => t.metadata?.owner === 'alice')).toBe(true);
    expect(await bob.threads.search({ metadata: { graph_id: 'counter' } })).toEqual([]);
  });

  it("runs each tick as the cron's creator", async () => {
    const thread = await alice.threads.create();
    const cron = await alice.crons.createForThread(thread.thread_id, 'whoami', {
      schedule: '* * * * * *',
      input: { user_id: '' },
    });
    await expect
      .poll(async () => (await alice.threads.getState<{ user_id?: string }>(thread.thread_id)).values.user_id, {
        timeout: 30_000,
        interval: 300,
      })
      .toBe('alice');
    const state = await alice.threads.getState<{ display_name: string; permissions: string[] }>(thread.thread_id);
    expect(state.values).toMatchObject({ display_name: 'Alice A.', permissions: ['threads:write'] });
    await alice.crons.delete(cron.cron_id);
  });
});

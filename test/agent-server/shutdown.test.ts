// Graceful shutdown of a real process on the embedded store: SIGTERM lets running runs finish within the grace
// period; runs still going after it return to the queue and complete after a restart. Data survives restarts. Event
// streams still open at the end are cut (the process exits; their clients reconnect).
import { mkdtempSync, rmSync } from 'node:fs';
import http from 'node:http';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { Client } from '@langchain/langgraph-sdk';
import { afterAll, describe, expect, it } from 'vitest';
import { FIXTURE_CONFIG } from './helpers/harness.ts';
import { EXECUTOR_THREAD, startServerProcess, type ServerProc } from './helpers/process.ts';

// One data folder through all three tests: each starts from the server the test before restarted (it has nothing
// running), so a restart serves the next test too; 5 server starts instead of 7, ~1 s of CPU each.
describe('graceful shutdown (embedded store)', () => {
  const dirs: string[] = [];
  const procs: ServerProc[] = [];
  let dir: string;
  /** The server the previous test left running, with the shutdown grace the next test needs (0). */
  let next: Awaited<ReturnType<typeof start>>;
  afterAll(async () => {
    for (const p of procs) await p.kill9();
    for (const d of dirs) rmSync(d, { recursive: true, force: true });
  });

  async function start(dir: string, grace: string) {
    const p = await startServerProcess([
      ...EXECUTOR_THREAD,
      '--config',
      FIXTURE_CONFIG,
      '--data-dir',
      dir,
      '--shutdown-grace',
      grace,
    ]);
    procs.push(p);
    return { p, client: new Client({ apiUrl: p.url, callerOptions: { maxRetries: 0 } }) };
  }

  it('SIGTERM waits for a running run to finish; the result is there after a restart', async () => {
    dir = mkdtempSync(join(tmpdir(), 'ap-as-stop-'));
    dirs.push(dir);
    const a = await start(dir, '30');
    const t = await a.client.threads.create({ metadata: { keep: 'me' } });
    const r = await a.client.runs.create(t.thread_id, 'slow', { input: { delay_ms: 1_500, mark: 'a' } });
    await expect.poll(async () => (await a.client.runs.get(t.thread_id, r.run_id)).status).toBe('running');
    await a.p.stop();
    const b = await start(dir, '0');
    // A second process on the same folder would take b's running work for abandoned: it refuses to start.
    await expect(start(dir, '30')).rejects.toThrow(/data folder \S+ is in use by agentplane agent-server/);
    expect((await b.client.runs.get(t.thread_id, r.run_id)).status).toBe('success');
    expect((await b.client.threads.get(t.thread_id)).metadata).toMatchObject({ keep: 'me' });
    expect((await b.client.threads.getState<{ marks: string[] }>(t.thread_id)).values.marks).toEqual([
      'start:a',
      'done:a',
    ]);
    next = b;
  });

  it('a run still going when the grace period ends goes back to the queue and completes after restart', async () => {
    const a = next;
    const t = await a.client.threads.create();
    const r = await a.client.runs.create(t.thread_id, 'slow', { input: { delay_ms: 2_000, mark: 'b' } });
    await expect.poll(async () => (await a.client.runs.get(t.thread_id, r.run_id)).status).toBe('running');
    await a.p.stop();
    const b = await start(dir, '0');
    await b.client.runs.join(t.thread_id, r.run_id);
    expect((await b.client.runs.get(t.thread_id, r.run_id)).status).toBe('success');
    // The retry resumed from the run's own checkpoint: the first step is not repeated.
    expect((await b.client.threads.getState<{ marks: string[] }>(t.thread_id)).values.marks).toEqual([
      'start:b',
      'done:b',
    ]);
    expect((await b.client.threads.get(t.thread_id)).status).toBe('idle');
    next = b;
  });

  it('SIGTERM with clients following a thread stream and a run stream: the process exits and cuts both streams', async () => {
    const a = next;
    const t = await a.client.threads.create();
    const r = await a.client.runs.create(t.thread_id, 'slow', { input: { delay_ms: 30_000, mark: 'c' } });
    await expect.poll(async () => (await a.client.runs.get(t.thread_id, r.run_id)).status).toBe('running');
    // Followers that have read the first bytes; each resolves with whether its response ended cleanly.
    const follow = (path: string) =>
      new Promise<{ ended: Promise<boolean> }>((started, failed) => {
        http
          .get(new URL(path, a.p.url), (res) => {
            const ended = new Promise<boolean>((done) => {
              res.on('end', () => done(res.complete));
              res.on('close', () => done(res.complete));
              res.on('error', () => done(false));
            });
            res.once('data', () => started({ ended }));
          })
          .on('error', failed);
      });
    const threadStream = await follow(`/threads/${t.thread_id}/stream`);
    const runStream = await follow(`/threads/${t.thread_id}/runs/${r.run_id}/stream`);
    // A thread stream never ends by itself: without cutting it, stop() would wait forever.
    await a.p.stop();
    expect({ thread: await threadStream.ended, run: await runStream.ended }).toEqual({ thread: false, run: false });
    // The run went back to the queue and is not lost.
    const b = await start(dir, '0');
    expect(['pending', 'running']).toContain((await b.client.runs.get(t.thread_id, r.run_id)).status);
    await b.p.kill9();
  });
});

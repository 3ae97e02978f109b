// Thread stream modes (client.threads.joinStream(threadId, {streamMode})) through the real SDK against a real
// server process, on the embedded store and on Postgres: run_modes (the default: every run event plus each run's
// end), lifecycle (only run starts and ends), state_update (the thread's state after updateState and after each
// run), run streams without either thread-only event, one thread's stream never carrying another's events, and
// the refusal of a mode that does not exist. Both stores (each its own server) run at once, each one's tests in order.
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { Client } from '@langchain/langgraph-sdk';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createTestDatabase } from '../helpers/pg.ts';
import { EXECUTOR_THREAD, startServerProcess, type ServerProc } from '../helpers/process.ts';
import { readSse } from '../helpers/sse.ts';

const CONFIG = new URL('../../fixtures/streams/langgraph.json', import.meta.url).pathname;
type Ev = { event: string; data: any };
const chat = (text: string) => ({ text, messages: [{ role: 'user', content: 'hi' }] });

describe.concurrent.each(['embedded', 'postgres'] as const)(
  'thread stream modes (%s)',
  { timeout: 120_000 },
  (store) => {
    let server: ServerProc;
    let client: Client;
    const cleanups: Array<() => Promise<void>> = [];

    beforeAll(async () => {
      if (store === 'embedded') {
        const dir = mkdtempSync(join(tmpdir(), 'ap-thread-modes-'));
        cleanups.push(async () => rmSync(dir, { recursive: true, force: true }));
        server = await startServerProcess([...EXECUTOR_THREAD, '--config', CONFIG, '--data-dir', dir]);
      } else {
        const db = await createTestDatabase();
        cleanups.push(() => db.drop());
        server = await startServerProcess([...EXECUTOR_THREAD, '--config', CONFIG, '--database-url', db.url]);
      }
      client = new Client({ apiUrl: server.url, callerOptions: { maxRetries: 0 } });
    });
    afterAll(async () => {
      await server?.stop();
      for (const c of cleanups.reverse()) await c();
    });

    /** Follows the thread's stream with these modes until `enough` says so; `act` runs once it is connected. */
    async function follow(
      threadId: string,
      streamMode: string | string[] | undefined,
      act: () => Promise<void>,
      enough: (seen: Ev[]) => boolean,
      lastEventId?: string,
    ): Promise<Ev[]> {
      const abort = new AbortController();
      const seen: Ev[] = [];
      const reading = (async () => {
        for await (const e of client.threads.joinStream(threadId, {
          signal: abort.signal,
          ...(streamMode ? { streamMode: streamMode as never } : {}),
          ...(lastEventId ? { lastEventId } : {}),
        })) {
          // The SDK passes each event's id along: what is compared here is the event and its data.
          seen.push({ event: e.event, data: e.data });
          if (enough(seen)) abort.abort();
        }
      })().catch((err: unknown) => {
        if (!abort.signal.aborted) throw err;
      });
      // Whenever the request reaches the server, `act`'s events are in the log it reads from its cursor.
      await act();
      await reading;
      return seen;
    }

    const ended = (n: number) => (seen: Ev[]) =>
      seen.filter((e) => e.event === 'metadata' && e.data.status === 'run_done').length >= n;

    it.sequential(
      'lifecycle: only each run start ({run_id, attempt}) and end ({status: run_done, run_id}), in order',
      async () => {
        const t = await client.threads.create();
        const runIds: string[] = [];
        const seen = await follow(
          t.thread_id,
          'lifecycle',
          async () => {
            for (const text of ['one', 'two']) {
              const run = await client.runs.create(t.thread_id, 'chat', {
                input: chat(text),
                streamMode: ['values', 'messages-tuple'],
              });
              runIds.push(run.run_id);
              await client.runs.join(t.thread_id, run.run_id);
            }
          },
          ended(2),
        );
        expect(seen).toEqual([
          { event: 'metadata', data: { run_id: runIds[0], attempt: 1 } },
          { event: 'metadata', data: { status: 'run_done', run_id: runIds[0] } },
          { event: 'metadata', data: { run_id: runIds[1], attempt: 1 } },
          { event: 'metadata', data: { status: 'run_done', run_id: runIds[1] } },
        ]);
      },
    );

    it.sequential(
      'run_modes (the default): every event of the runs and their ends, no state updates; run streams carry neither',
      async () => {
        const t = await client.threads.create();
        let runId = '';
        const seen = await follow(
          t.thread_id,
          undefined,
          async () => {
            const run = await client.runs.create(t.thread_id, 'chat', {
              input: chat('abc'),
              streamMode: ['values', 'messages-tuple'],
            });
            runId = run.run_id;
            await client.runs.join(t.thread_id, runId);
            await client.threads.updateState(t.thread_id, { values: { text: 'changed' } });
          },
          ended(1),
        );
        const names = seen.map((e) => e.event);
        expect(names[0]).toBe('metadata');
        expect(seen.at(-1)).toEqual({ event: 'metadata', data: { status: 'run_done', run_id: runId } });
        expect(names).toContain('values');
        expect(
          seen
            .filter((e) => e.event === 'messages')
            .map((e) => e.data[0].content)
            .join(''),
        ).toBe('abc');
        expect(names).not.toContain('state_update');
        // The run's own stream: no run_done, no state_update.
        const joined: Ev[] = [];
        for await (const e of client.runs.joinStream(t.thread_id, runId)) joined.push({ event: e.event, data: e.data });
        expect(joined.filter((e) => e.event === 'metadata')).toEqual([
          { event: 'metadata', data: { run_id: runId, attempt: 1 } },
        ]);
        expect(joined.map((e) => e.event)).not.toContain('state_update');
      },
    );

    it.sequential(
      "state_update: the thread's state after updateState and after each run, and nothing else",
      async () => {
        const t = await client.threads.create();
        // A thread gets its graph with its first run; its events are passed over (Last-Event-ID: its end).
        const first = await client.runs.create(t.thread_id, 'chat', { input: chat('first') });
        await client.runs.join(t.thread_id, first.run_id);
        const path = `${server.url}/threads/${t.thread_id}/stream`;
        const mark = (
          await readSse(path, {
            until: (ev) =>
              ev.some(
                (e) => e.event === 'metadata' && e.id !== null && (e.data as { status?: string }).status === 'run_done',
              ),
          })
        ).events.at(-1)!.id!;
        const other = await client.threads.create();
        let runId = '';
        const seen = await follow(
          t.thread_id,
          'state_update',
          async () => {
            await client.threads.updateState(t.thread_id, { values: { text: 'edited by hand' } });
            const run = await client.runs.create(t.thread_id, 'chat', { input: chat('second') });
            runId = run.run_id;
            await client.runs.join(t.thread_id, runId);
            // Another thread's changes never show on this thread's stream.
            await client.threads.updateState(other.thread_id, { values: { text: 'foreign' } }).catch(() => undefined);
            const foreign = await client.runs.create(other.thread_id, 'chat', { input: chat('foreign') });
            await client.runs.join(other.thread_id, foreign.run_id);
          },
          (s) => s.length >= 2,
          String(mark),
        );
        expect(seen.map((e) => e.event)).toEqual(['state_update', 'state_update']);
        // Each is the thread's state as GET /threads/{id}/state gives it.
        expect(seen[0]!.data.values.text).toBe('edited by hand');
        expect(seen[0]!.data.checkpoint.thread_id).toBe(t.thread_id);
        const afterRun = seen[1]!.data;
        expect(afterRun.values.text).toBe('second');
        expect(afterRun.values.messages.at(-1).content).toBe('second');
        expect(afterRun).toEqual(await client.threads.getState(t.thread_id));
        // Read again from the same point, waiting 3 s for a third event: none (nothing of the other thread).
        const again = await readSse(`${path}?stream_mode=state_update`, {
          lastEventId: mark,
          until: (ev) => ev.length >= 3,
          signal: AbortSignal.timeout(3_000),
        });
        expect(again.events.map((e) => (e.data as { values: { text: string } }).values.text)).toEqual([
          'edited by hand',
          'second',
        ]);
      },
    );

    it.sequential(
      'modes combine (lifecycle + state_update), stream_modes is read too, and an unknown mode is a 422 naming the valid ones',
      async () => {
        const t = await client.threads.create();
        const run = await client.runs.create(t.thread_id, 'chat', { input: chat('xy') });
        await client.runs.join(t.thread_id, run.run_id);
        const both = await readSse(
          `${server.url}/threads/${t.thread_id}/stream?stream_modes=lifecycle&stream_modes=state_update`,
          { until: (ev) => ev.length >= 3 },
        );
        expect(both.events.map((e) => [e.event, (e.data as { status?: string }).status ?? null])).toEqual([
          ['metadata', null],
          ['metadata', 'run_done'],
          ['state_update', null],
        ]);
        // The state update after a run carries its end's id: a resume after it has seen both.
        expect(both.events[2]!.id).toBe(both.events[1]!.id);
        const bad = await fetch(`${server.url}/threads/${t.thread_id}/stream?stream_mode=everything`);
        expect(bad.status).toBe(422);
        const text = await bad.text();
        expect(text).toContain('lifecycle');
        expect(text).toContain('state_update');
      },
    );
  },
);

// Durable streams across replicas, on Postgres with real server processes: a client of one replica streams a run
// executing on the other; a kill -9 of the executing replica mid-run loses nothing for a client that resumes with
// Last-Event-ID on the survivor; 10 000+ events resume from an id above 5000; 200 concurrent streams of which 50
// never read keep the server's memory bounded, and a stalled client is dropped and can resume. All of it twice:
// stream events in Postgres (the default) and on Redis Streams (--redis-url), runs and threads in Postgres.
import http from 'node:http';
import { readFileSync } from 'node:fs';
import { Client } from '@langchain/langgraph-sdk';
import pg from 'pg';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { redisSkipReason, testRedisUrl } from '../../support/redis.ts';
import { createTestDatabase } from '../helpers/pg.ts';
import { EXECUTOR_THREAD, startServerProcess, type ServerProc } from '../helpers/process.ts';
import { readSse, type SseEvent } from '../helpers/sse.ts';

const CONFIG = new URL('../../fixtures/streams/langgraph.json', import.meta.url).pathname;
type Db = Awaited<ReturnType<typeof createTestDatabase>>;

/** The old-space limit of the replica measured by the memory test. */
const HEAP_CAP_MB = 128;

const alive = (p: ServerProc) => p.proc.exitCode === null && p.proc.signalCode === null;

/** Resident memory of a process in MB (0 once it has exited). */
const rssMb = (pid: number): number => {
  try {
    const m = /VmRSS:\s+(\d+) kB/.exec(readFileSync(`/proc/${pid}/status`, 'utf8'));
    return m ? Number(m[1]) / 1024 : 0;
  } catch {
    return 0;
  }
};

/** The text of the AI message streamed as messages-tuple events (one character per token). */
const tokens = (events: SseEvent[]) =>
  events
    .filter((e) => e.event === 'messages')
    .map((e) => (e.data as [{ content: string }])[0].content)
    .join('');

const redisUrl = await testRedisUrl();
if (!redisUrl) console.warn(`[streams-replicas] Redis transport skipped: ${redisSkipReason}`);
const transports = redisUrl ? (['postgres', 'redis'] as const) : (['postgres'] as const);

describe.each(transports)(
  'durable streams across replicas (stream events on %s)',
  { timeout: 240_000 },
  (transport) => {
    let db: Db;
    let sql: pg.Client;
    const procs: ServerProc[] = [];

    beforeAll(async () => {
      db = await createTestDatabase();
      sql = new pg.Client({ connectionString: db.url });
      await sql.connect();
    });
    afterAll(async () => {
      for (const p of procs) await p.kill9();
      await sql?.end();
      await db?.drop();
    });

    async function start(stallSecs = 15, env: Record<string, string> = {}): Promise<ServerProc> {
      const p = await startServerProcess(
        [
          ...EXECUTOR_THREAD,
          '--config',
          CONFIG,
          '--database-url',
          db.url,
          // Short, so a killed executor's run is taken over soon; not so short that a replica held up by a loaded
          // machine loses the lease of a run it is still executing (the run would execute twice: 6 s was lost once in
          // CI while a 60 MB burst was written at the start of a full run).
          '--lease-secs',
          '10',
          // Long enough that a reader slowed by a loaded test machine is not taken for a stalled one.
          '--stream-stall-timeout',
          String(stallSecs),
          ...(transport === 'redis' ? ['--redis-url', redisUrl!] : []),
        ],
        env,
      );
      procs.push(p);
      return p;
    }

    /** `n` live processes (starting what is missing). */
    async function live(n: number): Promise<ServerProc[]> {
      while (procs.filter(alive).length < n) await start();
      return procs.filter(alive).slice(0, n);
    }

    /** The process executing the run (its worker id starts with the pid), once it runs. */
    async function executorOf(runId: string, among: ServerProc[]): Promise<ServerProc> {
      let found: ServerProc | undefined;
      await expect
        .poll(
          async () => {
            const { rows } = await sql.query(
              `SELECT worker_id FROM agentplane.runs WHERE run_id = $1 AND status = 'running'`,
              [runId],
            );
            const worker = rows[0]?.worker_id as string | undefined;
            found = worker ? among.find((p) => worker.startsWith(`${p.proc.pid}-`)) : undefined;
            return !!found;
          },
          { timeout: 60_000, interval: 50 },
        )
        .toBe(true);
      return found!;
    }

    it('streams every token in order from the replica that is not executing the run', async () => {
      const [a, b] = (await live(2)) as [ServerProc, ServerProc];
      const client = new Client({ apiUrl: a.url, callerOptions: { maxRetries: 0 } });
      const text = 'The quick brown fox jumps over the lazy dog, twice over again!';
      const t = await client.threads.create();
      const run = await client.runs.create(t.thread_id, 'chat', {
        input: { text, sleep_ms: 30, messages: [{ role: 'user', content: 'go' }] },
        streamMode: ['messages-tuple', 'values'],
      });
      const executor = await executorOf(run.run_id, [a, b]);
      const other = executor === a ? b : a;
      const viaOther = new Client({ apiUrl: other.url, callerOptions: { maxRetries: 0 } });
      const events: Array<{ event: string; data: unknown }> = [];
      let statusAtFirstToken: string | undefined;
      for await (const e of viaOther.runs.joinStream(t.thread_id, run.run_id)) {
        if (e.event === 'messages' && statusAtFirstToken === undefined) {
          statusAtFirstToken = (await viaOther.runs.get(t.thread_id, run.run_id)).status;
        }
        events.push(e);
      }
      expect(events[0]).toMatchObject({ event: 'metadata', data: { run_id: run.run_id, attempt: 1 } });
      expect(tokens(events as SseEvent[])).toBe(text);
      // Relayed live, not after the fact: the first token came while the run was still executing elsewhere.
      expect(statusAtFirstToken).toBe('running');
      const last = events.filter((e) => e.event === 'values').at(-1)!.data as { messages: Array<{ content: string }> };
      expect(last.messages.at(-1)!.content).toBe(text);
      // The events went through the transport under test (the Postgres table stays empty with Redis).
      for (const p of [a, b]) expect(p.output()).toContain(`"stream_events":"${transport}"`);
      const { rows } = await sql.query('SELECT count(*)::int AS n FROM agentplane.stream_events WHERE run_id = $1', [
        run.run_id,
      ]);
      expect(rows[0].n > 0).toBe(transport === 'postgres');
    });

    it('10 000+ events in one run: ids keep growing and a resume from an id above 5000 loses nothing, on either replica', async () => {
      const both = await live(2);
      const client = new Client({ apiUrl: both[0]!.url, callerOptions: { maxRetries: 0 } });
      const t = await client.threads.create();
      const count = 10_500;
      const run = await client.runs.create(t.thread_id, 'burst', { input: { count, size: 8 }, streamMode: ['custom'] });
      await client.runs.join(t.thread_id, run.run_id);
      const path = `/threads/${t.thread_id}/runs/${run.run_id}/stream`;
      for (const p of both) {
        const full = await readSse(p.url + path);
        const custom = full.events.filter((e) => e.event === 'custom');
        expect(custom.map((e) => (e.data as { i: number }).i)).toEqual([...Array(count).keys()]);
        const ids = full.events.map((e) => e.id!);
        expect(new Set(ids).size).toBe(ids.length);
        expect(ids.every((id, i) => i === 0 || id > ids[i - 1]!)).toBe(true);
        const k = 6_000;
        expect(full.events[k]!.id!).toBeGreaterThan(5000);
        const resumed = await readSse(p.url + path, { lastEventId: full.events[k]!.id! });
        expect(resumed.events).toEqual(full.events.slice(k + 1));
      }
    });

    it("200 concurrent streams, 50 of them never reading: the serving replica's memory stays bounded", async ({
      onTestFinished,
    }) => {
      const both = await live(2);
      const client = new Client({ apiUrl: both[0]!.url, callerOptions: { maxRetries: 0 } });
      const size = 1_000;
      // The 50 clients that never read follow a run of 24 MB each: the kernel takes ~4 MB of a connection's unread
      // bytes (socket buffers on both ends), so a server that went on writing to them would hold ~1 GB.
      const big = { count: 24_000, thread: await client.threads.create() };
      const bigRun = await client.runs.create(big.thread.thread_id, 'burst', {
        input: { count: big.count, size },
        streamMode: ['custom'],
      });
      // The 150 readers take a 2 MB run that is still being written while they read (300 MB in all: more than the
      // bound below, were the server to keep what it sends them; more would only cost CPU). Its pauses keep it
      // being written for ~2.4 s, while the readers connect.
      const count = 2_000;
      const t = await client.threads.create();
      const run = await client.runs.create(t.thread_id, 'burst', {
        input: { count, size, pause_ms: 120 },
        streamMode: ['custom'],
      });
      // Measured: a replica that only serves the streams, started once both runs were taken by the other two. Its
      // JavaScript heap is capped as a memory-limited pod's would be: unread events kept in the process would not fit
      // and would end it; RSS covers what lies outside the heap. The cap also keeps the figure from counting garbage
      // a loaded machine has not collected yet.
      await executorOf(run.run_id, both);
      await expect
        .poll(
          async () =>
            (await sql.query(`SELECT status FROM agentplane.runs WHERE run_id = $1`, [bigRun.run_id])).rows[0]?.status,
          { timeout: 60_000, interval: 50 },
        )
        .not.toBe('pending');
      const server = await start(15, { NODE_OPTIONS: `--max-old-space-size=${HEAP_CAP_MB}` });
      onTestFinished(() => server.kill9());
      const streamUrl = (threadId: string, runId: string) =>
        new URL(`/threads/${threadId}/runs/${runId}/stream`, server.url);
      const url = streamUrl(t.thread_id, run.run_id);
      const baseline = rssMb(server.proc.pid!);
      let peak = baseline;
      const sampler = setInterval(() => (peak = Math.max(peak, rssMb(server.proc.pid!))), 100);

      // Stalled clients: headers read, then never another byte.
      const stalled = await Promise.all(
        Array.from(
          { length: 50 },
          () =>
            new Promise<http.IncomingMessage>((resolve, reject) => {
              http
                .get(streamUrl(big.thread.thread_id, bigRun.run_id), (res) => {
                  res.pause();
                  // Cut off by the stall timeout, or by the server's end: the readers below tell which.
                  res.on('error', () => undefined);
                  resolve(res);
                })
                .on('error', reject);
            }),
        ),
      );
      // Readers take everything; each must end with the run's last event.
      const readers = Array.from(
        { length: 150 },
        () =>
          new Promise<string>((resolve, reject) => {
            http
              .get(url, (res) => {
                let tail = '';
                res.setEncoding('utf8');
                res.on('data', (d: string) => (tail = (tail + d).slice(-4_000)));
                res.on('end', () => resolve(tail));
                res.on('error', reject);
              })
              .on('error', reject);
          }),
      );
      const tails = await Promise.all(readers).catch((err: Error) => {
        clearInterval(sampler);
        throw new Error(
          `a reader failed (${err.message}); the server ${alive(server) ? 'is up' : 'has exited'}:\n` +
            server.output().slice(-1_500),
        );
      });
      // The big run is written whole by now: whatever the server would buffer for the stalled clients, it has.
      await client.runs.join(big.thread.thread_id, bigRun.run_id);
      await new Promise((r) => setTimeout(r, 1_000));
      clearInterval(sampler);
      expect(alive(server), server.output().slice(-2_000)).toBe(true);
      for (const r of stalled) r.destroy();
      for (const tail of tails) expect(tail).toMatch(new RegExp(`"i":${count - 1},`));
      const growth = peak - baseline;
      console.log(
        `[streams] 150 readers of ${count} events and 50 stalled clients of ${big.count} events, x ${size} B, ` +
          `heap capped at ${HEAP_CAP_MB} MB: server RSS ${baseline.toFixed(0)} MB -> peak ${peak.toFixed(0)} MB ` +
          `(+${growth.toFixed(0)} MB)`,
      );
      // The stalled clients' unread 50 x 20 MB would be ~1 GB.
      expect(growth).toBeLessThan(200);
    });

    it('a client that stops reading is disconnected after the stall timeout and resumes with Last-Event-ID', async ({
      onTestFinished,
    }) => {
      // A replica of its own with a short stall timeout (its one reader of the resume reads without pause), so the
      // test does not sit out the 15 s the other replicas give their many readers; gone after the test.
      const server = await start(4);
      onTestFinished(() => server.kill9());
      const client = new Client({ apiUrl: server.url, callerOptions: { maxRetries: 0 } });
      const t = await client.threads.create();
      // More than the socket buffers on both ends can hold, so the server has to wait for the client.
      const count = 15_000;
      const run = await client.runs.create(t.thread_id, 'burst', {
        input: { count, size: 2_000 },
        streamMode: ['custom'],
      });
      const url = new URL(`/threads/${t.thread_id}/runs/${run.run_id}/stream`, server.url);
      const drops = () => server.output().split('stream client stopped reading').length;
      const before = drops();
      const res = await new Promise<http.IncomingMessage>((resolve, reject) => {
        http
          .get(url, (r) => {
            r.pause();
            resolve(r);
          })
          .on('error', reject);
      });
      await expect.poll(drops, { timeout: 120_000, interval: 200 }).toBeGreaterThan(before);
      const got = await new Promise<string>((resolve) => {
        const parts: string[] = [];
        res.setEncoding('utf8');
        res.on('data', (d: string) => parts.push(d));
        res.on('close', () => resolve(parts.join('')));
        res.resume();
      });
      // Only whole events count: the connection may have been cut inside one.
      const whole = got.slice(0, got.lastIndexOf('\n\n') + 2);
      const ids = [...whole.matchAll(/^id: (\d+)$/gm)].map((m) => Number(m[1]));
      const seen = [...whole.matchAll(/"i":(\d+),/g)].map((m) => Number(m[1]));
      expect(seen.length).toBeLessThan(count);
      const rest = await readSse(url.toString(), { lastEventId: ids.at(-1)! });
      const after = rest.events.filter((e) => e.event === 'custom').map((e) => (e.data as { i: number }).i);
      // On a mismatch, say whether the run was executed twice (its lease went to another replica).
      const leases = procs.flatMap((p) => p.output().match(/.*(lease lost|requeued or ended runs).*/g) ?? []);
      expect(seen.length + after.length, leases.join('\n')).toBe(count);
      expect([...seen, ...after].every((v, i) => v === i)).toBe(true);
    });

    // Last: it kills one of the two replicas the tests above share, so no replacement has to be started.
    it('kill -9 of the executing replica: a Last-Event-ID resume on the survivor replays without gaps or duplicates, then the retried attempt', async () => {
      const both = await live(2);
      const client = new Client({ apiUrl: both[0]!.url, callerOptions: { maxRetries: 0 } });
      const text = 'abcdefghijklmnopqrstuvwxyz0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZ-abcdefghijklmnopqrstuvwxyz';
      const t = await client.threads.create();
      const run = await client.runs.create(t.thread_id, 'chat', {
        input: { text, sleep_ms: 40, messages: [{ role: 'user', content: 'go' }] },
        streamMode: ['messages-tuple'],
      });
      const executor = await executorOf(run.run_id, both);
      const survivor = both.find((p) => p !== executor)!;
      const path = `/threads/${t.thread_id}/runs/${run.run_id}/stream`;
      const first = await readSse(survivor.url + path, {
        until: (ev) => ev.filter((e) => e.event === 'messages').length >= 15,
      });
      await executor.kill9();
      const lastSeen = first.events.at(-1)!.id!;
      const rest = await readSse(survivor.url + path, { lastEventId: lastSeen });
      expect(rest.status).toBe(200);
      const full = await readSse(survivor.url + path);

      const ids = full.events.map((e) => e.id!);
      expect(ids.every((id, i) => i === 0 || id > ids[i - 1]!)).toBe(true);
      // What the client saw before the kill plus the resume is exactly the whole log: no gap, no duplicate.
      expect([...first.events, ...rest.events].map((e) => e.id)).toEqual(ids);
      expect([...first.events, ...rest.events]).toEqual(full.events);
      // Attempt 1 streamed a prefix of the text; the retried attempt streams all of it after its own metadata.
      const attempts = full.events.map((e, i) => [e, i] as const).filter(([e]) => e.event === 'metadata');
      expect(attempts.map(([e]) => (e.data as { attempt: number }).attempt)).toEqual([1, 2]);
      const second = attempts[1]![1];
      const before = tokens(full.events.slice(0, second));
      expect(before.length).toBeGreaterThanOrEqual(15);
      expect(text.startsWith(before)).toBe(true);
      expect(tokens(full.events.slice(second))).toBe(text);
      // Asked of the survivor: `client` may point at the replica that was killed.
      const onSurvivor = new Client({ apiUrl: survivor.url, callerOptions: { maxRetries: 0 } });
      expect((await onSurvivor.runs.get(t.thread_id, run.run_id)).status).toBe('success');
    });
  },
);

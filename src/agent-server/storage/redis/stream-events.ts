// Stream events on Redis Streams (--redis-url / REDIS_URI), for either store: one Redis stream per run (XADD with
// the log's own ids, trimmed at MAXLEN, expiring `retention` after its newest event), a set of run ids per thread
// (readThread merges their streams by id) and one counter for the ids. The executing process writes the events
// queued in the last few milliseconds with one script call (one in flight at a time, so ids become visible in
// order); the same call appends the touched runs to a small wake-up stream that every process follows with XREAD BLOCK from
// the last entry it saw, so a reconnect misses no wake-up. Readers of one run at one cursor share a read.
import { duplicateRedis, newRedis, warnEvery } from '../../../lib/connections.ts';
import type { Logger } from '../../../lib/logger.ts';
import { BatchWriter } from '../batch-writer.ts';
import { recentEvents } from './recent-events.ts';
import type { StoredStreamEvent, StreamEventStore } from '../types.ts';

export interface RedisStreamOptions {
  url: string;
  retentionMs: number;
  /** Key prefix (one per deployment sharing a Redis); default "agentplane:". */
  prefix?: string;
  /** Events kept per run (older ones are trimmed); default 100 000. */
  maxLenPerRun?: number;
  logger?: Logger;
}

const DEFAULT_MAXLEN = 100_000;
/** Entries kept in the wake-up stream: a process further behind than this wakes every reader. */
const WAKE_MAXLEN = 10_000;
const BLOCK_MS = 5_000;
/** Script calls start at least this far apart (see BatchWriter). */
const CALL_SPACING_MS = 5;
/** An event's id in its Redis stream: the log id as the milliseconds part. */
const rid = (id: number) => `${id}-0`;

// KEYS: counter, wake stream, then per run its stream and its thread's set.
// ARGV: retention ms, maxlen, wake maxlen, origin, run count R, then R × (run id, thread id), then
// per event (run index 1..R, event, data). Returns the last id given.
const APPEND_SCRIPT = `
local retention, maxlen, wakeMax, origin, r = ARGV[1], ARGV[2], ARGV[3], ARGV[4], tonumber(ARGV[5])
local first = 6 + 2 * r
local n = (#ARGV - first + 1) / 3
local last = redis.call('INCRBY', KEYS[1], n)
local id = last - n
for i = 0, n - 1 do
  local run = tonumber(ARGV[first + 3 * i])
  id = id + 1
  redis.call('XADD', KEYS[1 + 2 * run], 'MAXLEN', '~', maxlen, id .. '-0', 'e', ARGV[first + 3 * i + 1], 'd', ARGV[first + 3 * i + 2])
end
local touched = {}
for k = 1, r do
  redis.call('PEXPIRE', KEYS[1 + 2 * k], retention)
  redis.call('SADD', KEYS[2 + 2 * k], ARGV[4 + 2 * k])
  redis.call('PEXPIRE', KEYS[2 + 2 * k], retention)
  touched[k] = ARGV[4 + 2 * k] .. ':' .. ARGV[5 + 2 * k]
end
redis.call('XADD', KEYS[2], 'MAXLEN', '~', wakeMax, '*', 'o', origin, 'r', table.concat(touched, ','))
return last
`;

type Pending = [runId: string, threadId: string, event: string, data: string];
type RawEntry = [id: string, fields: string[]];

export async function redisStreamEvents(
  opts: RedisStreamOptions,
): Promise<StreamEventStore & { close(): Promise<void> }> {
  const p = opts.prefix ?? 'agentplane:';
  const k = {
    counter: `${p}stream:seq`,
    wake: `${p}stream:wake`,
    run: (runId: string) => `${p}stream:run:${runId}`,
    thread: (threadId: string) => `${p}stream:thread:${threadId}`,
  };
  const maxLen = opts.maxLenPerRun ?? DEFAULT_MAXLEN;
  const origin = Math.random().toString(36).slice(2, 10);
  // Commands wait while Redis is unreachable (reconnecting with backoff) and fail after a few tries.
  let connError: Error | null = null;
  const warn = warnEvery(opts.logger, 'redis connection error; commands wait for it to return');
  const redis = newRedis(opts.url, { lazyConnect: true, maxRetriesPerRequest: 3 }, (err) => {
    connError = err;
    warn(err);
  });
  // EVALSHA with the script's hash (sent once per connection).
  redis.defineCommand('apAppendStreamEvents', { lua: APPEND_SCRIPT });
  const appendScript = (
    redis as unknown as { apAppendStreamEvents(...args: Array<string | number>): Promise<number> }
  ).apAppendStreamEvents.bind(redis);
  // The wake-up follower blocks its own connection.
  const blocking = duplicateRedis(redis);
  try {
    await redis.connect();
    await blocking.connect();
  } catch (err) {
    // No reconnecting in the background for a store that never opened.
    redis.disconnect();
    blocking.disconnect();
    // ioredis rejects with "Connection is closed"; the reason is in the error event before it.
    const reason = (connError as Error | null)?.message ?? (err as Error).message;
    throw new Error(`cannot connect to Redis: ${reason}`, { cause: err });
  }

  const watchers = new Map<string, Set<() => void>>();
  const wake = (key: string) => {
    for (const fn of watchers.get(key) ?? []) fn();
  };
  const wakeAll = () => {
    for (const set of watchers.values()) for (const fn of set) fn();
  };

  // --- writing: see BatchWriter (one script call per batch, one in flight) ---
  const writer = new BatchWriter<Pending>({
    spacingMs: CALL_SPACING_MS,
    // A burst goes out in bounded script calls, not one that holds up the process (and Redis) at once.
    maxBatch: 1_000,
    write: (batch) => writeBatch(batch),
    onLost: (err, events) => opts.logger?.error({ err, events }, 'writing stream events failed; those events are lost'),
  });

  async function writeBatch(batch: Pending[]): Promise<void> {
    const runIndex = new Map<string, number>();
    const keys = [k.counter, k.wake];
    const runArgs: string[] = [];
    const eventArgs: Array<string | number> = [];
    for (const [runId, threadId, event, data] of batch) {
      let i = runIndex.get(runId);
      if (i === undefined) {
        runIndex.set(runId, (i = runIndex.size + 1));
        keys.push(k.run(runId), k.thread(threadId));
        runArgs.push(runId, threadId);
      }
      eventArgs.push(i, event, data);
    }
    const args = [opts.retentionMs, maxLen, WAKE_MAXLEN, origin, runIndex.size, ...runArgs, ...eventArgs];
    await appendScript(keys.length, ...keys, ...args);
    const woken = new Set<string>();
    for (const [runId, threadId] of batch) {
      woken.add(runId);
      woken.add(`t:${threadId}`);
    }
    for (const key of woken) wake(key);
  }

  // --- reading ---
  const toEvents = (runId: string, entries: RawEntry[]): StoredStreamEvent[] =>
    entries.map(([id, fields]) => {
      let event = '';
      let data = '';
      for (let i = 0; i < fields.length; i += 2) {
        if (fields[i] === 'e') event = fields[i + 1]!;
        else if (fields[i] === 'd') data = fields[i + 1]!;
      }
      return { id: Number(id.slice(0, id.indexOf('-'))), run_id: runId, event, data };
    });
  const range = async (runId: string, afterId: number, limit: number) =>
    toEvents(
      runId,
      (await redis.xrange(k.run(runId), rid(Math.max(afterId, 0) + 1), '+', 'COUNT', limit)) as RawEntry[],
    );

  const recent = recentEvents(range);

  // --- following the wake-up stream ---
  let closed = false;
  let lastWake = '$';
  const follow = async (): Promise<void> => {
    // The newest entry now: wake-ups after it are followed (earlier writes are read from the streams anyway).
    const newest = (await redis.xrevrange(k.wake, '+', '-', 'COUNT', 1)) as RawEntry[];
    lastWake = newest[0]?.[0] ?? '0-0';
    let failing = false;
    while (!closed) {
      let res: Array<[string, RawEntry[]]> | null;
      try {
        res = (await blocking.xread('COUNT', 1_000, 'BLOCK', BLOCK_MS, 'STREAMS', k.wake, lastWake)) as Array<
          [string, RawEntry[]]
        > | null;
        if (failing) {
          failing = false;
          // Wake-ups may have been trimmed while we were away: every reader looks again.
          wakeAll();
        }
      } catch (err) {
        if (closed) return;
        if (!failing)
          opts.logger?.warn(
            { err: { message: (err as Error).message } },
            'following stream wake-ups from redis failed; retrying',
          );
        failing = true;
        await new Promise((r) => setTimeout(r, 500));
        continue;
      }
      const entries = res?.[0]?.[1] ?? [];
      if (entries.length >= 1_000) wakeAll();
      for (const [id, fields] of entries) {
        lastWake = id;
        let from = '';
        let runs = '';
        for (let i = 0; i < fields.length; i += 2) {
          if (fields[i] === 'o') from = fields[i + 1]!;
          else if (fields[i] === 'r') runs = fields[i + 1]!;
        }
        if (from === origin) continue;
        for (const pair of runs.split(',')) {
          const bar = pair.indexOf(':');
          wake(pair.slice(0, bar));
          wake(`t:${pair.slice(bar + 1)}`);
        }
      }
    }
  };
  const following = follow().catch((err: unknown) => {
    if (!closed) opts.logger?.error({ err }, 'stream wake-up follower stopped');
  });

  const store: StreamEventStore & { close(): Promise<void> } = {
    append(runId, threadId, event, data) {
      writer.push([runId, threadId, event, data]);
    },
    flush: () => writer.flush(),
    read: (runId, afterId, limit) => recent.read(runId, afterId, limit),
    async readThread(threadId, afterId, limit) {
      const runs = await redis.smembers(k.thread(threadId));
      const pages = await Promise.all(runs.map((r) => range(r, afterId, limit)));
      return pages
        .flat()
        .sort((a, b) => a.id - b.id)
        .slice(0, limit);
    },
    async lastId() {
      return Number((await redis.get(k.counter)) ?? 0);
    },
    watch(key, fn) {
      const w = 'run_id' in key ? key.run_id : `t:${key.thread_id}`;
      let set = watchers.get(w);
      if (!set) watchers.set(w, (set = new Set()));
      set.add(fn);
      return () => {
        set.delete(fn);
        if (!set.size) watchers.delete(w);
      };
    },
    async sweep() {
      // Redis expires a run's stream `retention` after its newest event (PEXPIRE on every write).
      return 0;
    },
    async close() {
      if (closed) return;
      await store.flush().catch(() => undefined);
      closed = true;
      recent.close();
      blocking.disconnect();
      // The follower ends once its XREAD fails, which disconnect() makes happen at once while connected. A command
      // that was queued while the connection was re-establishing after an outage is never settled by disconnect()
      // (ioredis keeps it): wait one BLOCK period at most, so a shutdown after a Redis restart does not hang.
      let bounded: NodeJS.Timeout | undefined;
      await Promise.race([following, new Promise((r) => (bounded = setTimeout(r, BLOCK_MS + 1_000)))]);
      clearTimeout(bounded);
      await redis.quit().catch(() => redis.disconnect());
    },
  };
  return store;
}

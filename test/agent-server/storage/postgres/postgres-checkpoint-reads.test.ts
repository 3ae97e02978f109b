// Checkpoint reads on Postgres ask for blobs as JSON with base64 (FewerTripsPostgresSaver) instead of the package's
// bytea arrays. What getTuple() and list() give must be exactly what the package's own PostgresSaver gives for the
// same rows: every kind of value (bytes, text that needs escaping, empty channels, pending writes of several tasks).
import { HumanMessage, AIMessage } from '@langchain/core/messages';
import { emptyCheckpoint, type Checkpoint, type CheckpointMetadata } from '@langchain/langgraph-checkpoint';
import { PostgresSaver } from '@langchain/langgraph-checkpoint-postgres';
import pg from 'pg';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { LeanCheckpointSerializer } from '../../../../src/agent-server/shims/checkpoint-serde.ts';
import { jsonBlobRead } from '../../../../src/agent-server/storage/postgres/checkpoint-reads.ts';
import { FewerTripsPostgresSaver } from '../../../../src/agent-server/storage/postgres/checkpointer.ts';
import { createTestDatabase, type TestDatabase } from '../../../support/postgres.ts';

let db: TestDatabase;
let pool: pg.Pool;
let ours: FewerTripsPostgresSaver;
let theirs: PostgresSaver;
const schema = 'cpreads';

beforeAll(async () => {
  db = await createTestDatabase();
  pool = new pg.Pool({ connectionString: db.url, max: 4 });
  theirs = new PostgresSaver(pool, new LeanCheckpointSerializer(), { schema });
  await theirs.setup();
  ours = new FewerTripsPostgresSaver(pool, new LeanCheckpointSerializer(), { schema });
});

afterAll(async () => {
  await pool?.end();
  await db?.drop();
});

/** Every statement the pool is sent while `fn` runs. */
async function statements(fn: () => Promise<unknown>): Promise<string[]> {
  const seen: string[] = [];
  const query = pool.query.bind(pool) as (...a: unknown[]) => unknown;
  (pool as unknown as { query: unknown }).query = (...a: unknown[]) => {
    const q = a[0] as string | { text: string };
    seen.push(typeof q === 'string' ? q : q.text);
    return query(...a);
  };
  try {
    await fn();
  } finally {
    (pool as unknown as { query: unknown }).query = query;
  }
  return seen;
}

function checkpoint(id: string, values: Record<string, unknown>, versions: Record<string, number>): Checkpoint {
  return { ...emptyCheckpoint(), id, channel_values: values, channel_versions: versions };
}

/** Metadata as LangGraph writes it, with the extra keys (such as `writes`) it stores beside the typed ones. */
function meta(source: 'input' | 'loop', step: number, extra: Record<string, unknown> = {}): CheckpointMetadata {
  return { source, step, parents: {}, ...extra } as CheckpointMetadata;
}

describe('Postgres checkpoint reads through JSON', () => {
  it("rewrites the package's read, and only that", () => {
    const select = (theirs as unknown as { SQL_STATEMENTS: { SELECT_SQL: string } }).SQL_STATEMENTS.SELECT_SQL;
    const rewritten = jsonBlobRead(`${select}WHERE thread_id = $1`);
    // If a package version words its read differently, this fails: the read still works (sent unchanged), but
    // the cheaper format is lost and should be brought back.
    expect(rewritten).toBeDefined();
    expect(rewritten).not.toContain('::bytea');
    expect(rewritten).toContain("encode(bl.blob, 'base64')");
    expect(jsonBlobRead('SELECT 1')).toBeUndefined();
  });

  it('reads back what the package reads, for every kind of value', async () => {
    const thread = 't-1';
    const bytes = new Uint8Array([0, 1, 2, 92, 34, 255, 254, 10, 13]);
    const text = 'back\\slash "quotes" \u0000 nul, ünïcødé ✓, \ud83d\ude00, {"json":[1]}, \\x41';
    const long = 'x'.repeat(100_000);
    const values = {
      messages: [new HumanMessage({ content: text, id: 'h1' }), new AIMessage({ content: long, id: 'a1' })],
      raw: bytes,
      nested: { a: [1, 2.5, null, true, { b: text }], when: '2026-11-27T00:00:00Z' },
      'channel "name" ✓': 'value',
    };
    // `gone` has a version but no value: stored as an "empty" blob.
    const versions = { messages: 1, raw: 1, nested: 1, 'channel "name" ✓': 1, gone: 1 };
    const cfg = { configurable: { thread_id: thread, checkpoint_ns: '' } };
    const first = await ours.put(cfg, checkpoint('1ef0-0001', values, versions), meta('input', -1), versions);
    const next = { ...versions, messages: 2 };
    const second = await ours.put(
      first,
      checkpoint('1ef0-0002', { ...values, messages: [...values.messages, new AIMessage('more')] }, next),
      meta('loop', 0, { writes: { agent: { note: 'ünïcødé "q" \\ ✓' } } }),
      { messages: 2 },
    );
    await ours.putWrites(
      second,
      [
        ['messages', [new AIMessage({ content: text, id: 'w1' })]],
        ['raw', bytes],
      ],
      'task-b',
    );
    await ours.putWrites(second, [['__error__', { message: text }]], 'task-a');
    await ours.putWrites(second, [['nested', { deep: { deeper: [text] } }]], 'task-c');

    for (const config of [second, first, { configurable: { thread_id: thread, checkpoint_ns: '' } }]) {
      const sent = await statements(async () => {
        const mine = await ours.getTuple(config);
        const package_ = await theirs.getTuple(config);
        expect(mine).toBeDefined();
        expect(mine).toEqual(package_);
      });
      // Ours went out as the JSON read, the package's as its own.
      expect(sent.filter((s) => s.includes('json_agg(json_build_array(bl.channel'))).toHaveLength(1);
      expect(sent.filter((s) => s.includes('array_agg(array[bl.channel::bytea'))).toHaveLength(1);
    }
    const tuple = await ours.getTuple(second);
    expect(Buffer.from(tuple!.checkpoint.channel_values.raw as Uint8Array)).toEqual(Buffer.from(bytes));
    expect(tuple!.checkpoint.channel_values).not.toHaveProperty('gone');
    expect(tuple!.pendingWrites!.map(([task, channel]) => `${task}/${channel}`)).toEqual([
      'task-a/__error__',
      'task-b/messages',
      'task-b/raw',
      'task-c/nested',
    ]);

    const list = async (saver: PostgresSaver, options?: { limit?: number; filter?: Record<string, unknown> }) => {
      const out = [];
      for await (const t of saver.list({ configurable: { thread_id: thread } }, options)) out.push(t);
      return out;
    };
    const all = await list(ours);
    expect(all).toHaveLength(2);
    expect(all).toEqual(await list(theirs));
    expect(await list(ours, { limit: 1, filter: { source: 'loop' } })).toEqual(
      await list(theirs, { limit: 1, filter: { source: 'loop' } }),
    );
  });

  it('reads a channel whose name has a backslash (the package cannot: its text-to-bytea cast reads escapes)', async () => {
    const cfg = { configurable: { thread_id: 't-backslash', checkpoint_ns: '' } };
    const versions = { 'a\\b': 1 };
    const saved = await ours.put(cfg, checkpoint('1ef0-0005', { 'a\\b': 'v' }, versions), meta('input', -1), versions);
    await ours.putWrites(saved, [['c\\d', 1]], 'task');
    const mine = await ours.getTuple(saved);
    expect(mine!.checkpoint.channel_values).toEqual({ 'a\\b': 'v' });
    expect(mine!.pendingWrites).toEqual([['task', 'c\\d', 1]]);
    await expect(theirs.getTuple(saved)).rejects.toThrow(/bytea/);
  });

  it('reads a thread without checkpoints, and a checkpoint without writes or values', async () => {
    expect(await ours.getTuple({ configurable: { thread_id: 'none', checkpoint_ns: '' } })).toBeUndefined();
    const cfg = { configurable: { thread_id: 't-empty', checkpoint_ns: '' } };
    const saved = await ours.put(cfg, checkpoint('1ef0-0009', {}, {}), meta('input', -1), {});
    const mine = await ours.getTuple(saved);
    expect(mine).toEqual(await theirs.getTuple(saved));
    expect(mine!.checkpoint.channel_values).toEqual({});
    expect(mine!.pendingWrites).toEqual([]);
  });
});

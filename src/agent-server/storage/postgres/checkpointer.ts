// PostgresSaver with fewer round trips. The package's put() runs BEGIN, one INSERT per changed channel blob,
// the checkpoint INSERT and COMMIT (≈5 round trips); putWrites() runs BEGIN, one INSERT per write and COMMIT.
// Here each is ONE statement (atomic on its own, so no transaction block): put() inserts the blobs in a
// data-modifying CTE next to the checkpoint upsert, putWrites() inserts all writes of the task from arrays.
// Schema, migrations, serialization and every read stay the package's; the conflict rules are the same:
// blobs DO NOTHING, checkpoints upsert checkpoint + metadata, writes upsert when every channel is a special one
// (WRITES_IDX_MAP: error, scheduled, interrupt, resume) and DO NOTHING otherwise.
// Statements are named (prepared once per connection), so Postgres parses and plans them once; the package's
// two getTuple reads are sent named too (same text, through a pool wrapper that only adds the name).
import type { RunnableConfig } from '@langchain/core/runnables';
import {
  WRITES_IDX_MAP,
  type ChannelVersions,
  type Checkpoint,
  type CheckpointMetadata,
  type CheckpointTuple,
  type PendingWrite,
  type SerializerProtocol,
} from '@langchain/langgraph-checkpoint';
import { PostgresSaver } from '@langchain/langgraph-checkpoint-postgres';
import type pg from 'pg';
import { retryWhileUnreachable } from '../../../lib/connection-errors.ts';
import { ReadAheadTuples } from '../read-ahead.ts';
import { EncryptingSerializer } from '../data-cipher.ts';
import { byteaArray, jsonbArray } from './binary-array.ts';
import { NO_CHECKPOINT_KEY } from '../types.ts';

/** How long a checkpoint write waits for an unreachable database before the run fails with the error. */
const OUTAGE_WAIT_MS = 60_000;

export class FewerTripsPostgresSaver extends PostgresSaver {
  private readonly db: pg.Pool;
  private readonly sql: { put: string; upsertWrites: string; insertWrites: string; batch: string };
  private readonly names: { put: string; upsertWrites: string; insertWrites: string; batch: string };

  constructor(pool: pg.Pool, serde: SerializerProtocol | undefined, options: { schema: string }) {
    const prepared = new Map<string, string>();
    super(namingPool(pool, prepared), serde, options);
    this.db = pool;
    // The exact texts getTuple() sends (package internals: if they change, they are simply sent unnamed).
    const select = (this as unknown as { SQL_STATEMENTS?: { SELECT_SQL?: string } }).SQL_STATEMENTS?.SELECT_SQL;
    this.selectSql = typeof select === 'string' ? select : undefined;
    this.aheadAsJson = this.selectSql !== undefined && jsonBlobRead(this.selectSql) !== undefined;
    if (typeof select === 'string') {
      prepared.set(
        `${select}WHERE thread_id = $1 AND checkpoint_ns = $2 AND checkpoint_id = $3`,
        `ap_cp_get_${options.schema}`,
      );
      prepared.set(
        `${select}WHERE thread_id = $1 AND checkpoint_ns = $2 ORDER BY checkpoint_id DESC LIMIT 1`,
        `ap_cp_latest_${options.schema}`,
      );
      // list(config with thread and namespace, {limit: 2}): readAhead's.
      prepared.set(
        `${select}WHERE thread_id = $1 AND checkpoint_ns = $2 ORDER BY checkpoint_id DESC LIMIT 2`,
        `ap_cp_latest2_${options.schema}`,
      );
    }
    const t = (name: string) => `"${options.schema}".${name}`;
    const writes = (conflict: string) => `INSERT INTO ${t('checkpoint_writes')}
        (thread_id, checkpoint_ns, checkpoint_id, task_id, idx, channel, type, blob)
      SELECT $1, $2, $3, $4, w.idx, w.channel, w.type, w.blob
      FROM unnest($5::int[], $6::text[], $7::text[], $8::bytea[]) AS w(idx, channel, type, blob)
      ON CONFLICT (thread_id, checkpoint_ns, checkpoint_id, task_id, idx) ${conflict}`;
    this.sql = {
      put: `WITH blobs AS (
          INSERT INTO ${t('checkpoint_blobs')} (thread_id, checkpoint_ns, channel, version, type, blob)
          SELECT $1, $2, b.channel, b.version, b.type, b.blob
          FROM unnest($7::text[], $8::text[], $9::text[], $10::bytea[]) AS b(channel, version, type, blob)
          ON CONFLICT (thread_id, checkpoint_ns, channel, version) DO NOTHING)
        INSERT INTO ${t('checkpoints')} (thread_id, checkpoint_ns, checkpoint_id, parent_checkpoint_id, checkpoint, metadata)
        VALUES ($1, $2, $3, $4, $5, $6)
        ON CONFLICT (thread_id, checkpoint_ns, checkpoint_id)
        DO UPDATE SET checkpoint = EXCLUDED.checkpoint, metadata = EXCLUDED.metadata`,
      upsertWrites: writes('DO UPDATE SET channel = EXCLUDED.channel, type = EXCLUDED.type, blob = EXCLUDED.blob'),
      insertWrites: writes('DO NOTHING'),
      batch: `WITH up AS (
          INSERT INTO ${t('checkpoint_writes')} (thread_id, checkpoint_ns, checkpoint_id, task_id, idx, channel, type, blob)
          SELECT * FROM unnest($1::text[], $2::text[], $3::text[], $4::text[], $5::int[], $6::text[], $7::text[], $8::bytea[])
          ON CONFLICT (thread_id, checkpoint_ns, checkpoint_id, task_id, idx)
          DO UPDATE SET channel = EXCLUDED.channel, type = EXCLUDED.type, blob = EXCLUDED.blob),
        ins AS (
          INSERT INTO ${t('checkpoint_writes')} (thread_id, checkpoint_ns, checkpoint_id, task_id, idx, channel, type, blob)
          SELECT * FROM unnest($9::text[], $10::text[], $11::text[], $12::text[], $13::int[], $14::text[], $15::text[], $16::bytea[])
          ON CONFLICT (thread_id, checkpoint_ns, checkpoint_id, task_id, idx) DO NOTHING),
        blobs AS (
          INSERT INTO ${t('checkpoint_blobs')} (thread_id, checkpoint_ns, channel, version, type, blob)
          SELECT * FROM unnest($17::text[], $18::text[], $19::text[], $20::text[], $21::text[], $22::bytea[])
          ON CONFLICT (thread_id, checkpoint_ns, channel, version) DO NOTHING)
        INSERT INTO ${t('checkpoints')} (thread_id, checkpoint_ns, checkpoint_id, parent_checkpoint_id, checkpoint, metadata)
        SELECT * FROM unnest($23::text[], $24::text[], $25::text[], $26::text[], $27::jsonb[], $28::jsonb[])
        ON CONFLICT (thread_id, checkpoint_ns, checkpoint_id)
        DO UPDATE SET checkpoint = EXCLUDED.checkpoint, metadata = EXCLUDED.metadata`,
    };
    // Prepared statement names are per connection; the schema keeps two savers on one pool apart.
    this.names = {
      put: `ap_cp_put_${options.schema}`,
      upsertWrites: `ap_cp_upsert_writes_${options.schema}`,
      insertWrites: `ap_cp_insert_writes_${options.schema}`,
      batch: `ap_cp_batch_${options.schema}`,
    };
  }

  /**
   * Metadata stays plain JSON when checkpoints are sealed: it is a jsonb column the package filters in SQL, and
   * the package parses the serde's output as JSON here.
   */
  protected override async _dumpMetadata(metadata: CheckpointMetadata): Promise<unknown> {
    if (!(this.serde instanceof EncryptingSerializer)) return super._dumpMetadata(metadata);
    const [, data] = await this.serde.inner.dumpsTyped(metadata);
    return JSON.parse(new TextDecoder().decode(data).replace(/\0/g, '')) as unknown;
  }

  /** The package revives metadata by a round trip through the serde: through the plain one (see _dumpMetadata). */
  protected override async _loadMetadata(metadata: Record<string, unknown>): Promise<CheckpointMetadata> {
    if (!(this.serde instanceof EncryptingSerializer)) return super._loadMetadata(metadata);
    const [type, data] = await this.serde.inner.dumpsTyped(metadata);
    return (await this.serde.inner.loadsTyped(type, data)) as CheckpointMetadata;
  }

  /** Tuples read ahead (readAhead, keepAhead) for one reader each. */
  readonly ahead = new ReadAheadTuples();

  /** The package's checkpoint read as this saver sends it, without its WHERE (undefined if its text is unknown). */
  private readonly selectSql: string | undefined;

  /** Whether latestTwoSubquery's blob columns are JSON (then keepAhead turns them back into byte arrays). */
  private readonly aheadAsJson: boolean;

  /**
   * The package's read of a thread's newest two root checkpoints, as a subquery whose thread id is `param` (e.g.
   * '$1'), for a statement that reads something else in the same round trip: its rows go to keepAhead. Undefined
   * when the package's statement text is unknown (then readAhead reads them on its own).
   */
  latestTwoSubquery(param: string): string | undefined {
    if (!this.selectSql || !/^\$\d+$/.test(param)) return undefined;
    const text = `${this.selectSql}WHERE thread_id = ${param} AND checkpoint_ns = '' ORDER BY checkpoint_id DESC LIMIT 2`;
    // Its blob columns come back as JSON, as the package's own reads do here (namingPool); keepAhead converts them.
    return `(${jsonBlobRead(text) ?? text})`;
  }

  /**
   * Reads a thread's newest two root checkpoints in one statement, for the getTuple calls of one reader that will
   * ask for the latest and its parent (GET state does: the parent's tasks are the latest's `writes`). Those calls
   * carry `token` under READ_AHEAD_KEY in their configurable and get these tuples instead of reading; any other
   * call reads as before. Call the returned function when done: it drops what was not taken.
   */
  async readAhead(threadId: string, token: string): Promise<() => void> {
    const tuples: CheckpointTuple[] = [];
    for await (const t of this.list({ configurable: { thread_id: threadId, checkpoint_ns: '' } }, { limit: 2 }))
      tuples.push(t);
    return this.ahead.keep(token, tuples);
  }

  /**
   * readAhead for rows another statement read through latestTwoSubquery (newest first, in the package's column
   * names). Rows the package would migrate first (checkpoints before format 4) are not kept: their reads go to the
   * package. Call the returned function when done.
   */
  async keepAhead(token: string, rows: Record<string, unknown>[]): Promise<() => void> {
    const legacy = rows.some(
      (r) => ((r.checkpoint as { v?: number } | null)?.v ?? 0) < 4 && r.parent_checkpoint_id != null,
    );
    if (legacy) return () => undefined;
    const tuples: CheckpointTuple[] = [];
    for (const r of rows) {
      if (this.aheadAsJson) blobArraysOf(r);
      const configurable = { thread_id: r.thread_id, checkpoint_ns: r.checkpoint_ns };
      tuples.push({
        config: { configurable: { ...configurable, checkpoint_id: r.checkpoint_id } },
        checkpoint: await this._loadCheckpoint(
          r.checkpoint as Parameters<PostgresSaver['_loadCheckpoint']>[0],
          r.channel_values as Parameters<PostgresSaver['_loadCheckpoint']>[1],
        ),
        metadata: await this._loadMetadata(r.metadata as Record<string, unknown>),
        parentConfig: r.parent_checkpoint_id
          ? { configurable: { ...configurable, checkpoint_id: r.parent_checkpoint_id } }
          : undefined,
        pendingWrites: await this._loadWrites(r.pending_writes as Parameters<PostgresSaver['_loadWrites']>[0]),
      });
    }
    return this.ahead.keep(token, tuples);
  }

  /** NO_CHECKPOINT_KEY tokens already answered: only an execution's first read of its latest is skipped. */
  private readonly skipped = new Set<string>();

  override async getTuple(config: RunnableConfig): Promise<CheckpointTuple | undefined> {
    const c = config.configurable;
    const first = c?.[NO_CHECKPOINT_KEY] as string | undefined;
    if (first && !c?.checkpoint_ns && !c?.checkpoint_id && !this.skipped.has(first)) {
      // The run's thread had no root checkpoint when the run was created and claimed, and was busy with it since.
      this.skipped.add(first);
      if (this.skipped.size > 10_000) this.skipped.delete(this.skipped.values().next().value!);
      return undefined;
    }
    const ahead = this.ahead.take(config);
    if (ahead.found) return ahead.tuple;
    return super.getTuple(config);
  }

  override async put(
    config: RunnableConfig,
    checkpoint: Checkpoint,
    metadata: CheckpointMetadata,
    newVersions: ChannelVersions,
  ): Promise<RunnableConfig> {
    if (config.configurable === undefined) throw new Error(`Missing "configurable" field in "config" param`);
    const { thread_id, checkpoint_ns = '', checkpoint_id } = config.configurable;
    const [blobs, serializedMetadata] = await Promise.all([
      this._dumpBlobs(thread_id, checkpoint_ns, checkpoint.channel_values, newVersions),
      this._dumpMetadata(metadata),
    ]);
    // Blob rows are [thread_id, checkpoint_ns, channel, version, type, blob]; one per channel, so no key repeats.
    await this.enqueue({
      kind: 'put',
      keys: [`c|${thread_id}|${checkpoint_ns}|${checkpoint.id}`],
      checkpoint: [
        thread_id,
        checkpoint_ns,
        checkpoint.id,
        checkpoint_id ?? null,
        this._dumpCheckpoint(checkpoint),
        serializedMetadata,
      ],
      blobs: blobs.map((b) => [b[0], b[1], b[2], b[3], b[4], b[5] ?? null]),
    });
    return { configurable: { thread_id, checkpoint_ns, checkpoint_id: checkpoint.id } };
  }

  override async putWrites(config: RunnableConfig, writes: PendingWrite[], taskId: string): Promise<void> {
    if (!writes.length) return;
    const upsert = writes.every((w) => w[0] in WRITES_IDX_MAP);
    const dumped = await this._dumpWrites(
      config.configurable?.thread_id,
      config.configurable?.checkpoint_ns,
      config.configurable?.checkpoint_id,
      taskId,
      writes,
    );
    // The package writes row after row: with upsert the last write of a repeated idx wins, with DO NOTHING the
    // first. One statement may not touch a row twice (DO UPDATE fails), so repeats are settled here the same way.
    const byIdx = new Map<number, WriteRow>();
    for (const w of dumped) if (upsert || !byIdx.has(w[4])) byIdx.set(w[4], w);
    const rows = [...byIdx.values()];
    await this.enqueue({
      kind: 'writes',
      upsert,
      rows,
      keys: rows.map((w) => `w|${w[0]}|${w[1]}|${w[2]}|${w[3]}|${w[4]}`),
    });
  }

  // Coalescing: the writes issued during one event-loop turn (all runs of the process) go out as ONE statement
  // when there are several; a single one uses its own statement. A write whose row is already in the open batch
  // starts the next batch, which waits for this one, so the order per row stays the order of the calls. If a
  // combined statement fails (atomically: nothing written), each write is retried alone, so a bad write fails
  // only its own caller.
  private batch: Batch | null = null;

  private enqueue(op: Op): Promise<void> {
    let b = this.batch;
    let after: Promise<unknown> = Promise.resolve();
    if (b && op.keys.some((k) => b!.keys.has(k))) {
      // Same row twice in one statement is not allowed: send the open batch now, queue this one behind it.
      this.batch = null;
      void this.flushAfter(b, b.after);
      after = b.done;
      b = null;
    }
    if (!b) {
      const opened = (b = this.batch = newBatch(after));
      setImmediate(() => {
        if (this.batch === opened) this.batch = null;
        void this.flushAfter(opened, opened.after);
      });
    }
    for (const k of op.keys) b.keys.add(k);
    const target = b;
    return new Promise<void>((resolve, reject) => target.ops.push({ op, resolve, reject }));
  }

  private async flushAfter(b: Batch, after: Promise<unknown>): Promise<void> {
    if (b.flushed) return;
    b.flushed = true;
    await after.catch(() => undefined);
    // Every statement is an idempotent upsert: while the database restarts or fails over, a write waits for it
    // (the graph pauses at its next checkpoint) instead of failing the run.
    const single = (op: Op) => retryWhileUnreachable(() => this.single(op), OUTAGE_WAIT_MS);
    try {
      if (b.ops.length === 1) {
        const [one] = b.ops;
        await single(one!.op).then(one!.resolve, one!.reject);
        return;
      }
      try {
        await retryWhileUnreachable(() => this.combined(b.ops.map((e) => e.op)), OUTAGE_WAIT_MS);
        for (const e of b.ops) e.resolve();
      } catch {
        for (const e of b.ops) await single(e.op).then(e.resolve, e.reject);
      }
    } finally {
      b.release();
    }
  }

  private async single(op: Op): Promise<void> {
    if (op.kind === 'put') {
      const [thread_id, checkpoint_ns, id, parent, checkpoint, metadata] = op.checkpoint;
      await this.db.query({
        name: this.names.put,
        text: this.sql.put,
        values: [
          thread_id,
          checkpoint_ns,
          id,
          parent,
          checkpoint,
          metadata,
          op.blobs.map((b) => b[2]),
          op.blobs.map((b) => b[3]),
          op.blobs.map((b) => b[4]),
          byteaArray(op.blobs.map((b) => b[5])),
        ],
      });
      return;
    }
    const first = op.rows[0]!;
    await this.db.query({
      name: op.upsert ? this.names.upsertWrites : this.names.insertWrites,
      text: op.upsert ? this.sql.upsertWrites : this.sql.insertWrites,
      values: [
        first[0],
        first[1],
        first[2],
        first[3],
        op.rows.map((w) => w[4]),
        op.rows.map((w) => w[5]),
        op.rows.map((w) => w[6]),
        byteaArray(op.rows.map((w) => w[7])),
      ],
    });
  }

  private async combined(ops: Op[]): Promise<void> {
    // Column i of the rows, as an array parameter; the columns in `binary` (blobs and checkpoint JSON, most of the
    // bytes) as binary arrays (binary-array.ts).
    const cols = (rows: unknown[][], n: number, binary: Record<number, (xs: never[]) => Buffer>) =>
      Array.from({ length: n }, (_, i) => {
        const column = rows.map((r) => r[i] ?? null);
        return binary[i] ? binary[i](column as never[]) : column;
      });
    const puts = ops.filter((o): o is PutOp => o.kind === 'put');
    const writes = ops.filter((o): o is WritesOp => o.kind === 'writes');
    const writeCols = (upsert: boolean) =>
      cols(
        writes.filter((o) => o.upsert === upsert).flatMap((o) => o.rows),
        8,
        { 7: byteaArray },
      );
    await this.db.query({
      name: this.names.batch,
      text: this.sql.batch,
      values: [
        ...writeCols(true),
        ...writeCols(false),
        ...cols(
          puts.flatMap((o) => o.blobs),
          6,
          { 5: byteaArray },
        ),
        ...cols(
          puts.map((o) => o.checkpoint),
          6,
          { 4: jsonbArray, 5: jsonbArray },
        ),
      ],
    });
  }
}

type WriteRow = [string, string, string, string, number, string, string, Uint8Array];
type BlobRow = [string, string, string, string, string, Uint8Array | null];
type PutOp = { kind: 'put'; keys: string[]; checkpoint: unknown[]; blobs: BlobRow[] };
type WritesOp = { kind: 'writes'; keys: string[]; upsert: boolean; rows: WriteRow[] };
type Op = PutOp | WritesOp;
interface Batch {
  ops: Array<{ op: Op; resolve: () => void; reject: (err: unknown) => void }>;
  keys: Set<string>;
  /** Resolves when the batch before it (with a row in common) has been written. */
  after: Promise<unknown>;
  /** Resolves when this batch has been written (or failed). */
  done: Promise<void>;
  release: () => void;
  flushed: boolean;
}

function newBatch(after: Promise<unknown>): Batch {
  let release!: () => void;
  const done = new Promise<void>((r) => (release = r));
  return { ops: [], keys: new Set(), after, done, release, flushed: false };
}

// The package's checkpoint reads (getTuple, list) return each checkpoint's blobs and pending writes as arrays of
// bytea arrays. node-pg parses that text format in JavaScript, a character at a time over the hex digits (two per
// byte), and this was the largest cost of reading a checkpoint. These reads ask for the same columns as JSON with
// base64 blobs (decoded natively) and get back the arrays the package expects, with the same bytes. Only the
// exact fragments below are replaced: if a package version words them differently, its SQL goes out unchanged.
const BLOB_ARRAYS: ReadonlyArray<readonly [string, string]> = [
  [
    'array_agg(array[bl.channel::bytea, bl.type::bytea, bl.blob])',
    "json_agg(json_build_array(bl.channel, bl.type, encode(bl.blob, 'base64')))",
  ],
  [
    'array_agg(array[cw.task_id::text::bytea, cw.channel::bytea, cw.type::bytea, cw.blob] order by cw.task_id, cw.idx)',
    "json_agg(json_build_array(cw.task_id::text, cw.channel, cw.type, encode(cw.blob, 'base64')) order by cw.task_id, cw.idx)",
  ],
];

/** The read with JSON blob columns, or undefined when the text is not one of the package's checkpoint reads. */
export function jsonBlobRead(text: string): string | undefined {
  if (!BLOB_ARRAYS.every(([from]) => text.includes(from))) return undefined;
  return BLOB_ARRAYS.reduce((sql, [from, to]) => sql.replace(from, to), text);
}

type JsonBlobRow = Record<string, unknown> & { channel_values?: unknown; pending_writes?: unknown };

/** channel_values / pending_writes back in the package's shape: arrays of byte arrays (text as UTF-8, null kept). */
function blobArraysOf(row: JsonBlobRow): void {
  const bytes = (entry: unknown[]) =>
    entry.map((v, i) =>
      v === null ? null : i === entry.length - 1 ? Buffer.from(v as string, 'base64') : Buffer.from(v as string),
    );
  for (const key of ['channel_values', 'pending_writes'] as const) {
    const value = row[key];
    if (Array.isArray(value)) row[key] = value.map((entry) => bytes(entry as unknown[]));
  }
}

/**
 * The pool as the package sees it: query(text, values) of a known text goes out as a named statement, and its
 * checkpoint reads come back through JSON (above).
 */
function namingPool(pool: pg.Pool, names: ReadonlyMap<string, string>): pg.Pool {
  return new Proxy(pool, {
    get(target, prop) {
      if (prop === 'query') {
        return (...args: unknown[]) => {
          if (typeof args[0] !== 'string' || args.length > 2)
            return (target.query as (...a: unknown[]) => unknown)(...args);
          const text = args[0];
          const json = jsonBlobRead(text);
          const name = names.get(text);
          const values = (args[1] as unknown[] | undefined) ?? [];
          const sent = target.query(name ? { name, text: json ?? text, values } : { text: json ?? text, values });
          if (!json) return sent;
          return sent.then((result) => {
            for (const row of result.rows as JsonBlobRow[]) blobArraysOf(row);
            return result;
          });
        };
      }
      const v = Reflect.get(target, prop, target) as unknown;
      return typeof v === 'function' ? (v as (...a: unknown[]) => unknown).bind(target) : v;
    },
  });
}

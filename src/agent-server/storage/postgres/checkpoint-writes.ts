// The checkpoint writes of FewerTripsPostgresSaver (checkpointer.ts), each ONE statement: put() inserts the blobs in
// a data-modifying CTE next to the checkpoint upsert, putWrites() inserts all writes of the task from arrays, and the
// writes of one event-loop turn go out together (below). The conflict rules are the package's: blobs DO NOTHING,
// checkpoints upsert checkpoint + metadata, writes upsert when every channel is a special one, DO NOTHING otherwise.
import type pg from 'pg';
import { retryWhileUnreachable } from '../../../lib/connection-errors.ts';
import { byteaArray, jsonbArray } from './binary-array.ts';

/** How long a checkpoint write waits for an unreachable database before the run fails with the error. */
const OUTAGE_WAIT_MS = 60_000;

export class CheckpointWriter {
  private readonly sql: { put: string; upsertWrites: string; insertWrites: string; batch: string };
  private readonly names: { put: string; upsertWrites: string; insertWrites: string; batch: string };

  constructor(
    private readonly db: pg.Pool,
    options: { schema: string },
  ) {
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

  // Coalescing: the writes issued during one event-loop turn (all runs of the process) go out as ONE statement
  // when there are several; a single one uses its own statement. A write whose row is already in the open batch
  // starts the next batch, which waits for this one, so the order per row stays the order of the calls. If a
  // combined statement fails (atomically: nothing written), each write is retried alone, so a bad write fails
  // only its own caller.
  private batch: Batch | null = null;

  enqueue(op: Op): Promise<void> {
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

export type WriteRow = [string, string, string, string, number, string, string, Uint8Array];
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

// PostgresSaver with fewer round trips. The package's put() runs BEGIN, one INSERT per changed channel blob,
// the checkpoint INSERT and COMMIT (≈5 round trips); putWrites() runs BEGIN, one INSERT per write and COMMIT.
// Here each is ONE statement (atomic on its own, so no transaction block): put() inserts the blobs in a
// data-modifying CTE next to the checkpoint upsert, putWrites() inserts all writes of the task from arrays.
// Schema, migrations, serialization and every read stay the package's; the conflict rules are the same:
// blobs DO NOTHING, checkpoints upsert checkpoint + metadata, writes upsert when every channel is a special one
// (WRITES_IDX_MAP: error, scheduled, interrupt, resume) and DO NOTHING otherwise.
// Statements are named (prepared once per connection), so Postgres parses and plans them once; the package's
// two getTuple reads are sent named too (same text, through a pool wrapper that only adds the name).
// The write statements and their batching are in checkpoint-writes.ts, the pool the package reads through in
// checkpoint-reads.ts.
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
import { ReadAheadTuples } from '../read-ahead.ts';
import { EncryptingSerializer } from '../data-cipher.ts';
import { NO_CHECKPOINT_KEY } from '../types.ts';
import { blobArraysOf, jsonBlobRead, namingPool } from './checkpoint-reads.ts';
import { CheckpointWriter, type WriteRow } from './checkpoint-writes.ts';

export class FewerTripsPostgresSaver extends PostgresSaver {
  private readonly writer: CheckpointWriter;

  constructor(pool: pg.Pool, serde: SerializerProtocol | undefined, options: { schema: string }) {
    const prepared = new Map<string, string>();
    super(namingPool(pool, prepared), serde, options);
    this.writer = new CheckpointWriter(pool, options);
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
    await this.writer.enqueue({
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
    await this.writer.enqueue({
      kind: 'writes',
      upsert,
      rows,
      keys: rows.map((w) => `w|${w[0]}|${w[1]}|${w[2]}|${w[3]}|${w[4]}`),
    });
  }
}

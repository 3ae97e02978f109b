// The embedded store's checkpointer: SqliteSaver with group commit. The package's put() and putWrites() each
// commit a transaction of their own, and a commit (appending the changed pages to the WAL, updating its index) costs
// more than the rows it writes. An executor thread runs many graphs at once, and their writes come in bursts: here
// every write serialises as the package does, then joins the writes queued in the same event-loop turn, and one
// transaction commits them all. A write's promise resolves only after its commit, as before, so nothing is
// acknowledged that is not in the file; a statement that fails inside the group undoes the group, whose writes are
// then committed one by one so that each caller gets its own outcome.
// Rows, statements and conflict rules are the package's (INSERT OR REPLACE for checkpoints; for writes OR REPLACE
// when every channel is a special one, WRITES_IDX_MAP, and OR IGNORE otherwise); reads are the package's.
import type Database from 'better-sqlite3';
import type { RunnableConfig } from '@langchain/core/runnables';
import {
  WRITES_IDX_MAP,
  copyCheckpoint,
  type Checkpoint,
  type CheckpointMetadata,
  type CheckpointTuple,
  type PendingWrite,
  type SerializerProtocol,
} from '@langchain/langgraph-checkpoint';
import { SqliteSaver } from '@langchain/langgraph-checkpoint-sqlite';
import { LeanCheckpointSerializer } from '../../shims/checkpoint-serde.ts';
import { EncryptingSerializer, type DataKeyring } from '../data-cipher.ts';
import { ReadAheadTuples } from '../read-ahead.ts';
import { writeLockOf } from './context.ts';
import type { WriteLock } from './write-lock.ts';

const INSERT_CHECKPOINT = `INSERT OR REPLACE INTO checkpoints (thread_id, checkpoint_ns, checkpoint_id, parent_checkpoint_id, type, checkpoint, metadata) VALUES (?, ?, ?, ?, ?, ?, ?)`;
const insertWrites = (conflict: 'OR REPLACE' | 'OR IGNORE') => `
      INSERT ${conflict} INTO writes
      (thread_id, checkpoint_ns, checkpoint_id, task_id, idx, channel, type, value)
      VALUES (?, ?, ?, ?, ?, ?, ?, ?)
    `;

/**
 * The package's read of a checkpoint (its columns, and its pending writes as the package aggregates them), for a
 * thread's newest two root checkpoints, as a subquery whose thread id is the statement's `@thread_id`: a statement
 * that reads the thread reads them in the same step (ThreadStore.getReadingAhead), its rows go to keepAhead.
 */
export const LATEST_TWO_CHECKPOINTS = `(SELECT thread_id, checkpoint_ns, checkpoint_id, parent_checkpoint_id, type,
    checkpoint, metadata,
    (SELECT json_group_array(json_object('task_id', w.task_id, 'channel', w.channel, 'type', w.type,
        'value', CAST(w.value AS TEXT)))
      FROM writes AS w WHERE w.thread_id = checkpoints.thread_id AND w.checkpoint_ns = checkpoints.checkpoint_ns
        AND w.checkpoint_id = checkpoints.checkpoint_id) AS pending_writes
  FROM checkpoints WHERE thread_id = @thread_id AND checkpoint_ns = '' ORDER BY checkpoint_id DESC LIMIT 2)`;

/** The columns of LATEST_TWO_CHECKPOINTS. */
export const LATEST_TWO_COLUMNS = [
  'thread_id',
  'checkpoint_ns',
  'checkpoint_id',
  'parent_checkpoint_id',
  'type',
  'checkpoint',
  'metadata',
  'pending_writes',
] as const;

interface Queued {
  write: () => void;
  resolve: () => void;
  reject: (err: unknown) => void;
}

export class CheckpointSaver extends SqliteSaver {
  private queue: Queued[] = [];
  private readonly group: Database.Transaction<(items: Queued[]) => void>;
  private readonly single: Database.Transaction<(item: Queued) => void>;
  /** Transactions committed by group commit, and the writes they carried (for tests and profiles). */
  readonly commits = { groups: 0, writes: 0 };

  constructor(
    db: Database.Database,
    private readonly sql: (text: string) => Database.Statement,
    /** The write lock of this process's connections to the file (write-lock.ts), if it has one. */
    private readonly lock?: WriteLock,
    keyring?: DataKeyring,
  ) {
    super(
      db,
      keyring ? new EncryptingSerializer(new LeanCheckpointSerializer(), keyring) : new LeanCheckpointSerializer(),
    );
    this.plainSerde = this.serde instanceof EncryptingSerializer ? this.serde.inner : this.serde;
    this.group = db.transaction((items: Queued[]) => {
      for (const item of items) item.write();
    });
    this.single = db.transaction((item: Queued) => item.write());
  }

  /**
   * The serde of metadata: plain even when checkpoints are sealed, since the package filters on it in SQL
   * (`jsonb(CAST(metadata AS TEXT))`) and rollback finds a run's checkpoints by it; its row's type names the
   * checkpoint's cipher, and EncryptingSerializer reads a value that is not sealed as plain.
   */
  private readonly plainSerde: SerializerProtocol;

  /** Creates the saver's tables now, so our own SQL (copy, rollback) can rely on them. */
  init(): void {
    this.setup();
  }

  /** Tuples read ahead (keepAhead) for one reader each. */
  readonly ahead = new ReadAheadTuples();

  /**
   * Keeps the rows of LATEST_TWO_CHECKPOINTS (newest first) for the getTuple calls that carry `token` under
   * READ_AHEAD_KEY, as the package's getTuple would have read them. A checkpoint the package would migrate first
   * (format before 4, with a parent) is not kept: its reads go to the package. Call the returned function when done.
   */
  async keepAhead(token: string, rows: Record<string, unknown>[]): Promise<() => void> {
    const tuples: CheckpointTuple[] = [];
    for (const r of rows) {
      const checkpoint = (await this.serde.loadsTyped((r.type as string | null) ?? 'json', r.checkpoint as string)) as
        Checkpoint | undefined;
      if (checkpoint && checkpoint.v < 4 && r.parent_checkpoint_id != null) return () => undefined;
      const written = JSON.parse(r.pending_writes as string) as Array<Record<string, string | null>>;
      const configurable = { thread_id: r.thread_id, checkpoint_ns: r.checkpoint_ns };
      tuples.push({
        checkpoint: checkpoint!,
        config: { configurable: { ...configurable, checkpoint_id: r.checkpoint_id } },
        metadata: (await this.serde.loadsTyped(
          (r.type as string | null) ?? 'json',
          r.metadata as string,
        )) as CheckpointMetadata,
        parentConfig: r.parent_checkpoint_id
          ? { configurable: { ...configurable, checkpoint_id: r.parent_checkpoint_id } }
          : undefined,
        pendingWrites: await Promise.all(
          written.map(async (w) => [
            w.task_id as string,
            w.channel as string,
            await this.serde.loadsTyped(w.type ?? 'json', w.value ?? ''),
          ]),
        ),
      });
    }
    return this.ahead.keep(token, tuples);
  }

  override async getTuple(config: RunnableConfig): Promise<CheckpointTuple | undefined> {
    const ahead = this.ahead.take(config);
    if (ahead.found) return ahead.tuple;
    return super.getTuple(config);
  }

  override async put(config: RunnableConfig, checkpoint: Checkpoint, metadata: CheckpointMetadata) {
    this.setup();
    if (!config.configurable) throw new Error('Empty configuration supplied.');
    const threadId = config.configurable.thread_id as string | undefined;
    const checkpointNs = (config.configurable.checkpoint_ns as string | undefined) ?? '';
    const parentId = config.configurable.checkpoint_id as string | undefined;
    if (!threadId) throw new Error(`Missing "thread_id" field in passed "config.configurable".`);
    const [[type1, serializedCheckpoint], [type2, serializedMetadata]] = await Promise.all([
      this.serde.dumpsTyped(copyCheckpoint(checkpoint)),
      this.plainSerde.dumpsTyped(metadata),
    ]);
    if (!type1.startsWith(type2)) throw new Error('Failed to serialized checkpoint and metadata to the same type.');
    const row = [threadId, checkpointNs, checkpoint.id, parentId, type1, serializedCheckpoint, serializedMetadata];
    await this.commit(() => this.sql(INSERT_CHECKPOINT).run(...row));
    return { configurable: { thread_id: threadId, checkpoint_ns: checkpointNs, checkpoint_id: checkpoint.id } };
  }

  override async putWrites(config: RunnableConfig, writes: PendingWrite[], taskId: string): Promise<void> {
    this.setup();
    const c = config.configurable;
    if (!c) throw new Error('Empty configuration supplied.');
    if (!c.thread_id) throw new Error('Missing thread_id field in config.configurable.');
    if (!c.checkpoint_id) throw new Error('Missing checkpoint_id field in config.configurable.');
    const allSpecial = writes.every(([channel]) => channel in WRITES_IDX_MAP);
    const statement = this.sql(insertWrites(allSpecial ? 'OR REPLACE' : 'OR IGNORE'));
    const rows = await Promise.all(
      writes.map(async ([channel, value], idx) => {
        const [type, serialized] = await this.serde.dumpsTyped(value);
        return [
          c.thread_id,
          c.checkpoint_ns,
          c.checkpoint_id,
          taskId,
          WRITES_IDX_MAP[channel] ?? idx,
          channel,
          type,
          serialized,
        ];
      }),
    );
    await this.commit(() => {
      for (const row of rows) statement.run(...row);
    });
  }

  /** Runs `write` in the next group transaction; resolves once that has committed. */
  private commit(write: () => void): Promise<void> {
    return new Promise<void>((resolve, reject) => {
      this.queue.push({ write, resolve, reject });
      if (this.queue.length === 1) setImmediate(() => this.flush());
    });
  }

  private flush(): void {
    if (this.lock) this.lock.write(() => this.flushQueue());
    else this.flushQueue();
  }

  private flushQueue(): void {
    const items = this.queue;
    this.queue = [];
    try {
      this.group.immediate(items);
      this.commits.groups++;
      this.commits.writes += items.length;
      for (const item of items) item.resolve();
      return;
    } catch (err) {
      if (items.length === 1) {
        items[0]!.reject(err);
        return;
      }
    }
    // Something in the group failed and nothing of it was kept: each write alone, with its own outcome.
    for (const item of items) {
      try {
        this.single.immediate(item);
        item.resolve();
      } catch (err) {
        item.reject(err);
      }
    }
  }
}

/**
 * The checkpointer over a connection: SqliteSaver prepares its statements on every call, so its reads get the
 * connection's statement cache too (all its statements run synchronously, so sharing one is safe).
 */
export function checkpointSaver(
  db: Database.Database,
  sql: (text: string) => Database.Statement,
  keyring?: DataKeyring,
): CheckpointSaver {
  const saverDb = new Proxy(db, {
    get(target, prop) {
      if (prop === 'prepare') return sql;
      const v = Reflect.get(target, prop, target) as unknown;
      return typeof v === 'function' ? (v as (...a: unknown[]) => unknown).bind(target) : v;
    },
  });
  return new CheckpointSaver(saverDb, sql, writeLockOf(db), keyring);
}

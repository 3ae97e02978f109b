// Embedded store: one SQLite file (WAL) under the data dir holds our tables and, through SqliteSaver, the
// checkpoints. One process owns the file, so every method runs synchronously inside one transaction and
// wake-ups travel on an in-process emitter. Each aggregate is a small factory over the shared context
// (context.ts); the run-lifecycle rules they apply live in ../run-rules.ts.
import { EventEmitter } from 'node:events';
import { mkdirSync } from 'node:fs';
import { join } from 'node:path';
import type Database from 'better-sqlite3';
import type { BaseCheckpointSaver } from '@langchain/langgraph-checkpoint';
import { lockDataDir } from '../../../lib/data-dir-lock.ts';
import type { Logger } from '../../../lib/logger.ts';
import { migrateSqlite } from '../../../lib/migrations.ts';
import { DEFAULT_ITEMS_CONFIG, type Embedder, type ItemsConfig } from '../items.ts';
import { DEFAULT_THREAD_TTL, startThreadSweeper, type ThreadTtlConfig } from '../thread-ttl.ts';
import { DEFAULT_STREAM_RETENTION_MS, type ItemStore, type StreamEventStore } from '../types.ts';
import { embeddedAssistants } from './assistants.ts';
import { checkpointSaver } from './checkpoint-saver.ts';
import { openContext, openDatabase, statementCache } from './context.ts';
import { sqliteItems } from './items.ts';
import { embeddedCrons } from './crons.ts';
import { AGENT_SERVER_SQLITE_MIGRATIONS } from './migrations.ts';
import { embeddedRuns } from './runs/index.ts';
import type { EngineStorage } from '../ports/run-queue.ts';
import { embeddedStreamEvents } from './stream-events.ts';
import { embeddedThreads } from './threads.ts';
import { WriteLock } from './write-lock.ts';
import { resealEmbedded } from './reseal.ts';
import { jsonCodec, type DataKeyring } from '../data-cipher.ts';

export interface EmbeddedOptions {
  dataDir: string;
  /** Test hook: use an existing file name instead of the default. */
  fileName?: string;
  /** langgraph.json "store" (TTL, semantic index) and its loaded embeddings. */
  items?: ItemsConfig;
  embedder?: Embedder;
  logger?: Logger;
  /** langgraph.json "checkpointer.ttl": default thread TTL and sweep interval. */
  threadTtl?: ThreadTtlConfig;
  /** How long a run's stream events stay readable after its newest one (default 10 minutes). */
  streamRetentionMs?: number;
  /** Stream events kept elsewhere (Redis, --redis-url) instead of this process's memory; closed with the store. */
  streams?: StreamEventStore & { close(): Promise<void> };
  /** The keys agent data is encrypted with at rest (LANGGRAPH_AES_KEY); without them it is stored in clear. */
  keyring?: DataKeyring;
}

/**
/**
 * With data keys, what a write replaces or deletes is overwritten in the file, not left in free pages: resealing
 * data stored in clear must not leave the clear text behind.
 */
function secureDelete(db: Database.Database): void {
  db.pragma('secure_delete = ON');
}

/**
 * The checkpoints of an embedded store through a connection of their own, for graphs executing on another thread
 * of the owning process (SQLite's WAL lets it write beside the store's connection; busy_timeout covers the lock).
 */
export function openEmbeddedCheckpointer(
  file: string,
  writeLock: SharedArrayBuffer | undefined,
  keyring: DataKeyring | undefined,
): { saver: BaseCheckpointSaver; close(): void } {
  const db = openDatabase(file, writeLock && new WriteLock(writeLock));
  if (keyring) secureDelete(db);
  const saver = checkpointSaver(db, statementCache(db), keyring);
  return { saver, close: () => db.close() };
}

/** The memory store's items through a connection of their own (executor threads; see openEmbeddedCheckpointer). */
export function openEmbeddedItems(
  file: string,
  config: ItemsConfig,
  embedder: Embedder | undefined,
  writeLock: SharedArrayBuffer | undefined,
  keyring: DataKeyring | undefined,
): { items: ItemStore; close(): void } {
  const db = openDatabase(file, writeLock && new WriteLock(writeLock));
  if (keyring) secureDelete(db);
  return { items: sqliteItems(db, statementCache(db), config, embedder, jsonCodec(keyring)), close: () => db.close() };
}

export function openEmbeddedStorage(opts: EmbeddedOptions): EngineStorage {
  mkdirSync(opts.dataDir, { recursive: true });
  // One live process per data dir: a second one would take the first one's running runs for abandoned ones.
  const ownership = lockDataDir(opts.dataDir, 'agentplane agent-server');
  const file = join(opts.dataDir, opts.fileName ?? 'agentplane.sqlite');
  // Shared with the executor threads' connections to the file (CheckpointerSource.writeLock).
  const writeLock = new WriteLock();
  let db: ReturnType<typeof openDatabase>;
  try {
    db = openDatabase(file, writeLock);
    if (opts.keyring) secureDelete(db);
    migrateSqlite(db, AGENT_SERVER_SQLITE_MIGRATIONS, `the agent server's store ${file}`);
  } catch (err) {
    // A store that cannot open (a newer schema, a damaged file) leaves the folder to the next try of this process.
    ownership.release();
    throw err;
  }
  // One process owns the file: anything still running was left by a process that is gone.
  db.prepare(`UPDATE ap_runs SET lease_expires_at = 0 WHERE status = 'running'`).run();

  // Statements are prepared once per SQL text and transactions wrap a reused function: both show in profiles.
  const sql = statementCache(db);
  const saver = checkpointSaver(db, sql, opts.keyring);
  saver.init();
  const codec = jsonCodec(opts.keyring);
  const emitter = new EventEmitter();
  emitter.setMaxListeners(0);
  const threadTtl = opts.threadTtl ?? DEFAULT_THREAD_TTL;
  const ctx = openContext(db, sql, emitter, codec, threadTtl.defaultMinutes, threadTtl.strategy);
  const { runs, queue, createIn } = embeddedRuns(ctx);
  const itemsConfig = opts.items ?? DEFAULT_ITEMS_CONFIG;
  const items = sqliteItems(db, sql, itemsConfig, opts.embedder, codec);
  const streamRetentionMs = opts.streamRetentionMs ?? DEFAULT_STREAM_RETENTION_MS;
  const streams = opts.streams ?? embeddedStreamEvents({ retentionMs: streamRetentionMs });
  const streamSweeper = setInterval(
    () => void streams.sweep(),
    Math.min(Math.max(streamRetentionMs / 2, 1_000), 60_000),
  ).unref();
  const sweeper = itemsConfig.ttl.sweepMinutes
    ? setInterval(() => {
        items.sweep().catch((err: unknown) => opts.logger?.warn({ err }, 'sweeping expired store items failed'));
      }, itemsConfig.ttl.sweepMinutes * 60_000).unref()
    : undefined;

  const threads = embeddedThreads(ctx, saver);
  const stopThreadSweeper = startThreadSweeper(threads, threadTtl, opts.logger);

  return {
    kind: 'embedded',
    checkpointer: saver,
    checkpointerSource: {
      kind: 'embedded',
      file,
      items: itemsConfig,
      writeLock: writeLock.buffer,
      ...(opts.keyring ? { dataKeys: opts.keyring.material() } : {}),
    },
    assistants: embeddedAssistants(ctx),
    threads,
    runs,
    queue,
    crons: embeddedCrons(ctx, { createIn }),
    items,
    streams,
    subscribe(listener) {
      emitter.on('event', listener);
      return () => emitter.off('event', listener);
    },
    ...(opts.keyring ? { reseal: (signal) => resealEmbedded(db, opts.keyring!, signal) } : {}),
    async ping() {
      sql('SELECT 1').get();
    },
    async close() {
      emitter.removeAllListeners();
      clearInterval(sweeper);
      stopThreadSweeper();
      clearInterval(streamSweeper);
      await streams.close();
      db.close();
      ownership.release();
    },
  };
}

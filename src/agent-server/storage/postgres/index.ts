// Postgres store: our tables in one schema, checkpoints through PostgresSaver on the same pool. Several
// processes may share the database: run claims lock the thread row (FOR UPDATE SKIP LOCKED) so one thread
// never runs two runs at once, and LISTEN/NOTIFY carries wake-ups, cancels and completions between them.
// Round trips are the budget (each costs CPU here and in a Postgres backend): the run cycle's statements are
// single statements (run create when the thread is free, claim, finish; checkpoint writes batched per
// event-loop turn, see checkpointer.ts), named so each connection plans them once, and a claim that can find
// nothing new answers without a query (ClaimGate in context.ts); leases and SKIP LOCKED claims are unchanged.
// Each aggregate is a small factory over the shared context; the run-lifecycle rules live in ../run-rules.ts.
import { EventEmitter } from 'node:events';
import { newPgClient, newPgPool, warnEvery } from '../../../lib/connections.ts';
import type { PostgresSaver } from '@langchain/langgraph-checkpoint-postgres';
import type { PostgresStore } from '@langchain/langgraph-checkpoint-postgres/store';
import { DEFAULT_ITEMS_CONFIG, type Embedder, type ItemsConfig } from '../items.ts';
import { DEFAULT_THREAD_TTL, startThreadSweeper, type ThreadTtlConfig } from '../thread-ttl.ts';
import { DEFAULT_STREAM_RETENTION_MS, type ItemStore } from '../types.ts';
import { postgresAssistants } from './assistants.ts';
import { FewerTripsPostgresSaver } from './checkpointer.ts';
import { LeanCheckpointSerializer } from '../../shims/checkpoint-serde.ts';
import { EncryptingSerializer, jsonCodec, type DataKeyring } from '../data-cipher.ts';
import { openContext, type PostgresOptions } from './context.ts';
import { newPostgresStore, pgvectorAvailable, postgresItems } from './items.ts';
import { postgresCrons } from './crons.ts';
import { MIGRATION_LOCK, migratePostgres } from './migrations.ts';
import { postgresRuns } from './runs/index.ts';
import type { EngineStorage } from '../ports/run-queue.ts';
import { postgresStreamEvents } from './stream-events.ts';
import { postgresThreads } from './threads.ts';
import { resealPostgres } from './reseal.ts';

export type { PostgresOptions } from './context.ts';

/**
 * application_name of the HTTP thread's pool and of the executor threads' (pg_stat_activity tells them apart), as
 * fallbacks: one in the database URL or in PGAPPNAME wins.
 */
export const HTTP_APPLICATION = 'agentplane';
export const EXECUTOR_APPLICATION = 'agentplane executor';

/**
 * The checkpoints of a Postgres store through a pool of their own (for graphs executing on another thread);
 * the store's migrations have already created the tables.
 */
export function openPostgresCheckpointer(
  databaseUrl: string,
  schema: string,
  poolSize: number,
  keyring: DataKeyring | undefined,
) {
  const pool = newPgPool({
    connectionString: databaseUrl,
    max: poolSize,
    fallback_application_name: EXECUTOR_APPLICATION,
  });
  const saver = new FewerTripsPostgresSaver(pool, checkpointSerde(keyring), { schema });
  return { saver, close: () => pool.end() };
}

/**
 * The memory store's items through connections of their own (executor threads). `semantic`: the main thread
 * found pgvector and created the vector table.
 */
export function openPostgresItems(
  databaseUrl: string,
  schema: string,
  config: ItemsConfig,
  embedder: Embedder | undefined,
  semantic: boolean,
  keyring: DataKeyring | undefined,
  poolSize = 5,
): { items: ItemStore; close(): Promise<void> } {
  const pool = newPgPool({ connectionString: databaseUrl, max: poolSize });
  const pgStore = newPostgresStore(databaseUrl, schema, config, semantic ? embedder : undefined);
  return {
    items: postgresItems(pool, schema, pgStore, config, semantic, jsonCodec(keyring)),
    close: async () => {
      await pgStore.stop();
      await pool.end();
    },
  };
}

export async function openPostgresStorage(opts: PostgresOptions): Promise<EngineStorage> {
  const s = opts.schema ?? 'agentplane';
  if (!/^[a-z_][a-z0-9_]*$/.test(s)) throw new Error(`invalid schema name ${s}`);
  const onError = warnEvery(opts.logger, 'a postgres connection failed; queries wait for the database to return');
  const pool = newPgPool(
    { connectionString: opts.databaseUrl, max: opts.poolSize ?? 20, fallback_application_name: HTTP_APPLICATION },
    onError,
  );
  const saver = new FewerTripsPostgresSaver(pool, checkpointSerde(opts.keyring), { schema: s });
  const itemsConfig = opts.items ?? DEFAULT_ITEMS_CONFIG;
  const threadTtl = opts.threadTtl ?? DEFAULT_THREAD_TTL;
  let semantic = !!(opts.embedder && itemsConfig.index);
  if (semantic && opts.keyring) {
    // PostgresStore embeds the value it stores, which is sealed: there would be nothing to embed.
    semantic = false;
    opts.logger?.warn(
      'langgraph.json "store.index" asks for semantic search, which on Postgres is not available while agent data ' +
        'is encrypted at rest (LANGGRAPH_AES_KEY): store search ignores "query"',
    );
  }
  if (semantic && !(await pgvectorAvailable(pool))) {
    semantic = false;
    opts.logger?.warn(
      { store_index: itemsConfig.index?.embed },
      'langgraph.json "store.index" asks for semantic search, ' +
        'which on Postgres needs the pgvector extension, and this server does not offer it (pg_available_extensions): ' +
        'store search ignores "query" until pgvector is installed',
    );
  }
  const pgStore = newPostgresStore(opts.databaseUrl, s, itemsConfig, semantic ? opts.embedder : undefined, onError);

  try {
    await migrate(opts.databaseUrl, s, saver, pgStore, threadTtl);
  } catch (err) {
    await pgStore.stop().catch(() => undefined);
    await pool.end().catch(() => undefined);
    throw err;
  }

  const emitter = new EventEmitter();
  emitter.setMaxListeners(0);
  const ctx = await openContext(opts, pool, s, emitter);
  const items = postgresItems(pool, s, pgStore, itemsConfig, semantic, jsonCodec(opts.keyring));
  const { runs, queue, createIn } = postgresRuns(ctx);
  const streamRetentionMs = opts.streamRetentionMs ?? DEFAULT_STREAM_RETENTION_MS;
  const streams =
    opts.streams ??
    (await postgresStreamEvents(pool, s, {
      databaseUrl: opts.databaseUrl,
      retentionMs: streamRetentionMs,
      ...(opts.logger ? { logger: opts.logger } : {}),
    }));
  const streamSweeper = setInterval(
    () => {
      streams.sweep().catch((err: unknown) => opts.logger?.warn({ err }, 'sweeping old stream events failed'));
    },
    Math.min(Math.max(streamRetentionMs / 2, 1_000), 60_000),
  ).unref();
  const sweeper = itemsConfig.ttl.sweepMinutes
    ? setInterval(() => {
        items.sweep().catch((err: unknown) => opts.logger?.warn({ err }, 'sweeping expired store items failed'));
      }, itemsConfig.ttl.sweepMinutes * 60_000).unref()
    : undefined;

  const threads = postgresThreads(ctx, saver);
  const stopThreadSweeper = startThreadSweeper(threads, threadTtl, opts.logger);

  return {
    kind: 'postgres',
    checkpointer: saver,
    checkpointerSource: {
      kind: 'postgres',
      databaseUrl: opts.databaseUrl,
      schema: s,
      items: itemsConfig,
      semantic,
      ...(opts.keyring ? { dataKeys: opts.keyring.material() } : {}),
    },
    assistants: postgresAssistants(ctx),
    threads,
    runs,
    queue,
    crons: postgresCrons(ctx, { createIn }),
    items,
    streams,
    subscribe(fn) {
      emitter.on('event', fn);
      return () => emitter.off('event', fn);
    },
    ...(opts.keyring ? { reseal: (signal) => resealPostgres(pool, s, opts.keyring!, signal) } : {}),
    async ping() {
      await pool.query('SELECT 1');
    },
    async close() {
      emitter.removeAllListeners();
      clearInterval(sweeper);
      stopThreadSweeper();
      clearInterval(streamSweeper);
      await streams.close();
      await ctx.listener.close();
      await pgStore.stop();
      await pool.end();
    },
  };
}

/** The checkpoints' serde: sealing what it writes when there are data keys. */
function checkpointSerde(keyring: DataKeyring | undefined) {
  return keyring ? new EncryptingSerializer(new LeanCheckpointSerializer(), keyring) : new LeanCheckpointSerializer();
}

/** SQL literal of a default thread TTL (a number from validated config), or NULL. */
function ttlLiteral(minutes: number | null): string {
  return minutes !== null && Number.isFinite(minutes) ? String(minutes) : 'NULL';
}

/**
 * Migrates under an advisory lock held by a connection of its own: the savers' setup in between takes connections
 * from their pools, which may hold a single one (--postgres-pool-max-size).
 */
async function migrate(
  databaseUrl: string,
  s: string,
  saver: PostgresSaver,
  pgStore: PostgresStore,
  threadTtl: ThreadTtlConfig,
): Promise<void> {
  const c = newPgClient({ connectionString: databaseUrl, fallback_application_name: `${HTTP_APPLICATION} migrations` });
  await c.connect();
  try {
    await c.query('SELECT pg_advisory_lock($1)', [MIGRATION_LOCK]);
    try {
      await migratePostgres(c, s);
      // Threads inserted without a TTL (runs' own threads too) get langgraph.json's default_ttl from now on; the
      // processes of one deployment share its langgraph.json, so they agree on it.
      // Their strategy too (NULL: "delete"); a thread given a ttl of its own has strategy "delete".
      const ttl = ttlLiteral(threadTtl.defaultMinutes);
      const strategy = ttl !== 'NULL' && threadTtl.strategy === 'keep_latest' ? `'keep_latest'` : 'NULL';
      await c.query(
        `ALTER TABLE ${s}.threads ALTER COLUMN ttl_minutes SET DEFAULT ${ttl}, ALTER COLUMN ttl_strategy SET DEFAULT ${strategy}`,
      );
      await saver.setup();
      await pgStore.setup();
    } finally {
      await c.query('SELECT pg_advisory_unlock($1)', [MIGRATION_LOCK]);
    }
  } finally {
    await c.end();
  }
}

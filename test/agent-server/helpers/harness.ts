// An in-process agent server on the fixture graphs: real storage, real engine, app.inject or a real port.
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import type { FastifyInstance } from 'fastify';
import { buildApp } from '../../../src/agent-server/app.ts';
import { loadGraphs } from '../../../src/agent-server/graphs/index.ts';
import { RunEngine } from '../../../src/agent-server/runs/engine.ts';
import type { RunExecutor } from '../../../src/agent-server/runs/executor.ts';
import { ThreadExecutor } from '../../../src/agent-server/runs/thread-executor.ts';
import { ensureSystemAssistants } from '../../../src/agent-server/server.ts';
import { openEmbeddedStorage } from '../../../src/agent-server/storage/embedded/index.ts';
import { openPostgresStorage } from '../../../src/agent-server/storage/postgres/index.ts';
import type { EngineStorage } from '../../../src/agent-server/storage/ports/run-queue.ts';
import { createLogger, silentLogger } from '../../../src/lib/logger.ts';
import { createTestDatabase } from './pg.ts';

export const FIXTURE_CONFIG = new URL('../../fixtures/agent-server/langgraph.json', import.meta.url).pathname;

export interface Harness {
  app: FastifyInstance;
  /** The executor threads, when the harness runs graphs on some. */
  threads?: ThreadExecutor;
  storage: EngineStorage;
  engine: RunEngine;
  /** A request through app.inject: its status and its body parsed as JSON (undefined when empty). */
  call(method: string, url: string, payload?: unknown): Promise<{ status: number; body: any }>;
  close(): Promise<void>;
}

export async function startHarness(opts: {
  store: 'embedded' | 'postgres';
  runTimeoutMs?: number;
  bodyLimit?: number;
  concurrency?: number;
  /** Run graphs on this many executor threads instead of the engine's thread. */
  executorThreads?: number;
  /** The executor threads end after this long without a run (--executor-idle-secs). */
  executorIdleMs?: number;
  /** Another langgraph.json than the fixture graphs'. */
  configPath?: string;
  /** The deployment's public URL (--public-url). */
  publicUrl?: string;
}): Promise<Harness> {
  const configPath = opts.configPath ?? FIXTURE_CONFIG;
  const logger = process.env.AP_TEST_LOG ? createLogger({ level: process.env.AP_TEST_LOG }) : silentLogger();
  const graphs = await loadGraphs(configPath, { logger });
  let cleanup: () => Promise<void>;
  let storage: EngineStorage;
  if (opts.store === 'postgres') {
    const db = await createTestDatabase();
    storage = await openPostgresStorage({ databaseUrl: db.url, poolSize: 10 });
    cleanup = db.drop;
  } else {
    const dir = mkdtempSync(join(tmpdir(), 'ap-as-harness-'));
    storage = openEmbeddedStorage({ dataDir: dir });
    cleanup = async () => rmSync(dir, { recursive: true, force: true });
  }
  await ensureSystemAssistants(storage, graphs);
  let threads: ThreadExecutor | undefined;
  const engine = new RunEngine({
    storage,
    graphs,
    logger,
    ...(opts.executorThreads
      ? {
          executor: (inline: RunExecutor) =>
            (threads = ThreadExecutor.start(
              opts.executorThreads!,
              { configPath, source: storage.checkpointerSource, poolSize: 4, idleReleaseMs: opts.executorIdleMs },
              logger,
              inline,
            )),
        }
      : {}),
    concurrency: opts.concurrency ?? 4,
    runTimeoutMs: opts.runTimeoutMs ?? 60_000,
  });
  const app = await buildApp({
    storage,
    graphs,
    engine,
    logger,
    bodyLimit: opts.bodyLimit,
    keepAliveMs: 200,
    ...(opts.publicUrl ? { publicUrl: opts.publicUrl } : {}),
  });
  // The suites mean to exercise the threads: wait until they are up instead of starting on the fallback.
  await threads?.whenReady();
  await engine.start();
  return {
    app,
    storage,
    engine,
    ...(threads ? { threads } : {}),
    async call(method, url, payload) {
      const res = await app.inject({ method: method as 'GET', url, payload: payload as Record<string, unknown> });
      return { status: res.statusCode, body: res.body.trim() ? JSON.parse(res.body) : undefined };
    },
    async close() {
      await engine.stop(2_000);
      await app.close();
      await storage.close();
      await cleanup();
    },
  };
}

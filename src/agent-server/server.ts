// Wires the agent server together: graphs, storage, run engine, HTTP. Listens and shuts down gracefully.
import type { FastifyInstance } from 'fastify';
import type { Logger } from '../lib/logger.ts';
import { buildApp } from './app.ts';
import type { AgentServerConfig } from './config.ts';
import { loadGraphs, type GraphRegistry } from './graphs/index.ts';
import type { RunExecutor } from './runs/executor.ts';
import { ThreadExecutor } from './runs/thread-executor.ts';
import { RunEngine } from './runs/engine.ts';
import { openEmbeddedStorage } from './storage/embedded/index.ts';
import { openPostgresStorage } from './storage/postgres/index.ts';
import type { Storage } from './storage/types.ts';

export interface RunningServer {
  app: FastifyInstance;
  url: string;
  storage: Storage;
  engine: RunEngine;
  close(): Promise<void>;
}

export async function openStorage(config: AgentServerConfig, logger: Logger): Promise<Storage> {
  if (config.databaseUrl) {
    return openPostgresStorage({ databaseUrl: config.databaseUrl, logger, poolSize: Math.max(10, config.jobsPerWorker + 10) });
  }
  return openEmbeddedStorage({ dataDir: config.dataDir });
}

/** Every graph gets its system assistant (id = uuid5 of the graph name). */
export async function ensureSystemAssistants(storage: Storage, graphs: GraphRegistry): Promise<void> {
  for (const spec of graphs.specs) {
    await storage.assistants.upsertSystem({
      assistant_id: spec.assistantId,
      graph_id: spec.graphId,
      config: {},
      context: {},
      metadata: { created_by: 'system' },
      name: spec.graphId,
      description: null,
    });
  }
}

export async function startAgentServer(config: AgentServerConfig, logger: Logger): Promise<RunningServer> {
  const graphs = await loadGraphs(config.configPath, { logger });
  const storage = await openStorage(config, logger);
  await ensureSystemAssistants(storage, graphs);
  const engine = new RunEngine({
    storage,
    graphs,
    logger,
    // Executor threads start in the background (start-up time is redeploy time); runs execute on this thread
    // until one is ready.
    ...(config.executorThreads > 0
      ? {
          executor: (inline: RunExecutor) => ThreadExecutor.start(config.executorThreads, {
            configPath: config.configPath,
            source: storage.checkpointerSource,
            poolSize: Math.max(10, config.jobsPerWorker + 10),
          }, logger, inline),
        }
      : {}),
    concurrency: config.jobsPerWorker,
    runTimeoutMs: config.jobTimeoutSecs * 1000,
    leaseMs: config.leaseSecs * 1000,
    sweepMs: Math.min(5_000, (config.leaseSecs * 1000) / 2),
  });
  const app = await buildApp({ storage, graphs, engine, logger });
  await engine.start();
  const url = await app.listen({ host: config.host, port: config.port });
  logger.info({ url, store: storage.kind, graphs: graphs.specs.map((s) => s.graphId), worker: engine.workerId },
    'agent server listening');
  let closing: Promise<void> | null = null;
  return {
    app,
    url,
    storage,
    engine,
    close() {
      closing ??= (async () => {
        await engine.stop(config.shutdownGraceSecs * 1000);
        await app.close();
        await storage.close();
      })();
      return closing;
    },
  };
}

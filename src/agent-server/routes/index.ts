// All routes of the agent server, registered on one fastify instance.
import type { FastifyInstance } from 'fastify';
import type { GraphRegistry } from '../graphs/index.ts';
import type { RunEngine } from '../runs/engine.ts';
import type { AgentService } from '../service.ts';
import type { Storage } from '../storage/types.ts';
import { assistantRoutes } from './assistants.ts';
import { runRoutes } from './runs.ts';
import { streamRoutes } from './stream.ts';
import { threadRoutes } from './threads.ts';

export interface RouteDeps {
  storage: Storage;
  graphs: GraphRegistry;
  engine: RunEngine;
  service: AgentService;
  keepAliveMs: number;
  version: string;
}

export async function registerRoutes(app: FastifyInstance, deps: RouteDeps): Promise<void> {
  app.get('/ok', async () => ({ ok: true }));
  app.get('/info', async () => ({
    version: deps.version,
    langgraph_js_version: null,
    storage: deps.storage.kind,
    graphs: deps.graphs.specs.map((s) => s.graphId),
    flags: { assistants: true, crons: false, langsmith: false, store: false },
  }));
  await app.register(assistantRoutes(deps));
  await app.register(threadRoutes(deps));
  await app.register(runRoutes(deps));
  await app.register(streamRoutes(deps));
}

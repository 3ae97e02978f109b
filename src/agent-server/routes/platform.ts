// Operations routes and hooks of the platform: GET /metrics (Prometheus), GET /docs (Swagger UI over
// /openapi.json), the active-streams count, and the refusal of runs on a graph that failed to load.
import swaggerUi from '@fastify/swagger-ui';
import type { FastifyInstance } from 'fastify';
import { Gauge, Registry, collectDefaultMetrics } from 'prom-client';
import { GraphUnavailableError } from '../graphs/index.ts';
import type { RouteDeps } from './deps.ts';

const STREAM_ROUTES = new Set([
  '/threads/:thread_id/runs/stream',
  '/runs/stream',
  '/threads/:thread_id/runs/:run_id/stream',
]);
const RUN_CREATE_ROUTES = new Set([
  '/threads/:thread_id/runs',
  '/threads/:thread_id/runs/wait',
  '/threads/:thread_id/runs/stream',
  '/runs',
  '/runs/wait',
  '/runs/stream',
  '/runs/batch',
]);
const UUID_RE = /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/i;

/** Busy threads looked at per scrape for the queue gauges (pending runs always sit on busy threads). */
const QUEUE_SCAN_THREADS = 1_000;

/** Process metrics (CPU, memory, event loop, GC): one collector set per process, however many apps it builds. */
let processRegistry: Registry | undefined;
function processMetrics(): Registry {
  if (!processRegistry) {
    processRegistry = new Registry();
    collectDefaultMetrics({ register: processRegistry });
  }
  return processRegistry;
}

/** Call before the other routes are registered: the hooks must reach them. */
export async function registerPlatformRoutes(app: FastifyInstance, deps: RouteDeps): Promise<void> {
  const { service, engine, graphs } = deps;
  const registry = new Registry();

  let openStreams = 0;
  new Gauge({
    name: 'agentplane_active_streams',
    help: 'Server-sent event streams of runs open on this process',
    registers: [registry],
    collect() {
      this.set(openStreams);
    },
  });
  new Gauge({
    name: 'agentplane_runs_running',
    help: 'Runs executing in this process',
    registers: [registry],
    collect() {
      this.set(engine.runningCount);
    },
  });
  // The queue is shared by every process on the store, so both gauges read it from storage at scrape time.
  const queue = async () => {
    const busy = await service.threads.search({ status: 'busy', limit: QUEUE_SCAN_THREADS, offset: 0 });
    let pending = 0;
    let oldest = Infinity;
    for (const t of busy) {
      const runs = await service.runs.list(t.thread_id, { limit: 1_000, offset: 0, status: 'pending' });
      pending += runs.length;
      for (const r of runs) oldest = Math.min(oldest, Date.parse(r.created_at));
    }
    return { pending, oldestAgeSecs: Number.isFinite(oldest) ? Math.max(0, (Date.now() - oldest) / 1000) : 0 };
  };
  let scan: Promise<{ pending: number; oldestAgeSecs: number }> | null = null;
  const queueOnce = () =>
    (scan ??= queue()
      .catch(() => ({ pending: Number.NaN, oldestAgeSecs: Number.NaN }))
      .finally(() => setImmediate(() => (scan = null))));
  new Gauge({
    name: 'agentplane_runs_pending',
    help: 'Runs waiting in the queue (all processes sharing the store)',
    registers: [registry],
    async collect() {
      this.set((await queueOnce()).pending);
    },
  });
  new Gauge({
    name: 'agentplane_runs_oldest_pending_age_seconds',
    help: 'Age of the oldest pending run (0 when none)',
    registers: [registry],
    async collect() {
      this.set((await queueOnce()).oldestAgeSecs);
    },
  });

  app.addHook('onRequest', (req, reply, done) => {
    if (req.method !== 'OPTIONS' && STREAM_ROUTES.has(req.routeOptions.url ?? '')) {
      openStreams++;
      reply.raw.once('close', () => openStreams--);
    }
    done();
  });

  const failed = Object.keys(graphs.failures);
  if (failed.length) {
    const isFailed = (graphId: string) => graphs.failures[graphId] !== undefined;
    app.addHook('preHandler', async (req) => {
      if (req.method !== 'POST' || !RUN_CREATE_ROUTES.has(req.routeOptions.url ?? '')) return;
      const bodies = Array.isArray(req.body) ? req.body : [req.body];
      for (const body of bodies) {
        const id = (body as { assistant_id?: unknown } | undefined)?.assistant_id;
        if (typeof id !== 'string') continue;
        let graphId: string | undefined;
        if (isFailed(id)) graphId = id;
        else if (UUID_RE.test(id)) graphId = (await service.assistants.get(id))?.graph_id;
        if (graphId && isFailed(graphId)) throw new GraphUnavailableError(graphId, graphs.failures[graphId]!);
      }
    });
  }

  await app.register(async (scope) => {
    scope.get('/metrics', { schema: { hide: true } }, async (_req, reply) => {
      const run = deps.runMetrics;
      const merged = Registry.merge([processMetrics(), registry, ...(run ? [run.registry] : [])]);
      return reply.type(merged.contentType).send(await merged.metrics());
    });
    await scope.register(swaggerUi, { routePrefix: '/docs' });
  });
}

// All routes of the agent server, registered on one fastify instance.
import type { FastifyInstance } from 'fastify';
import { z } from 'zod';
import { ValidationError } from '../../lib/errors.ts';
import { assistantRoutes } from './assistants.ts';
import { cronRoutes } from './crons.ts';
import { findInputProblem } from './input-guard.ts';
import { internalRoutes } from './internal.ts';
import { a2aRoutes } from './a2a.ts';
import { mcpRoutes } from './mcp.ts';
import { registerPlatformRoutes } from './platform.ts';
import { runRoutes } from './runs.ts';
import { protocolRoutes } from './protocol.ts';
import { storeRoutes } from './store.ts';
import { streamRoutes } from './stream.ts';
import { threadRoutes } from './threads.ts';
import { uiRoutes } from './ui.ts';
import { NO_UI } from '../graphs/ui.ts';
import type { RouteDeps } from './deps.ts';

export type { RouteDeps } from './deps.ts';

/** GET /ok: check_db is 0 or 1, as on the platform (anything else is a 422, not a silent skip). */
const OkQuery = z.object({
  check_db: z
    .enum(['0', '1'])
    .default('0')
    .transform((v) => v === '1'),
  activity: z
    .enum(['0', '1'])
    .default('0')
    .transform((v) => v === '1'),
});

/**
 * activity=1 (the platform's idle policy on a cluster, docs/kubernetes.md#idle-deployments-sleep): the requests open
 * and the last one's time, and what the store holds for later. Counts and times only, nothing of any thread; a store
 * that cannot be read says null there, which keeps the deployment awake. Served only to the bearer of the
 * deployment's activity token (platform/activity.ts).
 */
async function activityOf(deps: RouteDeps) {
  const now = deps.activity?.();
  const work = await deps.pendingWork?.().catch(() => undefined);
  return {
    open_requests: now?.open ?? null,
    last_request_at: now ? new Date(now.lastMs).toISOString() : null,
    active_runs: work?.activeRuns ?? null,
    next_due_at: work ? (work.nextDueMs === null ? null : new Date(work.nextDueMs).toISOString()) : null,
    store_read: work !== undefined,
  };
}

export async function registerRoutes(app: FastifyInstance, deps: RouteDeps): Promise<void> {
  // Every route's path, query and parsed body pass one walk before their schemas see them (see input-guard.ts):
  // NUL characters, lone surrogates and over-deep JSON are refused with 422 naming the field.
  // Callback style: an async hook costs every request a promise and a microtask turn.
  app.addHook('preValidation', (req, _reply, done) => {
    const problem =
      findInputProblem(req.params, 'params') ??
      findInputProblem(req.query, 'querystring') ??
      (req.body === undefined ? null : findInputProblem(req.body, 'body'));
    done(problem ? new ValidationError(problem) : undefined);
  });
  await registerPlatformRoutes(app, deps);
  // check_db=1 (the platform's health probe) also asks the database: a store that does not answer is a 503 naming
  // it, so a load balancer can take this replica out while the process itself is fine.
  app.get('/ok', { schema: { querystring: OkQuery } }, async (req, reply) => {
    // Validated (and transformed) by OkQuery; this plain instance does not carry the zod types.
    const query = req.query as z.infer<typeof OkQuery>;
    if (query.activity) {
      // Never for whoever reaches /ok (the Ingress, another workspace's pod): only with this deployment's token.
      if (!deps.activityCredential)
        return reply.code(404).send({ detail: 'activity is not served: the server has no --activity-token-file' });
      if (!(await deps.activityCredential(req.headers.authorization)))
        return reply
          .code(401)
          .header('www-authenticate', 'Bearer')
          .send({ detail: "activity needs this deployment's activity token (Authorization: Bearer)" });
      return { ok: true, activity: await activityOf(deps) };
    }
    if (!query.check_db) return { ok: true };
    try {
      await deps.service.ping();
    } catch (err) {
      req.log.warn({ err }, 'health check: the database did not answer');
      const reason = err instanceof Error ? err.message : String(err);
      return reply.code(503).send({
        ok: false,
        detail: `database (${deps.service.kind}) unreachable: ${reason}`,
        services: { database: 'unhealthy' },
      });
    }
    return { ok: true, services: { database: 'healthy' } };
  });
  app.get('/info', async () => ({
    version: deps.version,
    langgraph_js_version: null,
    storage: deps.service.kind,
    graphs: deps.graphs.specs.map((s) => s.graphId),
    graph_errors: deps.graphs.failures,
    ...(Object.keys(deps.ui?.failures ?? {}).length ? { ui_errors: deps.ui!.failures } : {}),
    // strict_resume: a resume naming an interrupt no longer waiting fails (the SDK's strictResume);
    // stream_namespaces: run streams take `namespace` and send only those namespaces' events.
    flags: {
      assistants: true,
      crons: true,
      langsmith: false,
      store: true,
      strict_resume: true,
      stream_namespaces: true,
    },
  }));
  await app.register(assistantRoutes(deps));
  await app.register(threadRoutes(deps));
  await app.register(runRoutes(deps));
  await app.register(streamRoutes(deps));
  await app.register(protocolRoutes(deps));
  await app.register(storeRoutes(deps));
  await app.register(uiRoutes({ ...deps, ui: deps.ui ?? NO_UI }));
  await app.register(cronRoutes(deps));
  await app.register(mcpRoutes(deps, app));
  await app.register(a2aRoutes(deps, app));
  if (deps.truncate) await app.register(internalRoutes(deps.truncate));
}

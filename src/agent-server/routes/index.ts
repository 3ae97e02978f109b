// All routes of the agent server, registered on one fastify instance.
import type { FastifyInstance } from 'fastify';
import { ValidationError } from '../../lib/errors.ts';
import { assistantRoutes } from './assistants.ts';
import { cronRoutes } from './crons.ts';
import { findInputProblem } from './input-guard.ts';
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
  app.get('/ok', async () => ({ ok: true }));
  app.get('/info', async () => ({
    version: deps.version,
    langgraph_js_version: null,
    storage: deps.service.kind,
    graphs: deps.graphs.specs.map((s) => s.graphId),
    graph_errors: deps.graphs.failures,
    ...(Object.keys(deps.ui?.failures ?? {}).length ? { ui_errors: deps.ui!.failures } : {}),
    flags: { assistants: true, crons: true, langsmith: false, store: true },
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
}

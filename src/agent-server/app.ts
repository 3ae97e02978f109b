// The agent server's fastify instance, built from injected dependencies; it never listens (server.ts does).
import fastify, { LogController, type FastifyBaseLogger, type FastifyInstance, type FastifyReply } from 'fastify';
import swagger, { type SwaggerTransformObject } from '@fastify/swagger';
import { jsonSchemaTransform, serializerCompiler, validatorCompiler } from 'fastify-type-provider-zod';
import { installErrorAnswers, installJsonBodyParser, zodSchemaController } from '../lib/http.ts';
import { refuseForeignKeys, requireApiKey, type KeyVerifier } from './http/api-keys.ts';
import { AuthHttpError } from './auth/custom.ts';
import { authenticateRequest, identifyCaller, installCustomAuth } from './http/auth-hooks.ts';
import { installCors } from './http/cors.ts';
import { mountCustomApp } from './http/custom-app.ts';
import { loadServerExtensions, type ServerExtensions } from './http/extensions.ts';
import { disabledGroup, installDisabledGroups, prefixRewriter } from './http/settings.ts';
import type { Logger } from '../lib/logger.ts';
import type { GraphRegistry } from './graphs/index.ts';
import type { UiBundles } from './graphs/ui.ts';
import { installWebSockets } from './protocol/ws-credentials.ts';
import { registerRoutes } from './routes/index.ts';
import type { RunEngine } from './runs/engine.ts';
import type { WebhookPolicy } from './runs/webhook-policy.ts';
import { trackActivity, type ActivityCredential } from './platform/activity.ts';
import { runMetricsOf } from './runs/run-metrics.ts';
import type { PendingWork } from './storage/pending-work.ts';
import { createAgentService } from './services/index.ts';
import { createTruncateService } from './services/truncate.ts';
import type { Storage } from './storage/types.ts';

export interface AppDeps {
  storage: Storage;
  graphs: GraphRegistry;
  engine: RunEngine;
  logger: Logger;
  /** Largest accepted request body, bytes. */
  bodyLimit?: number;
  keepAliveMs?: number;
  /** A stream client that takes nothing for this long is disconnected (default 60 s). */
  streamStallMs?: number;
  version?: string;
  /** When set, every request but /ok needs an X-Api-Key this verifier accepts (unless custom auth replaces it). */
  apiKeys?: KeyVerifier;
  /** Where run webhooks may point; default: public hosts only. */
  webhookPolicy?: WebhookPolicy;
  /** Custom auth, custom routes and HTTP settings; read from the graphs' langgraph.json when not given. */
  extensions?: ServerExtensions;
  /** Bundled generative UI components (langgraph.json "ui"). */
  ui?: UiBundles;
  /** The deployment's public URL, named by the A2A agent cards (else each request's host). */
  publicUrl?: string;
  /** Serve POST /internal/truncate (--test-truncate): for API test suites, never on a deployment. */
  testTruncate?: boolean;
  /** What the store holds for later (runs, due crons), for GET /ok?activity=1; without it that answer says null. */
  pendingWork?: () => Promise<PendingWork>;
  /** Who may read GET /ok?activity=1 (--activity-token-file); without it that answer is a 404. */
  activityCredential?: ActivityCredential;
}

/**
 * auth.openapi.paths: per-operation security requirements ({"/threads/{thread_id}": {"get": [{"bearer": []}]}}),
 * laid over the generated document; a path or method the server does not have is left out.
 */
function withRouteSecurity(paths: NonNullable<NonNullable<ServerExtensions['openapi']>['paths']>) {
  type Operation = { security?: unknown };
  type Doc = { paths?: Record<string, Record<string, Operation | undefined> | undefined> };
  return (documentObject: Parameters<SwaggerTransformObject>[0]) => {
    const doc = (
      'openapiObject' in documentObject ? documentObject.openapiObject : documentObject.swaggerObject
    ) as Doc;
    for (const [path, methods] of Object.entries(paths)) {
      const item = doc.paths?.[path];
      if (!item) continue;
      for (const [method, requirements] of Object.entries(methods)) {
        const operation = item[method.toLowerCase()];
        if (operation) operation.security = requirements;
      }
    }
    return doc as ReturnType<SwaggerTransformObject>;
  };
}

export async function buildApp(deps: AppDeps): Promise<FastifyInstance> {
  const ext = deps.extensions ?? (await loadServerExtensions(deps.graphs.configPath, deps.logger));
  const bodyLimit = deps.bodyLimit ?? 10 * 1024 * 1024;
  const rewriteUrl = prefixRewriter(ext.http.mount_prefix);
  const app = fastify({
    ...(rewriteUrl ? { rewriteUrl } : {}),
    schemaController: zodSchemaController,
    loggerInstance: deps.logger as FastifyBaseLogger,
    // Per-request log lines would dominate the hot path; runs log with their own context instead.
    logController: new LogController({ disableRequestLogging: true }),
    bodyLimit,
    // Empty JSON bodies are fine (the SDK posts none on copy/cancel).
    return503OnClosing: true,
    // Closing comes after the runs' grace period: what is still open then (a thread stream never ends by itself, a
    // run stream may follow a run handed back to the queue) is cut, so its client reconnects elsewhere (Last-Event-ID)
    // and the process exits instead of waiting on it.
    forceCloseConnections: true,
    // Requests fastify refuses before routing (a path that is not valid UTF-8) keep the {"detail"} shape.
    frameworkErrors: (err, _req, reply) => void (reply as FastifyReply).code(400).send({ detail: err.message }),
  });
  // First hook of all: every request counts, whichever route, custom app or auth answers it.
  const activity = trackActivity(app);
  app.setValidatorCompiler(validatorCompiler);
  app.setSerializerCompiler(serializerCompiler);
  // Route results are plain JSON already (graph output goes through toPlain), so no replacer on the hot path.
  app.setReplySerializer((payload) => JSON.stringify(payload));
  installJsonBodyParser(app);
  installErrorAnswers(app, {
    invalid: (issues) => {
      const errors = issues.map((i) => ({ loc: [i.where, ...i.path], msg: i.message, type: i.keyword }));
      const fields = errors.map((e) => e.loc.join('.')).join(', ');
      return { detail: `Invalid request: ${fields}: ${errors[0]?.msg ?? ''}`, errors };
    },
    malformed: (message) => ({ detail: `Malformed JSON body: ${message}` }),
    decorate: (err, reply) => {
      if (err instanceof AuthHttpError) reply.headers(err.headers);
    },
    logUnexpected: (err, req) => req.log.error({ err }, `request failed: ${err.message}`),
  });

  const service = createAgentService({
    storage: deps.storage,
    graphs: deps.graphs,
    engine: deps.engine,
    webhookPolicy: deps.webhookPolicy,
    configurableHeaders: ext.http.configurable_headers,
  });
  // onRequest order: CORS (preflights answered without auth), platform API key, the custom app (its routes
  // answer unauthenticated unless http.enable_custom_route_auth, as on the platform), custom auth, disabled groups;
  // with http.middleware_order "auth_first", custom auth comes before the custom app on built-in routes.
  await installWebSockets(app, ext.cors);
  installCors(app, ext.cors);
  if (deps.apiKeys) refuseForeignKeys(app, deps.apiKeys);
  // Custom auth replaces the platform's API key, as on the hosted platform.
  if (deps.apiKeys && !ext.auth) requireApiKey(app, deps.apiKeys);
  if (deps.apiKeys && ext.auth) {
    deps.logger.info('custom auth from langgraph.json decides who may call: the platform API key is not required');
    app.addHook('onClose', async () => deps.apiKeys!.close());
  }
  const customAuth = ext.auth;
  // Custom auth runs ahead of everything when no custom route is exempt from it.
  const authEverything = !ext.app || ext.http.enable_custom_route_auth === true;
  const authorize = customAuth
    ? installCustomAuth(app, { auth: customAuth, service, authenticateOnRequest: authEverything })
    : undefined;
  if (customAuth && !authEverything && ext.http.middleware_order === 'auth_first') {
    // http.middleware_order "auth_first": a built-in route is authenticated before the custom app's middleware sees
    // the request, so a caller it refuses never reaches that middleware. Other paths may be custom routes, which stay
    // open: the caller is identified when possible, and refused after the app only if no custom route answered.
    app.addHook('onRequest', async (req, reply) => {
      if (reply.sent) return;
      if (req.is404) await identifyCaller(customAuth, req);
      else await authenticateRequest(customAuth, req, reply);
    });
  }
  if (ext.app) {
    mountCustomApp(app, ext.app, {
      bodyLimit,
      ...(customAuth && !authEverything
        ? { afterFallthrough: (req, reply) => authenticateRequest(customAuth, req, reply) }
        : {}),
    });
  }
  installDisabledGroups(app, ext.http);

  const security = ext.openapi;
  await app.register(swagger, {
    openapi: {
      info: { title: 'agentplane agent server', version: deps.version ?? '0.1.0' },
      ...(security?.securitySchemes ? { components: { securitySchemes: security.securitySchemes as never } } : {}),
      ...(security?.security ? { security: security.security } : {}),
    },
    transform: jsonSchemaTransform,
    ...(security?.paths ? { transformObject: withRouteSecurity(security.paths) } : {}),
  });
  app.get('/openapi.json', { schema: { hide: true } }, async () => app.swagger());

  const runMetrics = runMetricsOf(deps.storage);
  await registerRoutes(app, {
    graphs: deps.graphs,
    engine: deps.engine,
    service,
    keepAliveMs: deps.keepAliveMs ?? 5_000,
    ...(deps.streamStallMs !== undefined ? { streamStallMs: deps.streamStallMs } : {}),
    version: deps.version ?? '0.1.0',
    ...(runMetrics ? { runMetrics } : {}),
    ...(deps.ui ? { ui: deps.ui } : {}),
    ...(authorize ? { authorize } : {}),
    ...(ext.http.mount_prefix ? { mountPrefix: ext.http.mount_prefix } : {}),
    ...(deps.publicUrl ? { publicUrl: deps.publicUrl } : {}),
    ...(deps.webhookPolicy ? { webhookPolicy: deps.webhookPolicy } : {}),
    ...(deps.testTruncate ? { truncate: createTruncateService({ storage: deps.storage }) } : {}),
    activity,
    ...(deps.pendingWork ? { pendingWork: deps.pendingWork } : {}),
    ...(deps.activityCredential ? { activityCredential: deps.activityCredential } : {}),
    // A custom app may answer the API's own paths before its routes: then MCP and A2A go through app.inject.
    ...(ext.app ? {} : { innerRoutes: { disabled: (routeUrl: string) => disabledGroup(ext.http, routeUrl) !== null } }),
  });
  return app;
}

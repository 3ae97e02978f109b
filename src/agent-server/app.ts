// The agent server's fastify instance, built from injected dependencies; it never listens (server.ts does).
import fastify, { LogController, type FastifyBaseLogger, type FastifyError, type FastifyInstance, type FastifyReply } from 'fastify';
import swagger from '@fastify/swagger';
import {
  hasZodFastifySchemaValidationErrors,
  jsonSchemaTransform,
  serializerCompiler,
  validatorCompiler,
} from 'fastify-type-provider-zod';
import { isAppError } from '../lib/errors.ts';
import { requireApiKey, type KeyVerifier } from './auth/api-keys.ts';
import { AuthHttpError } from './auth/custom.ts';
import { authenticateRequest, installCustomAuth } from './auth/hooks.ts';
import { installCors } from './http/cors.ts';
import { mountCustomApp } from './http/custom-app.ts';
import { loadServerExtensions, type ServerExtensions } from './http/extensions.ts';
import { installDisabledGroups, prefixRewriter } from './http/settings.ts';
import type { Logger } from '../lib/logger.ts';
import type { GraphRegistry } from './graphs/index.ts';
import { registerRoutes } from './routes/index.ts';
import type { RunEngine } from './runs/engine.ts';
import { createAgentService } from './service.ts';
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
  /** Custom auth, custom routes and HTTP settings; read from the graphs' langgraph.json when not given. */
  extensions?: ServerExtensions;
}

export async function buildApp(deps: AppDeps): Promise<FastifyInstance> {
  const ext = deps.extensions ?? (await loadServerExtensions(deps.graphs.configPath, deps.logger));
  const bodyLimit = deps.bodyLimit ?? 10 * 1024 * 1024;
  const rewriteUrl = prefixRewriter(ext.http.mount_prefix);
  const app = fastify({
    ...(rewriteUrl ? { rewriteUrl } : {}),
    loggerInstance: deps.logger as FastifyBaseLogger,
    // Per-request log lines would dominate the hot path; runs log with their own context instead.
    logController: new LogController({ disableRequestLogging: true }),
    bodyLimit,
    // Empty JSON bodies are fine (the SDK posts none on copy/cancel).
    return503OnClosing: true,
    // Requests fastify refuses before routing (a path that is not valid UTF-8) keep the {"detail"} shape.
    frameworkErrors: (err, _req, reply) => void (reply as FastifyReply).code(400).send({ detail: err.message }),
  });
  app.setValidatorCompiler(validatorCompiler);
  app.setSerializerCompiler(serializerCompiler);
  // Route results are plain JSON already (graph output goes through toPlain), so no replacer on the hot path.
  app.setReplySerializer((payload) => JSON.stringify(payload));
  // An empty body with a JSON content type reads as "no body" instead of a parse error.
  app.addContentTypeParser('application/json', { parseAs: 'string' }, (_req, body, done) => {
    const text = (body as string).trim();
    if (!text) return done(null, undefined);
    try {
      done(null, JSON.parse(text));
    } catch (err) {
      const e = err as FastifyError;
      e.statusCode = 422;
      done(e, undefined);
    }
  });

  app.setErrorHandler((err: FastifyError, req, reply) => {
    if (hasZodFastifySchemaValidationErrors(err)) {
      const where = err.validationContext ?? 'body';
      const detail = err.validation.map((v) => ({
        loc: [where, ...v.instancePath.split('/').filter(Boolean)],
        msg: v.message,
        type: v.keyword,
      }));
      const fields = detail.map((d) => d.loc.join('.')).join(', ');
      return reply.code(422).send({ detail: `Invalid request: ${fields}: ${detail[0]?.msg ?? ''}`, errors: detail });
    }
    if (err instanceof AuthHttpError) reply.headers(err.headers);
    if (isAppError(err)) return reply.code(err.status).send({ detail: err.detail });
    if (err instanceof SyntaxError || err.statusCode === 422) {
      return reply.code(422).send({ detail: `Malformed JSON body: ${err.message}` });
    }
    if (err.statusCode && err.statusCode >= 400 && err.statusCode < 500) {
      return reply.code(err.statusCode).send({ detail: err.message });
    }
    req.log.error({ err }, `request failed: ${err.message}`);
    return reply.code(500).send({ detail: 'Internal server error' });
  });
  app.setNotFoundHandler((req, reply) => reply.code(404).send({ detail: `Not found: ${req.method} ${req.originalUrl}` }));

  const service = createAgentService({ storage: deps.storage, graphs: deps.graphs, engine: deps.engine });
  // onRequest order: CORS (preflights answered without auth), platform API key, the custom app (its routes
  // answer unauthenticated unless http.enable_custom_route_auth, as on the platform), custom auth, disabled groups.
  installCors(app, ext.cors);
  // Custom auth replaces the platform's API key, as on the hosted platform.
  if (deps.apiKeys && !ext.auth) requireApiKey(app, deps.apiKeys);
  if (deps.apiKeys && ext.auth) {
    deps.logger.info('custom auth from langgraph.json decides who may call: the platform API key is not required');
    app.addHook('onClose', async () => deps.apiKeys!.close());
  }
  const customAuth = ext.auth;
  const authFirst = !ext.app || ext.http.enable_custom_route_auth === true;
  if (customAuth) {
    installCustomAuth(app, { auth: customAuth, storage: deps.storage, service, authenticateOnRequest: authFirst });
  }
  if (ext.app) {
    mountCustomApp(app, ext.app, {
      bodyLimit,
      ...(customAuth && !authFirst ? { afterFallthrough: (req, reply) => authenticateRequest(customAuth, req, reply) } : {}),
    });
  }
  installDisabledGroups(app, ext.http);

  await app.register(swagger, {
    openapi: { info: { title: 'agentplane agent server', version: deps.version ?? '0.1.0' } },
    transform: jsonSchemaTransform,
  });
  app.get('/openapi.json', { schema: { hide: true } }, async () => app.swagger());

  await registerRoutes(app, {
    storage: deps.storage,
    graphs: deps.graphs,
    engine: deps.engine,
    service,
    keepAliveMs: deps.keepAliveMs ?? 5_000,
    ...(deps.streamStallMs !== undefined ? { streamStallMs: deps.streamStallMs } : {}),
    version: deps.version ?? '0.1.0',
  });
  return app;
}

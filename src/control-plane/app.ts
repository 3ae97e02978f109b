// The control plane's fastify instance, built from injected dependencies; it never listens (server.ts does).
// `createControlPlane` is also what the one-machine `dev` command embeds.
import fastify, { type FastifyBaseLogger, type FastifyError, type FastifyInstance } from 'fastify';
import swagger from '@fastify/swagger';
import swaggerUi from '@fastify/swagger-ui';
import {
  hasZodFastifySchemaValidationErrors,
  jsonSchemaTransform,
  serializerCompiler,
  validatorCompiler,
  type ZodTypeProvider,
} from 'fastify-type-provider-zod';
import { isAppError } from '../lib/errors.ts';
import type { Logger } from '../lib/logger.ts';
import { redactUrlsIn } from '../lib/redact.ts';
import { createAuthenticator, type BootstrapKey } from './auth/keys.ts';
import { registerConsole } from './console.ts';
import { apiKeyRoutes } from './routes/v2/api-keys.ts';
import { deploymentRoutes } from './routes/v2/deployments.ts';
import { createDeploymentService } from './services/deployments.ts';
import type { InputPolicy } from './services/input-rules.ts';
import type { ControlPlaneStore } from './store/types.ts';

export interface ControlPlaneDeps {
  store: ControlPlaneStore;
  logger: Logger;
  /** Keys accepted without being stored (e.g. AGENTPLANE_BOOTSTRAP_API_KEY). */
  bootstrapKeys?: BootstrapKey[];
  /** Bounds and custom domains a deployment may ask for (defaults: DEFAULT_INPUT_POLICY). */
  policy?: InputPolicy;
  version?: string;
  /** Called after a key was created or revoked through the API (e.g. to publish key hashes to the agents now). */
  onKeysChanged?: () => void;
  /** Folder of the built web console (default: dist/console of this package); false serves no console. */
  consoleDir?: string | false;
}

const PREFIXES = ['', '/api-host'];

export async function createControlPlane(deps: ControlPlaneDeps): Promise<FastifyInstance> {
  // Secrets may total 1 MiB (a 422 names the one that crosses it); the body around them needs some room beyond that.
  const app = fastify({ loggerInstance: deps.logger as FastifyBaseLogger, bodyLimit: 2 * 1024 * 1024 });
  app.setValidatorCompiler(validatorCompiler);
  app.setSerializerCompiler(serializerCompiler);
  // Clients often send a JSON content type with no body on POST .../redeploy and DELETE: read that as no body.
  app.addContentTypeParser('application/json', { parseAs: 'string' }, (_req, body, done) => {
    const text = (body as string).trim();
    if (!text) return done(null, undefined);
    try {
      done(null, JSON.parse(text));
    } catch (err) {
      done(err as Error, undefined);
    }
  });
  // Request bodies may hold secret values: log only method and path.
  app.addHook('onRequest', async (req) => {
    req.log = req.log.child({ reqId: req.id });
  });

  app.setErrorHandler((err: FastifyError, req, reply) => {
    if (hasZodFastifySchemaValidationErrors(err)) {
      // FastAPI's names for where the bad value was (the reference API's 422 bodies): query, path, header, body.
      const ctx = err.validationContext ?? 'body';
      const where = ({ querystring: 'query', params: 'path', headers: 'header' } as Record<string, string>)[ctx] ?? ctx;
      const detail = err.validation.map((v) => ({
        loc: [where, ...v.instancePath.split('/').filter(Boolean).map((p: string) => (/^\d+$/.test(p) ? Number(p) : p))],
        msg: v.message ?? 'invalid',
        type: v.keyword,
      }));
      return reply.code(422).send({ detail });
    }
    if (isAppError(err)) return reply.code(err.status).send({ detail: err.detail });
    if (err instanceof SyntaxError || err.code === 'FST_ERR_CTP_INVALID_JSON_BODY') {
      return reply.code(422).send({ detail: [{ loc: ['body'], msg: `malformed JSON: ${err.message}`, type: 'json_invalid' }] });
    }
    if (err.statusCode && err.statusCode >= 400 && err.statusCode < 500) {
      return reply.code(err.statusCode).send({ detail: err.message });
    }
    req.log.error({ err: { message: redactUrlsIn(err.message), stack: err.stack && redactUrlsIn(err.stack) } }, 'request failed');
    return reply.code(500).send({ detail: 'Internal server error' });
  });
  app.setNotFoundHandler((req, reply) => reply.code(404).send({ detail: `Not found: ${req.method} ${req.url.split('?')[0]}` }));

  await app.register(swagger, {
    openapi: {
      info: { title: 'agentplane control plane', version: deps.version ?? '0.1.0' },
      components: {
        securitySchemes: {
          apiKey: { type: 'apiKey', in: 'header', name: 'X-Api-Key' },
          tenantId: { type: 'apiKey', in: 'header', name: 'X-Tenant-Id' },
        },
      },
    },
    transform: jsonSchemaTransform,
  });
  await app.register(swaggerUi, { routePrefix: '/docs' });
  app.get('/openapi.json', { schema: { hide: true } }, async () => app.swagger());

  if (deps.consoleDir !== false) registerConsole(app, { dir: deps.consoleDir, prefixes: PREFIXES });

  const authenticate = createAuthenticator(deps.store, deps.bootstrapKeys);
  const service = createDeploymentService({ store: deps.store, logger: deps.logger.child({ component: 'deployments' }), policy: deps.policy });

  for (const prefix of PREFIXES) {
    app.get(`${prefix}/ok`, { schema: { hide: prefix !== '' } }, async () => ({ ok: true }));
    await app.register(
      async (v2) => {
        v2.addHook('onRequest', async (req) => {
          req.principal = await authenticate(header(req.headers['x-api-key']), header(req.headers['x-tenant-id']));
        });
        await v2.withTypeProvider<ZodTypeProvider>().register(deploymentRoutes(service));
        await v2.withTypeProvider<ZodTypeProvider>().register(apiKeyRoutes(deps.store, deps.onKeysChanged ?? (() => undefined)));
      },
      { prefix: `${prefix}/v2` },
    );
  }
  return app;
}

function header(v: string | string[] | undefined): string | undefined {
  return Array.isArray(v) ? v[0] : v;
}

// The control plane's fastify instance, built from injected dependencies; it never listens (server.ts does).
// `createControlPlane` is also what the one-machine `dev` command embeds.
import fastify, { LogController, type FastifyBaseLogger, type FastifyInstance } from 'fastify';
import swagger from '@fastify/swagger';
import swaggerUi from '@fastify/swagger-ui';
import {
  jsonSchemaTransform,
  serializerCompiler,
  validatorCompiler,
  type ZodTypeProvider,
} from 'fastify-type-provider-zod';
import { installErrorAnswers, installJsonBodyParser, zodSchemaController } from '../lib/http.ts';
import type { Logger } from '../lib/logger.ts';
import { redactUrlsIn } from '../lib/redact.ts';
import { createAuthenticator, type Authenticator, type BootstrapKey } from './api-keys/keys.ts';
import { registerConsole } from './console.ts';
import { integrationHookRoutes, integrationRoutes } from './routes/v1/integrations.ts';
import { authCallbackRoutes, authRoutes } from './routes/v2/auth.ts';
import { apiKeyRoutes } from './routes/v2/api-keys.ts';
import { deploymentRoutes } from './routes/v2/deployments.ts';
import { listenerRoutes } from './routes/v2/listeners.ts';
import {
  registryTokenRoutes,
  sourceFetchRoutes,
  sourceUploadPutRoutes,
  sourceUploadRoutes,
} from './routes/v2/source-uploads.ts';
import { createRegistryTokens, type RegistryTokenOptions } from './services/registry-tokens/index.ts';
import { projectLogRoutes } from './routes/v1/projects.ts';
import { createSourceUploads, type SourceUploadOptions } from './services/source-uploads/index.ts';
import { referencedTarballs } from './services/source-uploads/references.ts';
import { createListenerService } from './services/listeners/index.ts';
import { ForbiddenError, NotFoundError } from '../lib/errors.ts';
import type { LogLimits } from '../lib/log-limits.ts';
import { createDeploymentService } from './services/deployments/index.ts';
import { createIntegrationService } from './services/integrations/index.ts';
import type { GitHubApp } from '../git/github-app.ts';
import { createPushWebhooks } from './services/integrations-webhooks.ts';
import { wireAuthService, type AuthServiceOptions } from './services/oauth/setup.ts';
import type { InputPolicy } from '../api/input-rules.ts';
import type { RepoPolicy } from '../git/repo-url.ts';
import { createQuotas, type QuotaLimits } from './services/quotas.ts';
import type { PlatformState } from '../state/types.ts';

export interface ControlPlaneDeps {
  store: PlatformState;
  logger: Logger;
  /** Keys accepted without being stored (e.g. AGENTPLANE_BOOTSTRAP_API_KEY). */
  bootstrapKeys?: BootstrapKey[];
  /** Bounds and custom domains a deployment may ask for (defaults: DEFAULT_INPUT_POLICY). */
  policy?: InputPolicy;
  /**
   * Namespace a tenant's agent pods run in, where the ServiceAccounts and Secrets a deployment names must be (a
   * namespace per tenant); default: the store's namespace.
   */
  referenceNamespace?: (tenant: string) => string;
  version?: string;
  /** Called after a key was created or revoked through the API (e.g. to publish key hashes to the agents now). */
  onKeysChanged?: () => void;
  /** Called after a deployment was created (its tenant's agents need their key set, e.g. published now). */
  onDeploymentCreated?: () => void;
  /** Folder of the built web console (default: dist/console of this package); false serves no console. */
  consoleDir?: string | false;
  /** The control plane's GitHub App (GitHub integrations, their webhook); undefined: none configured. */
  github?: GitHubApp;
  /** Auth Service v2 settings (encryption keys, deployment token key, public URL); see services/oauth/setup.ts. */
  auth?: AuthServiceOptions;
  /** What a listener's pushed log may store per revision and type (default: DEFAULT_LOG_LIMITS, as local builds). */
  listenerLogLimits?: LogLimits;
  /** Per-workspace quotas (default: DEFAULT_QUOTAS). */
  quotas?: QuotaLimits;
  /** The local runtime's repo_url rules when builds run on this machine (dev): local paths are checked up front. */
  localRepos?: RepoPolicy;
  /** Clock of the hourly quotas, milliseconds since the epoch (tests move it). */
  now?: () => number;
  /**
   * Where uploaded source tarballs (internal_source, `langgraph deploy`) are stored and the key that signs upload
   * URLs; undefined: upload URLs are refused with a 503 that says why.
   */
  sourceUploads?: SourceUploadOptions;
  /**
   * The key, issuer and service of the build registry's tokens and its prefix: push tokens for `langgraph deploy`
   * and the registry's token endpoint; undefined: push tokens are refused with a 400 that says why.
   */
  registryTokens?: RegistryTokenOptions;
  /** The build registry prefix (default: the registry tokens' one): revisions' images under it must be their own. */
  buildRegistry?: string;
}

const PREFIXES = ['', '/api-host'];
const WHERE: Record<string, string> = { querystring: 'query', params: 'path', headers: 'header' };

export async function createControlPlane(deps: ControlPlaneDeps): Promise<FastifyInstance> {
  // Secrets may total 1 MiB (a 422 names the one that crosses it); the body around them needs some room beyond that.
  const app = fastify({
    loggerInstance: deps.logger as FastifyBaseLogger,
    bodyLimit: 2 * 1024 * 1024,
    schemaController: zodSchemaController,
    // One line per request, written below: a successful read (the CLI's and the console's polling) is debug, so a
    // terminal shows what changed and what failed.
    logController: new LogController({ disableRequestLogging: true }),
  });
  app.setValidatorCompiler(validatorCompiler);
  app.setSerializerCompiler(serializerCompiler);
  installJsonBodyParser(app);
  // Request bodies may hold secret values: log only method and path.
  app.addHook('onRequest', async (req) => {
    req.log = req.log.child({ reqId: req.id });
  });
  app.addHook('onResponse', async (req, reply) => {
    const read = (req.method === 'GET' || req.method === 'HEAD') && reply.statusCode < 400;
    // The path only: a query may carry an OAuth code or state.
    const line = { method: req.method, path: req.url.split('?', 1)[0], statusCode: reply.statusCode };
    req.log[read ? 'debug' : 'info']({ ...line, ms: Math.round(reply.elapsedTime) }, 'request completed');
  });

  installErrorAnswers(app, {
    // FastAPI's names for where the bad value was (the reference API's 422 bodies): query, path, header, body.
    invalid: (issues) => ({
      detail: issues.map((i) => ({
        loc: [WHERE[i.where] ?? i.where, ...i.path.map((p) => (/^\d+$/.test(p) ? Number(p) : p))],
        msg: i.message,
        type: i.keyword,
      })),
    }),
    malformed: (message) => ({ detail: [{ loc: ['body'], msg: `malformed JSON: ${message}`, type: 'json_invalid' }] }),
    logUnexpected: (err, req) =>
      req.log.error(
        { err: { message: redactUrlsIn(err.message), stack: err.stack && redactUrlsIn(err.stack) } },
        'request failed',
      ),
  });

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
  const quotas = createQuotas({ store: deps.store, limits: deps.quotas, now: deps.now });
  // Tarballs no deployment or revision of the workspace builds any more are deleted (sweeps), so the store says which.
  const uploads =
    deps.sourceUploads &&
    createSourceUploads({
      referenced: (tenant) => referencedTarballs(deps.store, deps.store.namespace, tenant),
      ...deps.sourceUploads,
    });
  // Uploads nobody deployed expire and tarballs outlive their revisions also where nobody uploads or deletes again.
  const every = deps.sourceUploads?.sweepEveryMs ?? 60 * 60 * 1000;
  if (uploads && every > 0) {
    const log = deps.logger.child({ component: 'source-uploads' });
    let pass: Promise<unknown> = Promise.resolve();
    const timer = setInterval(() => {
      pass = pass
        .then(() => uploads.sweepAll((tenant, err) => log.warn({ err, tenant }, 'sweeping source uploads failed')))
        .then((deleted) => deleted && log.info({ deleted }, 'expired source uploads and unused tarballs deleted'))
        .catch((err: unknown) => log.warn({ err }, 'sweeping source uploads failed'));
    }, every);
    timer.unref();
    app.addHook('onClose', async () => {
      clearInterval(timer);
      await pass;
    });
  }
  const publicUrl = () => {
    const u = deps.auth?.publicUrl;
    return (typeof u === 'function' ? u() : u) || undefined;
  };
  const buildRegistry = deps.buildRegistry ?? deps.registryTokens?.registry;
  const service = createDeploymentService({
    sourceUploads: uploads,
    ...(buildRegistry ? { buildRegistry } : {}),
    pushTokens: Boolean(deps.registryTokens),
    store: deps.store,
    logger: deps.logger.child({ component: 'deployments' }),
    policy: deps.policy,
    referenceNamespace: deps.referenceNamespace,
    github: deps.github,
    quotas,
    localRepos: deps.localRepos,
    onCreated: () => deps.onDeploymentCreated?.(),
  });

  const registryTokens = deps.registryTokens && createRegistryTokens(deps.registryTokens);
  // A deleted deployment's (or a workspace's lost) push tokens stop working at once.
  const stillOwns = (tenant: string, deploymentId: string) =>
    service.get(tenant, deploymentId).then(
      () => true,
      (err: unknown) => {
        if (err instanceof NotFoundError) return false;
        throw err;
      },
    );

  const listeners = createListenerService({
    store: deps.store,
    logger: deps.logger.child({ component: 'listeners' }),
    github: deps.github,
    logLimits: deps.listenerLogLimits,
    quotas,
  });
  const integrations = createIntegrationService(deps.store, deps.github, quotas);
  const pushHooks = createPushWebhooks({
    store: deps.store,
    deployments: service,
    integrations,
    github: deps.github,
    logger: deps.logger.child({ component: 'webhooks' }),
  });
  const auth = wireAuthService(deps.store, deps.logger, authenticate, { ...deps.auth, quotas });

  for (const prefix of PREFIXES) {
    /** An encapsulated scope whose every route needs X-Api-Key (+ X-Tenant-Id), checked by `check`. */
    const withApiKey =
      (check: Authenticator, routes: (scope: FastifyInstance) => Promise<void>) => async (scope: FastifyInstance) => {
        scope.addHook('onRequest', async (req) => {
          req.principal = await check(header(req.headers['x-api-key']), header(req.headers['x-tenant-id']));
          limitListenerKey(req.principal.listenerId, req.url.slice(prefix.length));
        });
        await routes(scope);
      };
    app.get(`${prefix}/ok`, { schema: { hide: prefix !== '' } }, async () => ({ ok: true }));
    await app.register(
      withApiKey(authenticate, async (v2) => {
        await v2
          .withTypeProvider<ZodTypeProvider>()
          .register(deploymentRoutes(service, deps.auth?.deploymentTokenKey, Boolean(registryTokens)));
        await v2
          .withTypeProvider<ZodTypeProvider>()
          .register(sourceUploadRoutes(service, uploads, publicUrl, registryTokens));
        await v2.withTypeProvider<ZodTypeProvider>().register(listenerRoutes(listeners));
        await v2
          .withTypeProvider<ZodTypeProvider>()
          .register(apiKeyRoutes(deps.store, deps.onKeysChanged ?? (() => undefined)));
      }),
      { prefix: `${prefix}/v2` },
    );
    await app.register(
      withApiKey(auth.authenticate, async (v2auth) => {
        await v2auth.withTypeProvider<ZodTypeProvider>().register(authRoutes(auth.service));
      }),
      { prefix: `${prefix}/v2` },
    );
    // PUT by `langgraph deploy` without an API key: the signed upload URL is the credential; GET by a cluster
    // build: its fetch token is.
    if (uploads) {
      await app.register(
        async (up) => {
          await up.withTypeProvider<ZodTypeProvider>().register(sourceUploadPutRoutes(uploads));
          if (deps.sourceUploads?.fetchKey) {
            await up.withTypeProvider<ZodTypeProvider>().register(sourceFetchRoutes(uploads));
          }
        },
        { prefix: `${prefix}/v2` },
      );
    }
    // Called by registry clients (docker, buildah, crane) after the registry's challenge: the push token is the
    // credential.
    if (registryTokens) {
      await app.register(
        async (rt) => rt.withTypeProvider<ZodTypeProvider>().register(registryTokenRoutes(registryTokens, stillOwns)),
        { prefix: `${prefix}/v2` },
      );
    }
    // Opened by the end user's browser: no API key, the OAuth state is the credential (routes/v2/auth.ts).
    await app.register(
      async (cb) => cb.withTypeProvider<ZodTypeProvider>().register(authCallbackRoutes(auth.service)),
      {
        prefix: `${prefix}/v2`,
      },
    );
    await app.register(
      withApiKey(authenticate, async (v1) => {
        await v1.withTypeProvider<ZodTypeProvider>().register(integrationRoutes(integrations));
        await v1.withTypeProvider<ZodTypeProvider>().register(projectLogRoutes(service));
      }),
      { prefix: `${prefix}/v1` },
    );
    await app.register(
      async (hooks) => {
        await hooks.withTypeProvider<ZodTypeProvider>().register(integrationHookRoutes(integrations, pushHooks));
      },
      { prefix: `${prefix}/v1` },
    );
  }
  return app;
}

/** A listener key reaches only /v2/listeners/<its id> and below. */
function limitListenerKey(listenerId: string | undefined, url: string): void {
  if (!listenerId) return;
  const path = url.split('?')[0]!;
  const own = `/v2/listeners/${listenerId}`;
  if (path !== own && !path.startsWith(`${own}/`)) {
    throw new ForbiddenError('A listener key may only call its own listener endpoints.');
  }
}

function header(v: string | string[] | undefined): string | undefined {
  return Array.isArray(v) ? v[0] : v;
}

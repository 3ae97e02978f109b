// What LangChain's `langgraph deploy` asks of a control plane besides the deployments themselves: an upload URL for
// a source tarball (then one bare PUT of it, signed by the URL: `sourceUploadPutRoutes`), and a push token for a
// locally built image, handed out only where the control plane signs tokens for the build registry
// (services/registry-tokens; the registry trades the push token at `registryTokenRoutes`).
import type { FastifyPluginAsyncZod } from 'fastify-type-provider-zod';
import type { FastifyRequest } from 'fastify';
import type { Readable } from 'node:stream';
import { z } from 'zod';
import { AppError, BadRequestError } from '../../../lib/errors.ts';
import type { DeploymentService } from '../../services/deployments/index.ts';
import { NO_PUSH_REGISTRY } from '../../services/source-uploads/messages.ts';
import { UPLOAD_CONTENT_TYPES, UploadsBusy, type SourceUploads } from '../../services/source-uploads/index.ts';
import type { RegistryTokens } from '../../services/registry-tokens/index.ts';
import {
  DeploymentErrorBody,
  PushToken,
  RegistryToken,
  UploadDone,
  UploadUrl,
} from '../../../api/schemas/deployment-views.ts';
import { DeploymentParams } from '../../../api/schemas/deployment-queries.ts';

const security = [{ apiKey: [], tenantId: [] }];
const errors = {
  400: DeploymentErrorBody,
  401: DeploymentErrorBody,
  403: DeploymentErrorBody,
  404: DeploymentErrorBody,
  409: DeploymentErrorBody,
  413: DeploymentErrorBody,
  415: DeploymentErrorBody,
  422: DeploymentErrorBody,
  429: DeploymentErrorBody,
  503: DeploymentErrorBody,
};

/** The origin and prefix (/api-host or none) the caller used: the upload URL comes back to the same place. */
function baseUrlOf(req: FastifyRequest, publicUrl: string | undefined): string {
  const prefix = req.url.startsWith('/api-host/') ? '/api-host' : '';
  const origin = publicUrl ? publicUrl.replace(/\/$/, '') : `${req.protocol}://${req.host}`;
  return `${origin}${prefix}`;
}

export const sourceUploadRoutes =
  (
    service: DeploymentService,
    uploads: SourceUploads | undefined,
    publicUrl: () => string | undefined,
    registryTokens: RegistryTokens | undefined,
  ): FastifyPluginAsyncZod =>
  async (app) => {
    app.post(
      '/deployments/:deployment_id/upload-url',
      {
        schema: {
          tags: ['deployments'],
          summary: 'An upload URL for a source tarball (internal_source deployments)',
          security,
          params: DeploymentParams,
          // The CLI says it would send headers the answer names; any other flags are ignored.
          body: z.object({ supports_upload_headers: z.boolean().optional() }).passthrough().nullish(),
          response: { 200: UploadUrl, ...errors },
        },
      },
      async (req) => {
        const tenant = req.principal!.tenant;
        const dep = await service.get(tenant, req.params.deployment_id);
        if (!uploads) {
          throw new AppError(
            'This control plane stores no source uploads: its operator must set controlPlane.sourceUploads in the Helm ' +
              'values (--source-uploads-database-url and --source-uploads-key); until then deploy from git or with ' +
              '`langgraph deploy --image-uri`.',
            503,
          );
        }
        if (dep.source !== 'internal_source') {
          throw new BadRequestError(
            `Deployment ${dep.id} builds from source ${dep.source}; upload URLs are for source internal_source ` +
              '(create the deployment with `langgraph deploy`, or with source "internal_source").',
          );
        }
        return uploads.issue(tenant, dep.id, baseUrlOf(req, publicUrl()));
      },
    );

    app.post(
      '/deployments/:deployment_id/push-token',
      {
        schema: {
          tags: ['deployments'],
          summary:
            "A registry push token for the deployment's own repository (where the control plane signs the build " +
            "registry's tokens; elsewhere a 400 that says why)",
          security,
          params: DeploymentParams,
          body: z.object({}).passthrough().nullish(),
          response: { 200: PushToken, ...errors },
        },
      },
      async (req) => {
        const tenant = req.principal!.tenant;
        const dep = await service.get(tenant, req.params.deployment_id);
        if (!registryTokens) throw new BadRequestError(NO_PUSH_REGISTRY);
        // LangSmith's wording: `langgraph deploy` recognises it and tells the user to create a new deployment.
        if (dep.source !== 'internal_docker') {
          throw new BadRequestError(
            `Push tokens are only available for 'internal_docker' source deployments; deployment ${dep.id} has ` +
              `source ${dep.source}.`,
          );
        }
        req.log.info({ tenant, deployment_id: dep.id }, 'registry push token issued');
        return registryTokens.pushToken(tenant, dep.id);
      },
    );
  };

const PutParams = z.object({ deployment_id: z.string(), file: z.string() });
const PutQuery = z.object({
  tenant: z.string().min(1).max(256),
  expires: z.coerce.number().int(),
  max_bytes: z.coerce.number().int().positive(),
  signature: z.string().min(1).max(128),
});

const FetchParams = z.object({ sha256: z.string().regex(/^[0-9a-f]{64}$/, 'must be a SHA-256 (64 hex digits)') });

/** A cluster build downloads its tarball: no API key, the build's fetch token is the credential. */
export const sourceFetchRoutes =
  (uploads: SourceUploads): FastifyPluginAsyncZod =>
  async (app) => {
    app.get(
      '/source-archives/:sha256',
      {
        schema: {
          tags: ['deployments'],
          summary: 'The source tarball of a build (Authorization: Bearer <its fetch token>; for build Jobs)',
          params: FetchParams,
          response: {
            200: z.unknown().describe('The .tar.gz bytes (application/gzip)'),
            401: DeploymentErrorBody,
            403: DeploymentErrorBody,
            404: DeploymentErrorBody,
          },
        },
      },
      async (req, reply) => {
        const { stream, claims } = await uploads.fetch(req.headers.authorization, req.params.sha256);
        req.log.info({ tenant: claims.tenant, revision: claims.revision }, 'source tarball fetched by its build');
        return reply.type('application/gzip').header('cache-control', 'no-store').send(stream);
      },
    );
  };

/** The bare PUT of an upload URL: no API key, the signed URL is the credential. */
export const sourceUploadPutRoutes =
  (uploads: SourceUploads): FastifyPluginAsyncZod =>
  async (app) => {
    // The body stays a stream: the service meters, hashes and stores it (no buffering of up to 200 MiB).
    app.addContentTypeParser(UPLOAD_CONTENT_TYPES, (_req, payload, done) => done(null, payload));
    app.put(
      '/source-uploads/sources/:deployment_id/:file',
      {
        schema: {
          tags: ['deployments'],
          summary: 'Upload a source tarball to a signed upload URL (Content-Type application/gzip)',
          params: PutParams,
          querystring: PutQuery,
          response: { 201: UploadDone, ...errors },
        },
      },
      async (req, reply) => {
        // JSON and forms have parsers of their own app-wide; only a gzip body reaches the service, as a stream.
        const type = (req.headers['content-type'] ?? '').split(';')[0]!.trim().toLowerCase();
        if (!UPLOAD_CONTENT_TYPES.includes(type)) {
          throw new AppError(`An upload must be sent as ${UPLOAD_CONTENT_TYPES.join(' or ')}, not "${type}".`, 415);
        }
        const length = req.headers['content-length'];
        try {
          const done = await uploads.receive(
            `sources/${req.params.deployment_id}/${req.params.file}`,
            req.query,
            length === undefined ? undefined : Number(length),
            req.body as Readable,
          );
          return await reply.code(201).send(done);
        } catch (err) {
          if (err instanceof UploadsBusy) void reply.header('retry-after', String(err.retryAfterSeconds));
          throw err;
        }
      },
    );
  };

const TokenQuery = z
  .object({
    service: z.string().max(1024).optional(),
    // Repeated (docker) or space-separated (the OAuth2 form) scopes.
    scope: z.union([z.string().max(4096), z.array(z.string().max(4096)).max(32)]).optional(),
    account: z.string().max(1024).optional(),
  })
  .passthrough();

/**
 * The registry's auth.token.realm: no API key, HTTP Basic with a push token as the password. A registry client calls
 * it after the registry's 401 challenge, with the service and scopes the registry named.
 */
export const registryTokenRoutes =
  (registryTokens: RegistryTokens, stillOwns: (tenant: string, deploymentId: string) => Promise<boolean>) =>
  async (app: Parameters<FastifyPluginAsyncZod>[0]) => {
    app.get(
      '/registry/token',
      {
        schema: {
          tags: ['deployments'],
          summary: 'A registry bearer token (Docker token auth; HTTP Basic: any username, a push token as password)',
          querystring: TokenQuery,
          response: { 200: RegistryToken, 400: DeploymentErrorBody, 401: DeploymentErrorBody },
        },
      },
      async (req, reply) => {
        try {
          const answer = await registryTokens.exchange(req.headers.authorization, req.query, stillOwns);
          return await reply.header('cache-control', 'no-store').send(answer);
        } catch (err) {
          if (err instanceof AppError && err.status === 401) {
            void reply.header('www-authenticate', 'Basic realm="agentplane registry push tokens"');
          }
          throw err;
        }
      },
    );
  };

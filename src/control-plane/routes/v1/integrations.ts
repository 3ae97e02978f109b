// Integrations v1 (plain git credentials): create, list, get, delete. Registered under /v1 and /api-host/v1 with the
// same authentication as /v2. Answers never carry the token.
import type { FastifyPluginAsyncZod } from 'fastify-type-provider-zod';
import type { FastifyRequest } from 'fastify';
import { z } from 'zod';
import { canonicalHost, type IntegrationService } from '../../services/integrations.ts';

const ErrorBody = z.object({ detail: z.unknown() });
const errors = { 401: ErrorBody, 403: ErrorBody, 404: ErrorBody, 409: ErrorBody, 422: ErrorBody };
const security = [{ apiKey: [], tenantId: [] }];
const noControl = /^[^\p{Cc}]*$/u;

const IntegrationOut = z.object({
  id: z.string(),
  name: z.string(),
  type: z.literal('git'),
  host: z.string(),
  username: z.string().nullable(),
  created_at: z.string(),
});

const IntegrationCreate = z
  .object({
    name: z.string().min(1).max(200).regex(noControl, 'must not contain control characters'),
    type: z.literal('git').default('git'),
    host: z
      .string()
      .max(260)
      .refine(
        (h) => canonicalHost(h) !== undefined,
        'a repository host name, optionally with :port (no scheme, path or credentials)',
      ),
    username: z
      .string()
      .min(1)
      .max(200)
      .regex(/^[^\p{Cc}:]*$/u, 'must not contain ":" or control characters')
      .nullable()
      .optional(),
    token: z
      .string()
      .min(1)
      .max(16_384)
      .regex(noControl, 'must not contain control characters')
      .describe('Write-only: never returned'),
  })
  .strict();

const IntegrationParams = z.object({ integration_id: z.string().uuid() });

const tenantOf = (req: FastifyRequest): string => req.principal!.tenant;

export const integrationRoutes =
  (service: IntegrationService): FastifyPluginAsyncZod =>
  async (app) => {
    app.post(
      '/integrations',
      {
        schema: {
          tags: ['integrations'],
          summary: 'Create a git credential integration',
          security,
          body: IntegrationCreate,
          response: { 201: IntegrationOut, ...errors },
        },
      },
      async (req, reply) => reply.code(201).send(await service.create(tenantOf(req), req.body)),
    );
    app.get(
      '/integrations',
      {
        schema: {
          tags: ['integrations'],
          summary: 'List integrations',
          security,
          response: { 200: z.object({ resources: z.array(IntegrationOut) }), ...errors },
        },
      },
      async (req) => ({ resources: await service.list(tenantOf(req)) }),
    );
    app.get(
      '/integrations/:integration_id',
      {
        schema: {
          tags: ['integrations'],
          summary: 'Get an integration',
          security,
          params: IntegrationParams,
          response: { 200: IntegrationOut, ...errors },
        },
      },
      async (req) => service.get(tenantOf(req), req.params.integration_id),
    );
    app.delete(
      '/integrations/:integration_id',
      {
        schema: {
          tags: ['integrations'],
          summary: 'Delete an integration',
          security,
          params: IntegrationParams,
          response: { 204: z.null(), ...errors },
        },
      },
      async (req, reply) => {
        await service.delete(tenantOf(req), req.params.integration_id);
        return reply.code(204).send(null);
      },
    );
  };

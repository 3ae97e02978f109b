// API keys v2: list, create and revoke keys. Only admin keys (those that act for every tenant, '*') may call these;
// a key is shown once, at creation, and only its hash is kept. Revoking a key takes it away from the control plane
// at once and from the agents within seconds (the key publisher rewrites their key sets).
import type { FastifyPluginAsyncZod } from 'fastify-type-provider-zod';
import type { FastifyRequest } from 'fastify';
import { z } from 'zod';
import { ForbiddenError, NotFoundError } from '../../../lib/errors.ts';
import { createApiKey } from '../../api-keys/keys.ts';
import type { ApiKeyStore } from '../../../state/api-keys.ts';
import { ApiKeyCreate, ApiKeyCreated, ApiKeyList, KeyParams } from '../../../api/schemas/api-keys.ts';
import { ErrorBody } from '../../../api/schemas/common.ts';

const errors = { 401: ErrorBody, 403: ErrorBody, 404: ErrorBody, 422: ErrorBody };
const security = [{ apiKey: [], tenantId: [] }];

function requireAdmin(req: FastifyRequest): void {
  if (!req.principal?.admin)
    throw new ForbiddenError('Only admin API keys (keys for every workspace, "*") may manage API keys.');
}

export const apiKeyRoutes =
  (store: ApiKeyStore, onChange: () => void): FastifyPluginAsyncZod =>
  async (app) => {
    app.get(
      '/api-keys',
      {
        schema: {
          tags: ['API keys'],
          summary: 'List API keys (admin)',
          security,
          response: { 200: ApiKeyList, ...errors },
        },
      },
      async (req) => {
        requireAdmin(req);
        const keys = await store.listApiKeys();
        return {
          resources: keys.map((k) => ({ id: k.id, name: k.name, tenants: k.tenants, created_at: k.createdAt })),
        };
      },
    );
    app.post(
      '/api-keys',
      {
        schema: {
          tags: ['API keys'],
          summary: 'Create an API key (admin); the key is in this answer only',
          security,
          body: ApiKeyCreate,
          response: { 201: ApiKeyCreated, ...errors },
        },
      },
      async (req, reply) => {
        requireAdmin(req);
        const { key, record } = await createApiKey(store, {
          tenants: [...new Set(req.body.tenants)],
          name: req.body.name,
        });
        onChange();
        return reply
          .code(201)
          .send({ id: record.id, name: record.name, tenants: record.tenants, created_at: record.createdAt, key });
      },
    );
    app.delete(
      '/api-keys/:key_id',
      {
        schema: {
          tags: ['API keys'],
          summary: 'Revoke an API key (admin)',
          security,
          params: KeyParams,
          response: { 204: z.null(), ...errors },
        },
      },
      async (req, reply) => {
        requireAdmin(req);
        if (!(await store.deleteApiKey(req.params.key_id)))
          throw new NotFoundError(`API key ${req.params.key_id} not found.`);
        onChange();
        return reply.code(204).send(null);
      },
    );
  };

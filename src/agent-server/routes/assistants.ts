// Assistants: CRUD, search/count, schemas and the drawable graph.
import { randomUUID } from 'node:crypto';
import type { FastifyPluginAsyncZod } from 'fastify-type-provider-zod';
import { NotFoundError } from '../../lib/errors.ts';
import type { Json } from '../storage/types.ts';
import type { RouteDeps } from './index.ts';
import {
  AssistantCount,
  AssistantCreate,
  AssistantParams,
  AssistantPatch,
  AssistantSearch,
  GraphQuery,
} from './schemas.ts';

export const assistantRoutes = (deps: RouteDeps): FastifyPluginAsyncZod => async (app) => {
  const { storage, service, graphs } = deps;

  function requireGraph(graphId: string): void {
    if (!service.graphIds.has(graphId)) throw new NotFoundError(`Graph "${graphId}" not found`);
  }

  app.post('/assistants', { schema: { body: AssistantCreate } }, async (req) => {
    const b = req.body;
    requireGraph(b.graph_id);
    return storage.assistants.create({
      assistant_id: b.assistant_id ?? randomUUID(),
      graph_id: b.graph_id,
      config: (b.config ?? {}) as Json,
      context: b.context ?? {},
      metadata: b.metadata ?? {},
      name: b.name ?? 'Untitled',
      description: b.description ?? null,
    }, b.if_exists ?? 'raise');
  });

  app.post('/assistants/search', { schema: { body: AssistantSearch.optional() } }, async (req, reply) => {
    const q = AssistantSearch.parse(req.body ?? {});
    const rows = await storage.assistants.search({
      graph_id: q.graph_id ?? undefined,
      name: q.name ?? undefined,
      metadata: q.metadata ?? undefined,
      limit: q.limit,
      offset: q.offset,
      sort_by: q.sort_by ?? undefined,
      sort_order: q.sort_order ?? undefined,
    });
    if (rows.length === q.limit) reply.header('X-Pagination-Next', String(q.offset + q.limit));
    if (!q.select?.length) return rows;
    return rows.map((r) => Object.fromEntries(q.select!.filter((f) => f in r).map((f) => [f, r[f as keyof typeof r]])));
  });

  app.post('/assistants/count', { schema: { body: AssistantCount.optional() } }, async (req) => {
    const q = req.body ?? {};
    return storage.assistants.count({
      graph_id: q.graph_id ?? undefined,
      name: q.name ?? undefined,
      metadata: q.metadata ?? undefined,
    });
  });

  app.get('/assistants/:assistant_id', { schema: { params: AssistantParams } }, async (req) => {
    return service.resolveAssistant(req.params.assistant_id);
  });

  app.patch('/assistants/:assistant_id', { schema: { params: AssistantParams, body: AssistantPatch } }, async (req) => {
    const a = await service.resolveAssistant(req.params.assistant_id);
    const b = req.body;
    if (b.graph_id) requireGraph(b.graph_id);
    return storage.assistants.patch(a.assistant_id, {
      graph_id: b.graph_id ?? undefined,
      config: (b.config ?? undefined) as Json | undefined,
      context: b.context ?? undefined,
      metadata: b.metadata ?? undefined,
      name: b.name ?? undefined,
      description: b.description === undefined ? undefined : b.description,
    });
  });

  app.delete('/assistants/:assistant_id', { schema: { params: AssistantParams } }, async (req, reply) => {
    const a = await service.resolveAssistant(req.params.assistant_id);
    await storage.assistants.delete(a.assistant_id);
    return reply.code(204).send();
  });

  app.get('/assistants/:assistant_id/schemas', { schema: { params: AssistantParams } }, async (req) => {
    const a = await service.resolveAssistant(req.params.assistant_id);
    requireGraph(a.graph_id);
    return { graph_id: a.graph_id, ...(await graphs.getSchemas(a.graph_id)) };
  });

  app.get('/assistants/:assistant_id/graph', { schema: { params: AssistantParams, querystring: GraphQuery } },
    async (req) => {
      const a = await service.resolveAssistant(req.params.assistant_id);
      requireGraph(a.graph_id);
      return graphs.getDrawableGraph(a.graph_id, { xray: req.query.xray });
    });
};

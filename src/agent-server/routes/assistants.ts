// Assistants: CRUD, search/count, schemas, subgraphs and the drawable graph. Factory graphs are built with the
// assistant's config for schemas, subgraphs and drawing, as the graph a run of that assistant gets.
import { randomUUID } from 'node:crypto';
import type { FastifyPluginAsyncZod } from 'fastify-type-provider-zod';
import { hasRowConditions, matchesFilters, mergeMetadataFilter, visiblePage } from '../auth/custom.ts';
import type { z } from 'zod';
import type { AuthFilters } from '../auth/custom.ts';
import type { Assistant, Json } from '../storage/types.ts';
import type { RouteDeps } from './deps.ts';
import {
  AssistantCount,
  AssistantCreate,
  AssistantDeleteQuery,
  AssistantLatest,
  AssistantPatch,
  AssistantSearch,
  AssistantVersionsQuery,
  GraphQuery,
  SubgraphParams,
  SubgraphQuery,
} from '../schemas/assistants.ts';
import { AssistantParams, MAX_OFFSET, selectFields } from '../schemas/common.ts';

/**
 * POST /assistants/search's answer (also made in-process for MCP, http/as-caller.ts): `filters`, custom auth's
 * assistants:search filter, narrows it (equality conditions go to the store, the rest is checked on the rows).
 * `next`: the offset of the next page when there is one.
 */
export async function searchAssistants(
  deps: Pick<RouteDeps, 'service'>,
  q: z.infer<typeof AssistantSearch>,
  filters: AuthFilters | undefined,
): Promise<{ rows: Array<Partial<Assistant>>; next?: number }> {
  const metadata = mergeMetadataFilter(q.metadata, filters);
  if (!metadata) return { rows: [] };
  const { rows, more } = await visiblePage(
    (limit, offset) =>
      deps.service.assistants.search({
        graph_id: q.graph_id ?? undefined,
        name: q.name ?? undefined,
        metadata,
        limit,
        offset,
        sort_by: q.sort_by ?? undefined,
        sort_order: q.sort_order ?? undefined,
      }),
    filters,
    q.limit,
    q.offset,
  );
  return { rows: selectFields(rows, q.select), ...(more ? { next: q.offset + q.limit } : {}) };
}

/** GET /assistants/{id}/schemas's answer (also made in-process for A2A). */
export async function assistantSchemas(deps: Pick<RouteDeps, 'service' | 'graphs'>, assistantId: string) {
  const a = await deps.service.assistants.resolve(assistantId);
  deps.service.assistants.requireGraph(a.graph_id);
  return { graph_id: a.graph_id, ...(await deps.graphs.getSchemas(a.graph_id, a.config)) };
}

export const assistantRoutes =
  (deps: RouteDeps): FastifyPluginAsyncZod =>
  async (app) => {
    const { graphs } = deps;
    const { assistants } = deps.service;
    const { requireGraph } = assistants;

    app.post('/assistants', { schema: { body: AssistantCreate } }, async (req) => {
      const b = req.body;
      requireGraph(b.graph_id);
      return assistants.create(
        {
          assistant_id: b.assistant_id ?? randomUUID(),
          graph_id: b.graph_id,
          config: (b.config ?? {}) as Json,
          context: b.context ?? {},
          metadata: b.metadata ?? {},
          name: b.name ?? 'Untitled',
          description: b.description ?? null,
        },
        b.if_exists ?? 'raise',
      );
    });

    app.post('/assistants/search', { schema: { body: AssistantSearch.optional() } }, async (req, reply) => {
      const { rows, next } = await searchAssistants(deps, AssistantSearch.parse(req.body ?? {}), req.authz?.filters);
      if (next !== undefined) reply.header('X-Pagination-Next', String(next));
      return rows;
    });

    app.post('/assistants/count', { schema: { body: AssistantCount.optional() } }, async (req) => {
      const q = req.body ?? {};
      const filters = req.authz?.filters;
      const metadata = mergeMetadataFilter(q.metadata, filters);
      if (!metadata) return 0;
      const query = { graph_id: q.graph_id ?? undefined, name: q.name ?? undefined, metadata };
      if (hasRowConditions(filters)) {
        // The stores cannot count list containment: count the visible rows instead.
        const rows = await assistants.search({ ...query, limit: MAX_OFFSET, offset: 0 });
        return rows.filter((a) => matchesFilters(a.metadata, filters)).length;
      }
      return assistants.count(query);
    });

    app.get('/assistants/:assistant_id', { schema: { params: AssistantParams } }, async (req) => {
      return assistants.resolve(req.params.assistant_id);
    });

    app.patch(
      '/assistants/:assistant_id',
      { schema: { params: AssistantParams, body: AssistantPatch } },
      async (req) => {
        const a = await assistants.resolve(req.params.assistant_id);
        const b = req.body;
        if (b.graph_id) requireGraph(b.graph_id);
        return assistants.patch(a.assistant_id, {
          graph_id: b.graph_id ?? undefined,
          config: (b.config ?? undefined) as Json | undefined,
          context: b.context ?? undefined,
          metadata: b.metadata ?? undefined,
          name: b.name ?? undefined,
          description: b.description === undefined ? undefined : b.description,
        });
      },
    );

    app.delete(
      '/assistants/:assistant_id',
      { schema: { params: AssistantParams, querystring: AssistantDeleteQuery } },
      async (req, reply) => {
        await assistants.delete(req.params.assistant_id, req.query.delete_threads, req.authz?.threadDeleteFilter);
        return reply.code(204).send();
      },
    );

    app.get('/assistants/:assistant_id/schemas', { schema: { params: AssistantParams } }, async (req) =>
      assistantSchemas(deps, req.params.assistant_id),
    );

    const subgraphs = async (assistantId: string, namespace: string | undefined, recurse: boolean) => {
      const a = await assistants.resolve(assistantId);
      requireGraph(a.graph_id);
      return graphs.getSubgraphSchemas(a.graph_id, { config: a.config, namespace, recurse });
    };
    app.get(
      '/assistants/:assistant_id/subgraphs',
      { schema: { params: AssistantParams, querystring: SubgraphQuery } },
      async (req) => subgraphs(req.params.assistant_id, undefined, req.query.recurse),
    );
    app.get(
      '/assistants/:assistant_id/subgraphs/:namespace',
      {
        schema: { params: SubgraphParams, querystring: SubgraphQuery },
      },
      async (req) => subgraphs(req.params.assistant_id, req.params.namespace, req.query.recurse),
    );

    app.post(
      '/assistants/:assistant_id/versions',
      {
        schema: { params: AssistantParams, body: AssistantVersionsQuery.optional() },
      },
      async (req) => {
        const a = await assistants.resolve(req.params.assistant_id);
        const q = AssistantVersionsQuery.parse(req.body ?? {});
        return assistants.versions.list(a.assistant_id, {
          limit: q.limit,
          offset: q.offset,
          metadata: q.metadata ?? undefined,
        });
      },
    );

    app.post(
      '/assistants/:assistant_id/latest',
      { schema: { params: AssistantParams, body: AssistantLatest } },
      async (req) => {
        const a = await assistants.resolve(req.params.assistant_id);
        return assistants.versions.setLatest(a.assistant_id, req.body.version);
      },
    );

    app.get(
      '/assistants/:assistant_id/graph',
      { schema: { params: AssistantParams, querystring: GraphQuery } },
      async (req) => {
        const a = await assistants.resolve(req.params.assistant_id);
        requireGraph(a.graph_id);
        return graphs.getDrawableGraph(a.graph_id, { xray: req.query.xray, config: a.config });
      },
    );
  };

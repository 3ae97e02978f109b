// Crons: scheduled runs (client.crons.*). A stateless cron runs each tick on a new thread; a thread cron on its
// thread. The scheduler (runs/crons.ts) fires them; these routes keep the records through the cron service.
import type { FastifyPluginAsyncZod } from 'fastify-type-provider-zod';
import type { FastifyRequest } from 'fastify';
import { hasRowConditions, matchesFilters, mergeMetadataFilter, visiblePage } from '../auth/custom.ts';
import type { CronCaller } from '../services/crons.ts';
import type { Cron, CronRecord } from '../storage/types.ts';
import type { RouteDeps } from './deps.ts';
import { MAX_OFFSET, ThreadParams } from '../schemas/common.ts';
import { CronCount, CronCreate, CronParams, CronSearch, CronUpdate } from '../schemas/crons.ts';

/** The public record (the owner's auth metadata stays inside). */
export function publicCron(c: CronRecord): Cron {
  const { owner_metadata: _o, owner_auth: _a, ...rest } = c;
  return rest;
}

const cronCaller = (req: FastifyRequest): CronCaller => ({
  filters: req.authz?.filters,
  auth: req.auth ?? null,
  assistantFilter: req.authz?.assistantFilter,
});

export const cronRoutes =
  (deps: RouteDeps): FastifyPluginAsyncZod =>
  async (app) => {
    const { crons } = deps.service;

    app.post('/runs/crons', { schema: { body: CronCreate } }, async (req) => {
      return publicCron(await crons.create(null, req.body, cronCaller(req)));
    });

    app.post('/threads/:thread_id/runs/crons', { schema: { params: ThreadParams, body: CronCreate } }, async (req) => {
      return publicCron(await crons.create(req.params.thread_id, req.body, cronCaller(req)));
    });

    app.post('/runs/crons/search', { schema: { body: CronSearch.optional() } }, async (req, reply) => {
      const q = CronSearch.parse(req.body ?? {});
      const filters = req.authz?.filters;
      const metadata = mergeMetadataFilter(null, filters);
      const assistant_id = crons.assistantFilter(q.assistant_id);
      if (!metadata || assistant_id === null) return [];
      const page = await visiblePage(
        (limit, offset) =>
          crons.search({
            assistant_id,
            thread_id: q.thread_id ?? undefined,
            enabled: q.enabled ?? undefined,
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
      const rows = page.rows.map(publicCron);
      if (page.more) reply.header('X-Pagination-Next', String(q.offset + q.limit));
      if (!q.select?.length) return rows;
      return rows.map((r) => Object.fromEntries(q.select!.filter((f) => f in r).map((f) => [f, r[f as keyof Cron]])));
    });

    app.post('/runs/crons/count', { schema: { body: CronCount.optional() } }, async (req) => {
      const q = req.body ?? {};
      const filters = req.authz?.filters;
      const metadata = mergeMetadataFilter(null, filters);
      const assistant_id = crons.assistantFilter(q.assistant_id);
      if (!metadata || assistant_id === null) return 0;
      const query = { assistant_id, thread_id: q.thread_id ?? undefined, metadata };
      if (hasRowConditions(filters)) {
        const rows = await crons.search({ ...query, limit: MAX_OFFSET });
        return rows.filter((c) => matchesFilters(c.metadata, filters)).length;
      }
      return crons.count(query);
    });

    app.patch('/runs/crons/:cron_id', { schema: { params: CronParams, body: CronUpdate } }, async (req) => {
      return publicCron(await crons.update(req.params.cron_id, req.body, req.authz?.filters));
    });

    app.delete('/runs/crons/:cron_id', { schema: { params: CronParams } }, async (req, reply) => {
      await crons.delete(req.params.cron_id, req.authz?.filters);
      return reply.code(204).send();
    });
  };

// Threads: CRUD, search/count, copy, state and history.
import { randomUUID } from 'node:crypto';
import type { FastifyPluginAsyncZod } from 'fastify-type-provider-zod';
import { z } from 'zod';
import { BadRequestError } from '../../lib/errors.ts';
import { hasRowConditions, matchesFilters, mergeMetadataFilter, visiblePage } from '../auth/custom.ts';
import type { Thread } from '../storage/types.ts';
import type { RouteDeps } from './deps.ts';
import { CheckpointParams, selectFields, ThreadParams } from '../schemas/common.ts';
import {
  beforeCheckpointId,
  HistoryBody,
  selectState,
  HistoryQuery,
  StateCheckpoint,
  StatePatch,
  StateQuery,
  StateUpdate,
  ThreadCount,
  ThreadCreate,
  ThreadPatch,
  ThreadPrune,
  ThreadSearch,
  ttlMinutes,
} from '../schemas/threads.ts';

const publicThread = (t: Thread) => t;

export const threadRoutes =
  (deps: RouteDeps): FastifyPluginAsyncZod =>
  async (app) => {
    const { threads, state } = deps.service;

    app.post('/threads', { schema: { body: ThreadCreate.optional() } }, async (req) => {
      const body = req.body ?? {};
      const thread_id = body.thread_id ?? randomUUID();
      const metadata = Object.fromEntries(Object.entries(body.metadata ?? {}).filter(([, v]) => v !== undefined));
      if (body.supersteps?.length && typeof metadata.graph_id !== 'string') {
        throw new BadRequestError('supersteps need metadata.graph_id to know which graph the state belongs to');
      }
      const existed = body.thread_id ? (await threads.get(thread_id)) !== null : false;
      const thread = await threads.create(
        { thread_id, metadata, ttl_minutes: ttlMinutes(body.ttl) },
        body.if_exists ?? 'raise',
      );
      try {
        await state.applySupersteps(thread_id, body.supersteps ?? []);
      } catch (err) {
        // A rejected request leaves nothing behind.
        if (!existed) await threads.delete(thread_id).catch(() => undefined);
        throw err;
      }
      return body.supersteps?.length ? ((await threads.get(thread_id)) ?? thread) : thread;
    });

    app.post('/threads/search', { schema: { body: ThreadSearch.optional() } }, async (req, reply) => {
      const q = ThreadSearch.parse(req.body ?? {});
      // Custom auth narrows the search: equality conditions go to the store, the rest is checked on the rows.
      const filters = req.authz?.filters;
      const metadata = mergeMetadataFilter(q.metadata, filters);
      if (!metadata) return [];
      const { rows, more } = await visiblePage(
        (limit, offset) =>
          threads.search({
            ids: q.ids ?? undefined,
            metadata,
            values: q.values ?? undefined,
            status: q.status ?? undefined,
            limit,
            offset,
            sort_by: q.sort_by ?? undefined,
            sort_order: q.sort_order ?? undefined,
          }),
        filters,
        q.limit,
        q.offset,
      );
      if (more) reply.header('X-Pagination-Next', String(q.offset + q.limit));
      return selectFields(rows.map(publicThread), q.select);
    });

    app.post('/threads/count', { schema: { body: ThreadCount.optional() } }, async (req) => {
      const q = req.body ?? {};
      const filters = req.authz?.filters;
      const metadata = mergeMetadataFilter(q.metadata, filters);
      if (!metadata) return 0;
      if (hasRowConditions(filters)) {
        // The stores cannot count list containment: count the matching rows instead.
        const rows = await threads.search({
          metadata,
          values: q.values ?? undefined,
          status: q.status ?? undefined,
          limit: 2_147_483_647,
        });
        return rows.filter((t) => matchesFilters(t.metadata, filters)).length;
      }
      return threads.count({
        metadata,
        values: q.values ?? undefined,
        status: q.status ?? undefined,
      });
    });

    // Prune Threads (the platform's POST /threads/prune, the Python SDK's threads.prune; request, default strategy
    // "delete" and the {pruned_count} answer as its OpenAPI has them). delete: the threads go as with DELETE
    // /threads/{id} (runs, checkpoints; a running run is stopped). keep_latest: every checkpoint but the latest of
    // each namespace goes; the thread, its runs and values stay, and new runs continue from that checkpoint. A
    // thread with a run pending or running makes keep_latest a 409 naming it, with nothing pruned (the platform's
    // behaviour there is not documented). Unknown ids are skipped and not counted. Custom auth: the threads:delete
    // event, raised once with {thread_ids, strategy}; threads its filter hides are skipped like unknown ones.
    app.post('/threads/prune', { schema: { body: ThreadPrune } }, async (req) => {
      const ids = [...new Set(req.body.thread_ids)];
      const filters = req.authz?.filters;
      let visible = ids;
      if (filters && ids.length) {
        const found = await threads.search({ ids, limit: ids.length });
        visible = found.filter((t) => matchesFilters(t.metadata, filters)).map((t) => t.thread_id);
      }
      const pruned = await threads.prune(visible, req.body.strategy ?? 'delete');
      return { pruned_count: pruned.length };
    });

    app.get('/threads/:thread_id', { schema: { params: ThreadParams } }, async (req) => {
      return publicThread(await threads.require(req.params.thread_id));
    });

    app.patch('/threads/:thread_id', { schema: { params: ThreadParams, body: ThreadPatch } }, async (req) => {
      const id = req.params.thread_id;
      return threads.patch(id, { metadata: req.body.metadata ?? {}, ttl_minutes: ttlMinutes(req.body.ttl) });
    });

    app.delete('/threads/:thread_id', { schema: { params: ThreadParams } }, async (req, reply) => {
      const id = req.params.thread_id;
      await threads.delete(id);
      return reply.code(204).send();
    });

    app.post(
      '/threads/:thread_id/copy',
      { schema: { params: ThreadParams, body: z.unknown().optional() } },
      async (req) => {
        const id = req.params.thread_id;
        return threads.copy(id, randomUUID());
      },
    );

    app.get('/threads/:thread_id/state', { schema: { params: ThreadParams, querystring: StateQuery } }, async (req) => {
      return selectState(await state.get(req.params.thread_id, undefined, req.query.subgraphs), req.query.select);
    });

    app.get(
      '/threads/:thread_id/state/:checkpoint_id',
      { schema: { params: CheckpointParams, querystring: StateQuery } },
      async (req) =>
        selectState(
          await state.get(req.params.thread_id, req.params.checkpoint_id, req.query.subgraphs),
          req.query.select,
        ),
    );

    app.post(
      '/threads/:thread_id/state/checkpoint',
      { schema: { params: ThreadParams, body: StateCheckpoint } },
      // The whole checkpoint: a subgraph's checkpoint_ns (and checkpoint_map) reads that subgraph's state.
      async (req) =>
        selectState(
          await state.get(req.params.thread_id, req.body.checkpoint, req.body.subgraphs ?? false),
          req.body.select,
        ),
    );

    app.post('/threads/:thread_id/state', { schema: { params: ThreadParams, body: StateUpdate } }, async (req) => {
      return state.update(req.params.thread_id, req.body);
    });

    // Metadata merged into a checkpoint's without a new step; the platform answers {}.
    app.patch('/threads/:thread_id/state', { schema: { params: ThreadParams, body: StatePatch } }, async (req) => {
      const checkpoint = {
        ...req.body.checkpoint,
        checkpoint_id: req.body.checkpoint_id ?? req.body.checkpoint?.checkpoint_id ?? null,
      };
      return state.patchState(req.params.thread_id, req.body.metadata, checkpoint);
    });

    app.get(
      '/threads/:thread_id/history',
      { schema: { params: ThreadParams, querystring: HistoryQuery } },
      async (req) => {
        const page = await state.history(req.params.thread_id, { limit: req.query.limit, before: req.query.before });
        return page.map((s) => selectState(s, req.query.select));
      },
    );

    app.post(
      '/threads/:thread_id/history',
      { schema: { params: ThreadParams, body: HistoryBody.optional() } },
      async (req) => {
        const b = HistoryBody.parse(req.body ?? {});
        const page = await state.history(req.params.thread_id, {
          limit: b.limit,
          before: beforeCheckpointId(b.before),
          metadata: b.metadata ?? undefined,
          checkpoint_id: b.checkpoint?.checkpoint_id ?? undefined,
          checkpoint: b.checkpoint,
        });
        return page.map((s) => selectState(s, b.select));
      },
    );
  };

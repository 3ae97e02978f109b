// Crons: scheduled runs (client.crons.*). A stateless cron runs each tick on a new thread; a thread cron on its
// thread. The scheduler (runs/crons.ts) fires them; these routes keep the records.
import { randomUUID } from 'node:crypto';
import type { FastifyPluginAsyncZod } from 'fastify-type-provider-zod';
import { z } from 'zod';
import { NotFoundError, ValidationError } from '../../lib/errors.ts';
import {
  equalityPart,
  hasRowConditions,
  matchesFilters,
  mergeMetadataFilter,
  visiblePage,
  type AuthFilters,
  type RequestAuth,
} from '../auth/custom.ts';
import type { AssistantReadFilter } from '../service.ts';
import { toPlain } from '../serde.ts';
import { checkTimezone, nextTick } from '../runs/crons.ts';
import { isoNow } from '../storage/common.ts';
import type { Cron, CronPatch, CronRecord, Json } from '../storage/types.ts';
import type { RouteDeps } from './deps.ts';
import { MAX_OFFSET, RunCreate, ThreadParams, WebhookUrl } from './schemas.ts';

const UUID_RE = /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/i;

const Timestamp = z.string().refine((v) => !Number.isNaN(Date.parse(v)), { message: 'must be an ISO 8601 date-time' });

/** The fields of a cron create that are not part of the run payload. */
const CRON_ONLY = ['schedule', 'timezone', 'end_time', 'enabled', 'on_run_completed'] as const;

export const CronCreate = RunCreate.extend({
  schedule: z.string().min(1).max(256),
  timezone: z.string().min(1).max(64).nullish(),
  end_time: Timestamp.nullish(),
  enabled: z.boolean().nullish(),
  on_run_completed: z.enum(['delete', 'keep']).nullish(),
});

const Interrupts = z.union([z.literal('*'), z.array(z.string())]);
const obj = z.record(z.string(), z.unknown());

export const CronUpdate = z.object({
  schedule: z.string().min(1).max(256).optional(),
  timezone: z.string().min(1).max(64).nullish(),
  end_time: Timestamp.nullish(),
  enabled: z.boolean().optional(),
  on_run_completed: z.enum(['delete', 'keep']).optional(),
  input: z.unknown().optional(),
  metadata: obj.optional(),
  config: obj.optional(),
  context: obj.optional(),
  webhook: WebhookUrl.nullish(),
  interrupt_before: Interrupts.optional(),
  interrupt_after: Interrupts.optional(),
});

const CronSortBy = z.enum(['cron_id', 'assistant_id', 'thread_id', 'created_at', 'updated_at', 'next_run_date']);

export const CronSearch = z.object({
  assistant_id: z.string().min(1).nullish(),
  thread_id: z.uuid({ message: 'must be a UUID' }).nullish(),
  enabled: z.boolean().nullish(),
  limit: z.number().int().min(1).max(1000).default(10),
  offset: z.number().int().min(0).max(MAX_OFFSET).default(0),
  sort_by: CronSortBy.nullish(),
  sort_order: z.enum(['asc', 'desc']).nullish(),
  select: z.array(z.string()).nullish(),
});

export const CronCount = z.object({
  assistant_id: z.string().min(1).nullish(),
  thread_id: z.uuid({ message: 'must be a UUID' }).nullish(),
});

const CronParams = z.object({ cron_id: z.uuid({ message: 'must be a UUID' }) });

/** The public record (the owner's auth metadata stays inside). */
export function publicCron(c: CronRecord): Cron {
  const { owner_metadata: _o, owner_auth: _a, ...rest } = c;
  return rest;
}

function firstTick(schedule: string, timezone: string | null, endTime: string | null): string | null {
  if (timezone) checkTimezone(timezone);
  const next = nextTick(schedule, timezone, new Date(), endTime);
  return next ? isoNow(next.getTime()) : null;
}

export const cronRoutes =
  (deps: RouteDeps): FastifyPluginAsyncZod =>
  async (app) => {
    const { storage, service } = deps;

    const systemIds = new Map(deps.graphs.specs.map((spec) => [spec.graphId, spec.assistantId]));
    /** A search's assistant filter by graph name or id: null when it can name no assistant (nothing matches). */
    function assistantFilter(idOrGraph: string | null | undefined): string | undefined | null {
      if (!idOrGraph) return undefined;
      const id = systemIds.get(idOrGraph) ?? idOrGraph;
      return UUID_RE.test(id) ? id : null;
    }

    async function create(
      threadId: string | null,
      body: z.infer<typeof CronCreate>,
      filters: AuthFilters | undefined,
      auth: RequestAuth | null,
      assistantFilter: AssistantReadFilter | undefined,
    ): Promise<CronRecord> {
      service.checkWebhook(body.webhook);
      const assistant = await service.resolveAssistant(body.assistant_id, assistantFilter);
      if (threadId) await service.requireThread(threadId);
      const endTime = body.end_time ? isoNow(Date.parse(body.end_time)) : null;
      const next = firstTick(body.schedule, body.timezone ?? null, endTime);
      const payload: Json = { ...body };
      for (const k of CRON_ONLY) delete payload[k];
      const owner = equalityPart(filters);
      return storage.crons.create({
        cron_id: randomUUID(),
        assistant_id: assistant.assistant_id,
        thread_id: threadId,
        on_run_completed: threadId ? null : (body.on_run_completed ?? 'delete'),
        end_time: endTime,
        schedule: body.schedule,
        timezone: body.timezone ?? null,
        payload,
        user_id: auth?.user.identity ?? null,
        next_run_date: next,
        metadata: { ...(body.metadata ?? {}), ...owner },
        owner_metadata: owner,
        owner_auth: auth ? (toPlain(auth) as Json) : null,
        enabled: body.enabled ?? true,
      });
    }

    async function visibleCron(id: string, filters: AuthFilters | undefined): Promise<CronRecord> {
      const cron = await storage.crons.get(id);
      if (!cron || !matchesFilters(cron.metadata, filters)) throw new NotFoundError(`Cron not found: ${id}`);
      return cron;
    }

    app.post('/runs/crons', { schema: { body: CronCreate } }, async (req) => {
      const cron = await create(null, req.body, req.authz?.filters, req.auth ?? null, req.authz?.assistantFilter);
      return publicCron(cron);
    });

    app.post('/threads/:thread_id/runs/crons', { schema: { params: ThreadParams, body: CronCreate } }, async (req) => {
      const cron = await create(
        req.params.thread_id,
        req.body,
        req.authz?.filters,
        req.auth ?? null,
        req.authz?.assistantFilter,
      );
      return publicCron(cron);
    });

    app.post('/runs/crons/search', { schema: { body: CronSearch.optional() } }, async (req, reply) => {
      const q = CronSearch.parse(req.body ?? {});
      const filters = req.authz?.filters;
      const metadata = mergeMetadataFilter(null, filters);
      const assistant_id = assistantFilter(q.assistant_id);
      if (!metadata || assistant_id === null) return [];
      const page = await visiblePage(
        (limit, offset) =>
          storage.crons.search({
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
      const assistant_id = assistantFilter(q.assistant_id);
      if (!metadata || assistant_id === null) return 0;
      const query = { assistant_id, thread_id: q.thread_id ?? undefined, metadata };
      if (hasRowConditions(filters)) {
        const rows = await storage.crons.search({ ...query, limit: MAX_OFFSET });
        return rows.filter((c) => matchesFilters(c.metadata, filters)).length;
      }
      return storage.crons.count(query);
    });

    app.patch('/runs/crons/:cron_id', { schema: { params: CronParams, body: CronUpdate } }, async (req) => {
      const cur = await visibleCron(req.params.cron_id, req.authz?.filters);
      const b = req.body;
      service.checkWebhook(b.webhook);
      const patch: CronPatch = {};
      const payload: Json = { ...cur.payload };
      for (const k of ['input', 'config', 'context', 'webhook', 'interrupt_before', 'interrupt_after'] as const) {
        if (b[k] !== undefined) payload[k] = b[k];
      }
      if (b.metadata !== undefined) patch.metadata = { ...b.metadata, ...cur.owner_metadata };
      patch.payload = payload;
      if (b.enabled !== undefined) patch.enabled = b.enabled;
      if (b.on_run_completed !== undefined) {
        if (cur.thread_id)
          throw new ValidationError('on_run_completed: only a stateless cron (no thread) deletes its threads');
        patch.on_run_completed = b.on_run_completed;
      }
      const schedule = b.schedule ?? cur.schedule;
      const timezone = b.timezone === undefined ? cur.timezone : b.timezone;
      const endTime = b.end_time === undefined ? cur.end_time : b.end_time ? isoNow(Date.parse(b.end_time)) : null;
      if (
        b.schedule !== undefined ||
        b.timezone !== undefined ||
        b.end_time !== undefined ||
        (b.enabled && !cur.enabled)
      ) {
        // A new schedule (or a cron enabled again) starts from now: ticks it missed while disabled do not run.
        patch.schedule = schedule;
        patch.timezone = timezone;
        patch.end_time = endTime;
        patch.next_run_date = firstTick(schedule, timezone, endTime);
      }
      return publicCron(await storage.crons.patch(cur.cron_id, patch));
    });

    app.delete('/runs/crons/:cron_id', { schema: { params: CronParams } }, async (req, reply) => {
      const cur = await visibleCron(req.params.cron_id, req.authz?.filters);
      await storage.crons.delete(cur.cron_id);
      return reply.code(204).send();
    });
  };

// Crons: the records of scheduled runs (client.crons.*). A stateless cron runs each tick on a new thread; a thread
// cron on its thread. The scheduler (runs/crons.ts) fires them; this service keeps the records.
import { randomUUID } from 'node:crypto';
import { NotFoundError, ValidationError } from '../../lib/errors.ts';
import { equalityPart, matchesFilters, type AuthFilters, type RequestAuth } from '../auth/custom.ts';
import type { GraphRegistry } from '../graphs/index.ts';
import type { CronCreateBody, CronUpdateBody } from '../schemas/crons.ts';
import { checkTimezone, nextTick } from './cron-scheduler.ts';
import { toPlain } from '../serde.ts';
import { isoNow } from '../storage/common.ts';
import type { CronPatch, CronQuery, CronRecord, Json, Storage } from '../storage/types.ts';
import type { AssistantService } from './assistants.ts';
import { UUID_RE, type AssistantReadFilter } from './context.ts';
import type { RunService } from './runs.ts';
import type { ThreadService } from './threads.ts';

/** The fields of a cron create that are not part of the run payload. */
const CRON_ONLY = ['schedule', 'timezone', 'end_time', 'enabled', 'on_run_completed'] as const;

function firstTick(schedule: string, timezone: string | null, endTime: string | null): string | null {
  if (timezone) checkTimezone(timezone);
  const next = nextTick(schedule, timezone, new Date(), endTime);
  return next ? isoNow(next.getTime()) : null;
}

/** Who creates a cron under custom auth: the handler's filter (its owner), the caller, their assistants:read. */
export interface CronCaller {
  filters: AuthFilters | undefined;
  auth: RequestAuth | null;
  assistantFilter: AssistantReadFilter | undefined;
}

export type CronService = ReturnType<typeof createCronService>;

export function createCronService(deps: {
  storage: Storage;
  graphs: GraphRegistry;
  assistants: AssistantService;
  threads: ThreadService;
  runs: RunService;
}) {
  const { storage, assistants, threads, runs } = deps;
  const systemIds = new Map(deps.graphs.specs.map((spec) => [spec.graphId, spec.assistantId]));

  /** A search's assistant filter by graph name or id: null when it can name no assistant (nothing matches). */
  function assistantFilter(idOrGraph: string | null | undefined): string | undefined | null {
    if (!idOrGraph) return undefined;
    const id = systemIds.get(idOrGraph) ?? idOrGraph;
    return UUID_RE.test(id) ? id : null;
  }

  async function create(threadId: string | null, body: CronCreateBody, caller: CronCaller): Promise<CronRecord> {
    runs.checkWebhook(body.webhook);
    const assistant = await assistants.resolve(body.assistant_id, caller.assistantFilter);
    if (threadId) await threads.require(threadId);
    const endTime = body.end_time ? isoNow(Date.parse(body.end_time)) : null;
    const next = firstTick(body.schedule, body.timezone ?? null, endTime);
    const payload: Json = { ...body };
    for (const k of CRON_ONLY) delete payload[k];
    const owner = equalityPart(caller.filters);
    const { auth } = caller;
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

  /** A cron the caller's custom-auth filter lets them see; one it hides is the same 404 as a missing one. */
  async function visible(id: string, filters: AuthFilters | undefined): Promise<CronRecord> {
    const cron = await storage.crons.get(id);
    if (!cron || !matchesFilters(cron.metadata, filters)) throw new NotFoundError(`Cron not found: ${id}`);
    return cron;
  }

  async function update(id: string, b: CronUpdateBody, filters: AuthFilters | undefined): Promise<CronRecord> {
    const cur = await visible(id, filters);
    runs.checkWebhook(b.webhook);
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
    return storage.crons.patch(cur.cron_id, patch);
  }

  async function remove(id: string, filters: AuthFilters | undefined): Promise<void> {
    const cur = await visible(id, filters);
    await storage.crons.delete(cur.cron_id);
  }

  return {
    assistantFilter,
    create,
    update,
    delete: remove,
    get: (id: string): Promise<CronRecord | null> => storage.crons.get(id),
    search: (q: CronQuery): Promise<CronRecord[]> => storage.crons.search(q),
    count: (q: CronQuery): Promise<number> => storage.crons.count(q),
  };
}

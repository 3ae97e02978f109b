// Crons (client.crons.*): scheduled runs, created with a run create's fields and a schedule.
import { z } from 'zod';
import { Interrupts, MAX_OFFSET, WebhookUrl, obj } from './common.ts';
import { RunCreate } from './runs.ts';

const Timestamp = z.string().refine((v) => !Number.isNaN(Date.parse(v)), { message: 'must be an ISO 8601 date-time' });

export const CronCreate = RunCreate.extend({
  schedule: z.string().min(1).max(256),
  timezone: z.string().min(1).max(64).nullish(),
  end_time: Timestamp.nullish(),
  enabled: z.boolean().nullish(),
  on_run_completed: z.enum(['delete', 'keep']).nullish(),
});

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

export const CronParams = z.object({ cron_id: z.uuid({ message: 'must be a UUID' }) });

export type CronCreateBody = z.infer<typeof CronCreate>;
export type CronUpdateBody = z.infer<typeof CronUpdate>;

// Runs: creates (one, a batch), lists, join and cancel.
import { z } from 'zod';
import { API_STREAM_MODES } from '../streams/stream-modes.ts';
import {
  CheckpointRef,
  Command,
  Config,
  Interrupts,
  MAX_OFFSET,
  WebhookUrl,
  boolish,
  obj,
  querySelect,
  uuid,
} from './common.ts';

/** after_seconds: a run may be scheduled at most one year (365 days) ahead. */
export const MAX_AFTER_SECONDS = 31_536_000;

export const RunStatus = z.enum(['pending', 'running', 'error', 'success', 'timeout', 'interrupted']);
export const MultitaskStrategy = z.enum(['reject', 'interrupt', 'rollback', 'enqueue']);
const StreamMode = z.enum(API_STREAM_MODES, {
  error: `unknown stream mode; valid modes: ${API_STREAM_MODES.join(', ')}`,
});

export const RunCreate = z.object({
  assistant_id: z.string().min(1),
  input: z.unknown().optional(),
  command: Command.nullish(),
  checkpoint: CheckpointRef.nullish(),
  checkpoint_id: z.string().nullish(),
  metadata: obj.nullish(),
  config: Config.nullish(),
  context: obj.nullish(),
  webhook: WebhookUrl.nullish(),
  interrupt_before: Interrupts.nullish(),
  interrupt_after: Interrupts.nullish(),
  // One mode or a list; a refusal names the bad mode's place and lists the valid ones.
  stream_mode: z
    .union([StreamMode, z.array(StreamMode)], {
      error: `unknown stream mode; valid modes: ${API_STREAM_MODES.join(', ')}`,
    })
    .nullish(),
  stream_subgraphs: z.boolean().nullish(),
  stream_resumable: z.boolean().nullish(),
  on_disconnect: z.enum(['cancel', 'continue']).nullish(),
  feedback_keys: z.array(z.string()).nullish(),
  multitask_strategy: MultitaskStrategy.nullish(),
  if_not_exists: z.enum(['create', 'reject']).nullish(),
  after_seconds: z.number().nonnegative().max(MAX_AFTER_SECONDS).nullish(),
  on_completion: z.enum(['delete', 'keep']).nullish(),
  durability: z.enum(['sync', 'async', 'exit']).nullish(),
  checkpoint_during: z.boolean().nullish(),
  // SDK strictResume: a command.resume naming an interrupt no longer waiting fails (UnknownInterruptError).
  strict_resume: z.boolean().nullish(),
  langsmith_tracer: z.unknown().optional(),
});
export type RunCreateBody = z.infer<typeof RunCreate>;

export const RunListQuery = z.object({
  limit: z.coerce.number().int().min(1).max(1000).default(10),
  offset: z.coerce.number().int().min(0).max(MAX_OFFSET).default(0),
  status: RunStatus.optional(),
  select: querySelect,
});

/**
 * reason=taken (SDK runs.cancel(..., {reason: 'taken'})): the client took the run's input into another run
 * (steering); the run keeps it as its cancel_reason, `taken:` first. Rollback deletes the run, so nothing would keep
 * it: the two together are a 422.
 */
export const CancelQuery = z
  .object({
    wait: boolish.default(false),
    action: z.enum(['interrupt', 'rollback']).default('interrupt'),
    reason: z.enum(['taken']).optional(),
  })
  .refine((q) => !(q.reason && q.action === 'rollback'), {
    message: 'reason is only valid with action=interrupt (a rolled-back run is deleted)',
    path: ['reason'],
  });

export const JoinQuery = z.object({ cancel_on_disconnect: boolish.default(false) });

/**
 * POST /runs/cancel (the platform's RunsCancel, a oneOf): `{thread_id, run_ids}` cancels those runs of the thread,
 * `{status}` every run in that status ("all": pending and running). Anything else, both shapes at once included,
 * is a 422.
 */
export const RunsCancel = z
  .object({
    status: z.enum(['pending', 'running', 'all']).nullish(),
    thread_id: uuid.nullish(),
    run_ids: z.array(uuid).max(1000).nullish(),
  })
  .superRefine((b, ctx) => {
    const byStatus = b.status != null;
    const byIds = b.thread_id != null || b.run_ids != null;
    if (byStatus === byIds || (byIds && (b.thread_id == null || b.run_ids == null))) {
      ctx.addIssue({
        code: 'custom',
        message: 'give either status ("pending", "running" or "all"), or thread_id and run_ids',
      });
    }
  });

export const RunsCancelQuery = z.object({ action: z.enum(['interrupt', 'rollback']).default('interrupt') });

/** POST /runs/batch: stateless run creates, at most 100 at once (hostile-sized arrays stop here). */
/**
 * The JS SDK's runs.createBatch sends each payload's keys as the caller wrote them, camelCase (streamMode,
 * multitaskStrategy, ...): they are read as the snake_case fields they name (a snake_case key present wins), so the
 * options a JS caller gives are not silently lost.
 */
const camelToSnake = (key: string) => key.replace(/[A-Z]/g, (c) => `_${c.toLowerCase()}`);
const RUN_CREATE_KEYS = new Set(Object.keys(RunCreate.shape));
const batchItem = z.preprocess((item) => {
  if (!item || typeof item !== 'object' || Array.isArray(item)) return item;
  const out: Record<string, unknown> = { ...(item as Record<string, unknown>) };
  for (const [key, value] of Object.entries(item)) {
    const snake = camelToSnake(key);
    if (snake !== key && RUN_CREATE_KEYS.has(snake) && !(snake in out)) out[snake] = value;
  }
  return out;
}, RunCreate);

export const RunBatchCreate = z.array(batchItem).min(1).max(100);

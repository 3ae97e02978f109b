// Threads: create, patch, search, count, prune, state and history.
import { z } from 'zod';
import { MAX_THREAD_TTL_MINUTES } from '../storage/thread-ttl.ts';
import { CheckpointRef, Command, MAX_OFFSET, SortOrder, boolish, obj, querySelect, uuid } from './common.ts';

export const ThreadStatus = z.enum(['idle', 'busy', 'interrupted', 'error']);

/** POST /threads/prune (the platform's ThreadPruneRequest; strategy defaults to delete there too). */
export const ThreadPrune = z.object({
  thread_ids: z.array(uuid).max(1000),
  strategy: z.enum(['delete', 'keep_latest']).nullish(),
});

/** Thread time-to-live: minutes after which the thread is deleted (a bare number means strategy delete). */
export const ThreadTtl = z.union([
  z.number().positive().max(MAX_THREAD_TTL_MINUTES),
  z.object({ ttl: z.number().positive().max(MAX_THREAD_TTL_MINUTES), strategy: z.literal('delete').default('delete') }),
]);

/** Minutes of a thread `ttl` as the SDK sends it (`{ttl, strategy}` or a bare number). */
export function ttlMinutes(ttl: z.infer<typeof ThreadTtl> | null | undefined): number | undefined {
  if (ttl == null) return undefined;
  return typeof ttl === 'number' ? ttl : ttl.ttl;
}

const Superstep = z.object({
  updates: z.array(z.object({ values: z.unknown().optional(), command: Command.nullish(), as_node: z.string() })),
});

export const ThreadCreate = z.object({
  thread_id: uuid.optional(),
  metadata: obj.nullish(),
  if_exists: z.enum(['raise', 'do_nothing']).nullish(),
  ttl: ThreadTtl.nullish(),
  supersteps: z.array(Superstep).nullish(),
});

export const ThreadPatch = z.object({ metadata: obj.nullish(), ttl: ThreadTtl.nullish() });

export const ThreadSearch = z.object({
  ids: z.array(uuid).nullish(),
  metadata: obj.nullish(),
  values: obj.nullish(),
  status: ThreadStatus.nullish(),
  limit: z.number().int().min(1).max(1000).default(10),
  offset: z.number().int().min(0).max(MAX_OFFSET).default(0),
  sort_by: z.enum(['thread_id', 'status', 'created_at', 'updated_at', 'state_updated_at']).nullish(),
  sort_order: SortOrder.nullish(),
  select: z.array(z.string()).nullish(),
});

export const ThreadCount = z.object({
  metadata: obj.nullish(),
  values: obj.nullish(),
  status: ThreadStatus.nullish(),
});

/** The fields of a thread state a `select` may name (SDK ThreadStateSelectField); `values.<key>` names one key. */
const STATE_FIELDS = [
  'values',
  'next',
  'tasks',
  'checkpoint',
  'metadata',
  'created_at',
  'parent_checkpoint',
  'interrupts',
];
const stateField = z
  .string()
  .max(200)
  .refine((f) => STATE_FIELDS.includes(f) || (f.startsWith('values.') && f.length > 'values.'.length), {
    message: `must be one of ${STATE_FIELDS.join(', ')} or values.<key>`,
  });
const StateSelect = z.array(stateField).max(50);

/**
 * A thread state with only the selected fields (none: all). `checkpoint` brings its checkpoint_id along (and
 * parent_checkpoint its parent_checkpoint_id), the flat copies older clients read; `values.<key>` picks keys
 * of values, a key the state lacks is left out.
 */
export function selectState<T extends { values: unknown }>(state: T, select: string[] | null | undefined): Partial<T> {
  if (!select?.length) return state;
  const src = state as Record<string, unknown>;
  const out: Record<string, unknown> = {};
  const pick = (k: string) => {
    if (k in src) out[k] = src[k];
  };
  for (const f of select) {
    if (f.startsWith('values.')) continue;
    pick(f);
    if (f === 'checkpoint') pick('checkpoint_id');
    if (f === 'parent_checkpoint') pick('parent_checkpoint_id');
  }
  const keys = select.filter((f) => f.startsWith('values.')).map((f) => f.slice('values.'.length));
  if (keys.length && !select.includes('values')) {
    const v = state.values;
    const values = v && typeof v === 'object' && !Array.isArray(v) ? (v as Record<string, unknown>) : {};
    out.values = Object.fromEntries(keys.filter((k) => Object.hasOwn(values, k)).map((k) => [k, values[k]]));
  }
  return out as Partial<T>;
}

export const StateQuery = z.object({
  subgraphs: boolish.default(false),
  select: querySelect.pipe(StateSelect.optional()),
});

export const StateUpdate = z.object({
  values: z.unknown().optional(),
  checkpoint_id: z.string().nullish(),
  checkpoint: CheckpointRef.nullish(),
  as_node: z.string().nullish(),
});

/**
 * PATCH /threads/{id}/state: metadata merged into the latest checkpoint's (the SDK sends only this), or into the
 * checkpoint named as POST /threads/{id}/state names one.
 */
export const StatePatch = z.object({
  metadata: obj,
  checkpoint_id: z.string().nullish(),
  checkpoint: CheckpointRef.nullish(),
});

export const StateCheckpoint = z.object({
  checkpoint: CheckpointRef,
  subgraphs: z.boolean().nullish(),
  select: StateSelect.nullish(),
});

/**
 * History's `before`: the SDK sends a config ({configurable: {checkpoint_id}}); a checkpoint ({checkpoint_id}, as
 * a state's `checkpoint` reads) and a bare checkpoint id are taken too.
 */
const HistoryBefore = z.union([z.string(), CheckpointRef.extend({ configurable: CheckpointRef.nullish() })]);

/** The checkpoint id a history `before` names, in whichever of its shapes it came. */
export function beforeCheckpointId(before: z.infer<typeof HistoryBefore> | null | undefined): string | undefined {
  if (before == null) return undefined;
  if (typeof before === 'string') return before;
  return before.configurable?.checkpoint_id ?? before.checkpoint_id ?? undefined;
}

export const HistoryBody = z.object({
  limit: z.number().int().min(1).max(1000).default(10),
  before: HistoryBefore.nullish(),
  metadata: obj.nullish(),
  checkpoint: CheckpointRef.nullish(),
  select: StateSelect.nullish(),
});

export const HistoryQuery = z.object({
  limit: z.coerce.number().int().min(1).max(1000).default(10),
  before: z.string().optional(),
  select: querySelect.pipe(StateSelect.optional()),
});

// Request schemas (zod) for every route; fastify-type-provider-zod validates with them and the OpenAPI
// document is generated from them. Field names and enums follow the platform's API and today's SDK.
import { z } from 'zod';
import { MAX_THREAD_TTL_MINUTES } from '../storage/thread-ttl.ts';

/** after_seconds: a run may be scheduled at most one year (365 days) ahead. */
export const MAX_AFTER_SECONDS = 31_536_000;
/** Largest page offset of a list or search (fits a 32-bit integer in either store). */
export const MAX_OFFSET = 2_147_483_647;

const obj = z.record(z.string(), z.unknown());
const uuid = z.uuid({ message: 'must be a UUID' });

export const ThreadParams = z.object({ thread_id: uuid });
export const RunParams = z.object({ thread_id: uuid, run_id: uuid });
export const AssistantParams = z.object({ assistant_id: z.string().min(1) });
export const CheckpointParams = z.object({ thread_id: uuid, checkpoint_id: z.string().min(1) });

export const ThreadStatus = z.enum(['idle', 'busy', 'interrupted', 'error']);
export const RunStatus = z.enum(['pending', 'running', 'error', 'success', 'timeout', 'interrupted']);
export const MultitaskStrategy = z.enum(['reject', 'interrupt', 'rollback', 'enqueue']);
const STREAM_MODES = [
  'values',
  'messages',
  'messages-tuple',
  'updates',
  'events',
  'tasks',
  'checkpoints',
  'debug',
  'custom',
] as const;
const StreamMode = z.enum(STREAM_MODES, { error: `unknown stream mode; valid modes: ${STREAM_MODES.join(', ')}` });
const Interrupts = z.union([z.literal('*'), z.array(z.string())]);
const SortOrder = z.enum(['asc', 'desc']);

const Config = z
  .object({
    tags: z.array(z.string()).optional(),
    recursion_limit: z.number().int().positive().optional(),
    configurable: obj.optional(),
    metadata: obj.optional(),
  })
  .passthrough();

const CheckpointRef = z
  .object({
    checkpoint_id: z.string().nullish(),
    checkpoint_ns: z.string().nullish(),
    checkpoint_map: obj.nullish(),
    thread_id: z.string().nullish(),
  })
  .passthrough();

export const Command = z.object({
  update: z.unknown().optional(),
  resume: z.unknown().optional(),
  goto: z.unknown().optional(),
});

function isHttpUrl(v: string): boolean {
  try {
    const u = new URL(v);
    return (u.protocol === 'http:' || u.protocol === 'https:') && !!u.hostname;
  } catch {
    return false;
  }
}

/** A path on this deployment ("/hooks/done"): not "//host" (a URL without scheme) and no backslash. */
function isOwnPath(v: string): boolean {
  return v.startsWith('/') && !v.startsWith('//') && !v.includes('\\');
}

/**
 * Where a run's end is POSTed: an absolute http(s) URL, or a path, which the deployment's own custom routes
 * (langgraph.json http.app) answer.
 */
export const WebhookUrl = z
  .string()
  .max(2048)
  .refine((v) => isHttpUrl(v) || isOwnPath(v), {
    message: 'must be an absolute http:// or https:// URL, or a path of this deployment\'s custom routes ("/my-route")',
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
    .union([StreamMode, z.array(StreamMode)], { error: `unknown stream mode; valid modes: ${STREAM_MODES.join(', ')}` })
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
  langsmith_tracer: z.unknown().optional(),
});
export type RunCreateBody = z.infer<typeof RunCreate>;

/** Only the named fields of each row (none named: whole rows); a name a row lacks is skipped. */
export function selectFields<T extends object>(rows: T[], fields: string[] | null | undefined): Partial<T>[] {
  if (!fields?.length) return rows;
  return rows.map(
    (r) => Object.fromEntries(fields.filter((f) => f in r).map((f) => [f, r[f as keyof T]])) as Partial<T>,
  );
}

/** `select` in a query string: the SDK sends a JSON list (`["run_id","status"]`); a plain name may repeat. */
const querySelect = z.preprocess(
  (v) => {
    if (typeof v !== 'string') return v;
    if (!v.startsWith('[')) return [v];
    try {
      return JSON.parse(v) as unknown;
    } catch {
      return v; // refused below, naming the field
    }
  },
  z.array(z.string().max(100)).max(50).optional(),
);

export const RunListQuery = z.object({
  limit: z.coerce.number().int().min(1).max(1000).default(10),
  offset: z.coerce.number().int().min(0).max(MAX_OFFSET).default(0),
  status: RunStatus.optional(),
  select: querySelect,
});

const boolish = z
  .union([z.boolean(), z.enum(['0', '1', 'true', 'false'])])
  .transform((v) => v === true || v === '1' || v === 'true');

export const CancelQuery = z.object({
  wait: boolish.default(false),
  action: z.enum(['interrupt', 'rollback']).default('interrupt'),
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

export const StateQuery = z.object({ subgraphs: boolish.default(false) });

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

export const StateCheckpoint = z.object({ checkpoint: CheckpointRef, subgraphs: z.boolean().nullish() });

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
});

export const HistoryQuery = z.object({
  limit: z.coerce.number().int().min(1).max(1000).default(10),
  before: z.string().optional(),
});

export const AssistantCreate = z.object({
  graph_id: z.string().min(1),
  assistant_id: uuid.nullish(),
  config: Config.nullish(),
  context: obj.nullish(),
  metadata: obj.nullish(),
  if_exists: z.enum(['raise', 'do_nothing']).nullish(),
  name: z.string().nullish(),
  description: z.string().nullish(),
});

export const AssistantPatch = z.object({
  graph_id: z.string().min(1).nullish(),
  config: Config.nullish(),
  context: obj.nullish(),
  metadata: obj.nullish(),
  name: z.string().nullish(),
  description: z.string().nullish(),
});

export const AssistantSearch = z.object({
  graph_id: z.string().nullish(),
  name: z.string().nullish(),
  metadata: obj.nullish(),
  limit: z.number().int().min(1).max(1000).default(10),
  offset: z.number().int().min(0).max(MAX_OFFSET).default(0),
  sort_by: z.enum(['assistant_id', 'graph_id', 'name', 'created_at', 'updated_at']).nullish(),
  sort_order: SortOrder.nullish(),
  select: z.array(z.string()).nullish(),
});

export const AssistantCount = z.object({
  graph_id: z.string().nullish(),
  name: z.string().nullish(),
  metadata: obj.nullish(),
});

export const AssistantVersionsQuery = z.object({
  limit: z.number().int().min(1).max(1000).default(10),
  offset: z.number().int().min(0).max(MAX_OFFSET).default(0),
  metadata: obj.nullish(),
});
export const AssistantLatest = z.object({ version: z.number().int().min(1) });

export const AssistantDeleteQuery = z.object({ delete_threads: boolish.default(false) });

export const SubgraphParams = AssistantParams.extend({ namespace: z.string().min(1) });
export const SubgraphQuery = z.object({ recurse: boolish.default(false) });

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

export const GraphQuery = z.object({
  xray: z.union([z.coerce.number().int(), boolish]).optional(),
});

// Thread time-to-live, as on the LangGraph platform: a thread created or patched with `ttl` (minutes, strategy
// "delete"), or created while langgraph.json has `"checkpointer": {"ttl": {"default_ttl": N}}`, expires once it has
// gone `ttl` minutes without an update. Every write to the thread counts as an update (created, patched, a run
// started or ended on it, a state update), so a thread in use does not expire, and a thread with a run pending or
// running is never swept: the sweep takes it after the run, once the TTL has passed again since the run ended.
// What expiry does is the thread's strategy: "delete" (a thread's own ttl, and the langgraph.json default unless it
// says otherwise) deletes it with its runs and checkpoints; "keep_latest" (langgraph.json's strategy, for threads
// created under its default_ttl) prunes it as POST /threads/prune keep_latest does (the thread, its runs and the
// latest checkpoint of each namespace stay) and records the updated_at it pruned, so an idle thread is pruned once,
// and again only after a later update and another TTL without one. The default applies to threads created from
// then on (runs' own threads included), not to older ones. Sweeps run every `sweep_interval_minutes` (default 5)
// in every server process.
import { readFile } from 'node:fs/promises';
import { z } from 'zod';
import type { Logger } from '../../lib/logger.ts';
import type { PruneStrategy, ThreadStore } from './types.ts';

/** Ten years: bounds what a client or langgraph.json may ask for (and keeps timestamp arithmetic in range). */
export const MAX_THREAD_TTL_MINUTES = 5_256_000;

export const checkpointerSectionSchema = z.looseObject({
  ttl: z
    .looseObject({
      strategy: z.enum(['delete', 'keep_latest']).default('delete'),
      default_ttl: z.number().positive().max(MAX_THREAD_TTL_MINUTES).nullable().optional(),
      sweep_interval_minutes: z.number().positive().max(MAX_THREAD_TTL_MINUTES).nullable().optional(),
      sweep_limit: z.number().int().positive().max(100_000).nullable().optional(),
    })
    .optional(),
});

export interface ThreadTtlConfig {
  /** TTL of threads created without one; null: they never expire. */
  defaultMinutes: number | null;
  /** What expiry does to threads created under the default (a thread's own ttl is always "delete"). */
  strategy: PruneStrategy;
  sweepMinutes: number;
  /** Threads deleted or pruned per sweep at most. */
  sweepLimit: number;
}

export const DEFAULT_THREAD_TTL: ThreadTtlConfig = {
  defaultMinutes: null,
  strategy: 'delete',
  sweepMinutes: 5,
  sweepLimit: 1000,
};

/** The "checkpointer" section of the langgraph.json at `configPath` (an invalid one names the key that is wrong). */
export async function readThreadTtlConfig(configPath: string): Promise<ThreadTtlConfig> {
  const json = JSON.parse(await readFile(configPath, 'utf8')) as Record<string, unknown>;
  if (json.checkpointer === undefined) return DEFAULT_THREAD_TTL;
  const parsed = checkpointerSectionSchema.safeParse(json.checkpointer);
  if (!parsed.success) {
    const issue = parsed.error.issues[0]!;
    throw new Error(`${configPath}: checkpointer.${issue.path.join('.')}: ${issue.message}`);
  }
  const ttl = parsed.data.ttl;
  if (!ttl) return DEFAULT_THREAD_TTL;
  const sweep = {
    sweepMinutes: ttl.sweep_interval_minutes ?? DEFAULT_THREAD_TTL.sweepMinutes,
    sweepLimit: ttl.sweep_limit ?? DEFAULT_THREAD_TTL.sweepLimit,
  };
  return { defaultMinutes: ttl.default_ttl ?? null, strategy: ttl.strategy, ...sweep };
}

/** setInterval's longest delay: a longer one would fire every millisecond. */
const MAX_TIMER_MS = 2 ** 31 - 1;

/** Sweeps expired threads every `sweepMinutes` until stopped; a failed sweep is logged and retried next time. */
export function startThreadSweeper(threads: ThreadStore, config: ThreadTtlConfig, logger?: Logger): () => void {
  let running = false;
  const timer = setInterval(
    () => {
      if (running) return;
      running = true;
      threads
        .sweepExpired(config.sweepLimit)
        .then(({ deleted, pruned }) => {
          if (deleted.length)
            logger?.info(
              { threads: deleted.length, thread_ids: deleted.slice(0, 20) },
              'deleted threads past their ttl',
            );
          if (pruned.length)
            logger?.info(
              { threads: pruned.length, thread_ids: pruned.slice(0, 20) },
              'pruned threads past their ttl to their latest checkpoints',
            );
        })
        .catch((err: unknown) => logger?.warn({ err }, 'sweeping expired threads failed'))
        .finally(() => (running = false));
    },
    Math.min(config.sweepMinutes * 60_000, MAX_TIMER_MS),
  );
  timer.unref();
  return () => clearInterval(timer);
}

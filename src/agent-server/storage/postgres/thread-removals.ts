// Removing threads from the Postgres store: one thread deleted, a list pruned (`delete`, or `keep_latest`: only the
// checkpoints GET state and a resume still read are kept), and the TTL sweep, which does either by the thread's
// strategy. A thread's runs and checkpoints go with it; workers holding a removed run are told to stop.
import { ConflictError } from '../../../lib/errors.ts';
import { pruneBusyDetail } from '../run-rules.ts';
import type { PruneStrategy, ThreadStore } from '../types.ts';
import type { PgContext, Q } from './context.ts';

export function postgresThreadRemovals(ctx: PgContext): Pick<ThreadStore, 'delete' | 'prune' | 'sweepExpired'> {
  const { s, tx, notify, requireThread } = ctx;

  /** keep_latest on the threads whose checkpoint-table ids are `cpIds`, inside the open transaction. */
  async function keepLatestIn(c: Q, cpIds: string[]): Promise<void> {
    // The latest checkpoint of each namespace is the one PostgresSaver.getTuple loads (highest checkpoint_id);
    // a legacy one (v < 4) keeps its parent, whose TASKS writes the saver reads as its pending sends.
    await c.query(
      `WITH latest AS (
        SELECT DISTINCT ON (thread_id, checkpoint_ns) thread_id, checkpoint_ns, checkpoint_id,
          parent_checkpoint_id, checkpoint
        FROM ${s}.checkpoints WHERE thread_id = ANY($1::text[])
        ORDER BY thread_id, checkpoint_ns, checkpoint_id DESC),
      keep AS (
        SELECT thread_id, checkpoint_ns, checkpoint_id FROM latest
        UNION SELECT thread_id, checkpoint_ns, parent_checkpoint_id FROM latest
          WHERE parent_checkpoint_id IS NOT NULL AND coalesce((checkpoint->>'v')::numeric, 0) < 4)
      DELETE FROM ${s}.checkpoints c WHERE c.thread_id = ANY($1::text[]) AND NOT EXISTS (
        SELECT 1 FROM keep k WHERE k.thread_id = c.thread_id AND k.checkpoint_ns = c.checkpoint_ns
          AND k.checkpoint_id = c.checkpoint_id)`,
      [cpIds],
    );
    await c.query(
      `DELETE FROM ${s}.checkpoint_writes w WHERE w.thread_id = ANY($1::text[]) AND NOT EXISTS (
        SELECT 1 FROM ${s}.checkpoints c WHERE c.thread_id = w.thread_id AND c.checkpoint_ns = w.checkpoint_ns
          AND c.checkpoint_id = w.checkpoint_id)`,
      [cpIds],
    );
    // Channel values live in blobs keyed by (channel, version): those no kept checkpoint's channel_versions
    // names are no longer read.
    await c.query(
      `DELETE FROM ${s}.checkpoint_blobs b WHERE b.thread_id = ANY($1::text[]) AND NOT EXISTS (
        SELECT 1 FROM ${s}.checkpoints c WHERE c.thread_id = b.thread_id AND c.checkpoint_ns = b.checkpoint_ns
          AND c.checkpoint->'channel_versions'->>b.channel = b.version)`,
      [cpIds],
    );
    await c.query(
      `UPDATE ${s}.checkpoints c SET parent_checkpoint_id = NULL WHERE c.thread_id = ANY($1::text[])
      AND c.parent_checkpoint_id IS NOT NULL AND NOT EXISTS (
        SELECT 1 FROM ${s}.checkpoints p WHERE p.thread_id = c.thread_id AND p.checkpoint_ns = c.checkpoint_ns
          AND p.checkpoint_id = c.parent_checkpoint_id)`,
      [cpIds],
    );
  }

  /**
   * Deletes threads (uuid `ids`), their runs and their checkpoints (`cpIds`: the checkpoint tables key threads by
   * text), inside the open transaction; returns the deleted runs.
   */
  async function dropThreads(c: Q, ids: string[], cpIds: string[]): Promise<{ run_id: string; status: string }[]> {
    const { rows } = await c.query(`DELETE FROM ${s}.runs WHERE thread_id = ANY($1::uuid[]) RETURNING run_id, status`, [
      ids,
    ]);
    await c.query(`DELETE FROM ${s}.threads WHERE thread_id = ANY($1::uuid[])`, [ids]);
    for (const t of ['checkpoint_writes', 'checkpoint_blobs', 'checkpoints']) {
      await c.query(`DELETE FROM ${s}.${t} WHERE thread_id = ANY($1::text[])`, [cpIds]);
    }
    return rows as { run_id: string; status: string }[];
  }

  /** Workers holding a deleted run stop it (their finish() then finds nothing to update); its joiners are told. */
  async function stopDeleted(c: Q, runs: { run_id: string; status: string }[]): Promise<void> {
    for (const r of runs.filter((x) => x.status === 'running'))
      await notify(c, { type: 'cancel', run_id: r.run_id, action: 'interrupt' });
    for (const r of runs) await notify(c, { type: 'run_done', run_id: r.run_id });
  }

  return {
    async delete(id: string) {
      await tx(async (c) => {
        await requireThread(c, id, true);
        await stopDeleted(c, await dropThreads(c, [id], [id]));
      });
    },
    async prune(ids: string[], strategy: PruneStrategy) {
      const unique = [...new Set(ids)];
      if (!unique.length) return [];
      return tx(async (c) => {
        // Locked in id order (two prunes of overlapping lists never wait on each other in a cycle); a run create
        // or claim on these threads waits for the commit.
        const { rows } = await c.query(
          `SELECT thread_id::text AS id FROM ${s}.threads WHERE thread_id = ANY($1::uuid[]) ORDER BY thread_id FOR UPDATE`,
          [unique],
        );
        const found = rows.map((r) => r.id as string);
        if (!found.length) return [];
        // Checkpoint tables key threads by text: the canonical id, and the id as the request spelled it.
        const lower = new Set(found);
        const cpIds = [...new Set([...found, ...unique.filter((id) => lower.has(id.toLowerCase()))])];
        if (strategy === 'delete') {
          await stopDeleted(c, await dropThreads(c, found, cpIds));
          return found;
        }
        const { rows: busy } = await c.query(
          `SELECT DISTINCT thread_id::text AS id FROM ${s}.runs WHERE thread_id = ANY($1::uuid[])
          AND status IN ('pending','running')`,
          [found],
        );
        if (busy.length) {
          const ids = new Set(busy.map((r) => r.id as string));
          throw new ConflictError(pruneBusyDetail(found.filter((id) => ids.has(id))));
        }
        await keepLatestIn(c, cpIds);
        return found;
      });
    },
    async sweepExpired(limit: number) {
      return tx(async (c) => {
        // Rows a run is being created on are locked by that transaction and skipped: the next sweep sees them busy.
        // A keep_latest thread already pruned at its current updated_at is left alone until it is updated again.
        const { rows } = await c.query(
          `SELECT thread_id, coalesce(ttl_strategy, 'delete') AS strategy FROM ${s}.threads t
          WHERE ttl_minutes IS NOT NULL AND status <> 'busy' AND updated_at + ttl_minutes * interval '1 minute' < now()
          AND (coalesce(ttl_strategy, 'delete') <> 'keep_latest'
            OR ttl_pruned_updated_at IS DISTINCT FROM updated_at)
          AND NOT EXISTS (SELECT 1 FROM ${s}.runs r WHERE r.thread_id = t.thread_id AND r.status IN ('pending','running'))
          LIMIT $1 FOR UPDATE SKIP LOCKED`,
          [limit],
        );
        const pruned = rows.filter((r) => r.strategy === 'keep_latest').map((r) => r.thread_id as string);
        const deleted = rows.filter((r) => r.strategy !== 'keep_latest').map((r) => r.thread_id as string);
        if (pruned.length) {
          await keepLatestIn(c, pruned);
          await c.query(
            `UPDATE ${s}.threads SET ttl_pruned_updated_at = updated_at WHERE thread_id = ANY($1::uuid[])`,
            [pruned],
          );
        }
        // Threads with a pending or running run are not selected: no worker or joiner needs telling.
        if (deleted.length) await dropThreads(c, deleted, deleted);
        return { deleted, pruned };
      });
    },
  };
}

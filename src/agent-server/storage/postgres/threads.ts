// Threads of the Postgres store (a thread's runs and checkpoints go with it).
import { ConflictError, NotFoundError } from '../../../lib/errors.ts';
import { THREAD_HEAD_COLUMNS, THREAD_SORT, threadHeadOf } from '../common.ts';
import { pruneBusyDetail } from '../run-rules.ts';
import type { IfExists, Json, NewThread, PruneStrategy, ThreadQuery, ThreadStore } from '../types.ts';
import { checkpointSelectList, splitThreadRows } from '../read-ahead.ts';
import type { FewerTripsPostgresSaver } from './checkpointer.ts';
import { THREAD_COLS, type PgContext, type Q } from './context.ts';
import { jsonbParam } from '../data-cipher.ts';

/** The columns of the saver's checkpoint read, as the thread-and-checkpoints statement names them (ck_*). */
const CHECKPOINT_COLS = [
  'thread_id',
  'checkpoint',
  'checkpoint_ns',
  'checkpoint_id',
  'parent_checkpoint_id',
  'metadata',
  'channel_values',
  'pending_writes',
];

export function postgresThreads(ctx: PgContext, saver: FewerTripsPostgresSaver): ThreadStore {
  const { pool, s, named, tx, notify, requireThread, where, orderBy, codec, toThread } = ctx;

  // GET state's reads of a thread, its latest root checkpoint and that one's parent, in one statement: a row per
  // checkpoint (at most two, newest first), each with the thread's columns but its values (ThreadHead); one row of
  // NULL checkpoint columns when it has none; no row when the thread does not exist. Undefined when the package's
  // checkpoint read is not the one this saver knows: the thread is read, then the checkpoints (saver.readAhead).
  const latestTwo = saver.latestTwoSubquery('$1');
  const withCheckpoints = latestTwo
    ? `SELECT ${THREAD_HEAD_COLUMNS.map((c) => `t.${c}`).join(', ')}, ${checkpointSelectList(CHECKPOINT_COLS)}
      FROM ${s}.threads t LEFT JOIN ${latestTwo} ck ON true WHERE t.thread_id = $1::uuid`
    : undefined;

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

  return {
    async create(t: NewThread, ifExists: IfExists) {
      // Without a TTL of its own the thread gets the column defaults (langgraph.json's default_ttl and strategy, see
      // index.ts); a TTL of its own has strategy "delete".
      const { rows } =
        t.ttl_minutes != null
          ? await pool.query(
              `INSERT INTO ${s}.threads (thread_id, metadata, ttl_minutes, ttl_strategy) VALUES ($1, $2, $3, 'delete')
          ON CONFLICT (thread_id) DO NOTHING RETURNING ${THREAD_COLS}`,
              [t.thread_id, JSON.stringify(t.metadata), t.ttl_minutes],
            )
          : await pool.query(
              named(
                'thread_create',
                `INSERT INTO ${s}.threads (thread_id, metadata)
          VALUES ($1, $2) ON CONFLICT (thread_id) DO NOTHING RETURNING ${THREAD_COLS}`,
                [t.thread_id, JSON.stringify(t.metadata)],
              ),
            );
      if (rows[0]) return toThread(rows[0]);
      if (ifExists === 'raise') throw new ConflictError(`Thread ${t.thread_id} already exists`);
      const existing = await this.get(t.thread_id);
      if (!existing) throw new ConflictError(`Thread ${t.thread_id} was deleted concurrently`);
      return existing;
    },
    async get(id: string) {
      const { rows } = await pool.query(
        named('thread_get', `SELECT ${THREAD_COLS} FROM ${s}.threads WHERE thread_id = $1`, [id]),
      );
      return rows[0] ? toThread(rows[0]) : null;
    },
    async metadata(id: string) {
      const { rows } = await pool.query(
        named('thread_metadata', `SELECT metadata FROM ${s}.threads WHERE thread_id = $1`, [id]),
      );
      return rows[0] ? (rows[0].metadata as Json) : null;
    },
    async getReadingAhead(id: string, token: string) {
      if (!withCheckpoints) {
        const { rows } = await pool.query(
          named('thread_get_head', `SELECT ${THREAD_HEAD_COLUMNS.join(', ')} FROM ${s}.threads WHERE thread_id = $1`, [
            id,
          ]),
        );
        if (!rows[0]) return { thread: null, release: () => undefined };
        return {
          thread: threadHeadOf(toThread, rows[0] as Record<string, unknown>),
          release: await saver.readAhead(id, token),
        };
      }
      const { rows } = await pool.query(named('thread_get_ahead', withCheckpoints, [id]));
      const { thread, checkpoints } = splitThreadRows(rows as Record<string, unknown>[], CHECKPOINT_COLS);
      if (!thread) return { thread: null, release: () => undefined };
      return { thread: threadHeadOf(toThread, thread), release: await saver.keepAhead(token, checkpoints) };
    },
    async patch(id: string, p: { metadata?: Json; ttl_minutes?: number }) {
      const { rows } = await pool.query(
        `UPDATE ${s}.threads SET metadata = metadata || $2::jsonb, updated_at = now(),
        ttl_minutes = coalesce($3::float8, ttl_minutes),
        ttl_strategy = CASE WHEN $3::float8 IS NULL THEN ttl_strategy ELSE 'delete' END
        WHERE thread_id = $1 RETURNING ${THREAD_COLS}`,
        [id, JSON.stringify(p.metadata ?? {}), p.ttl_minutes ?? null],
      );
      if (!rows[0]) throw new NotFoundError(`Thread with ID ${id} not found`);
      return toThread(rows[0]);
    },
    async delete(id: string) {
      await tx(async (c) => {
        await requireThread(c, id, true);
        const { rows } = await c.query(`DELETE FROM ${s}.runs WHERE thread_id = $1 RETURNING run_id, status`, [id]);
        await c.query(`DELETE FROM ${s}.threads WHERE thread_id = $1`, [id]);
        for (const t of ['checkpoint_writes', 'checkpoint_blobs', 'checkpoints']) {
          await c.query(`DELETE FROM ${s}.${t} WHERE thread_id = $1`, [id]);
        }
        const ids = rows.filter((r) => r.status === 'running').map((r) => r.run_id as string);
        // Workers holding a deleted run stop it; their finish() then finds nothing to update.
        for (const run_id of ids) await notify(c, { type: 'cancel', run_id, action: 'interrupt' });
        for (const r of rows) await notify(c, { type: 'run_done', run_id: r.run_id as string });
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
          const { rows: runs } = await c.query(
            `DELETE FROM ${s}.runs WHERE thread_id = ANY($1::uuid[]) RETURNING run_id, status`,
            [found],
          );
          await c.query(`DELETE FROM ${s}.threads WHERE thread_id = ANY($1::uuid[])`, [found]);
          for (const t of ['checkpoint_writes', 'checkpoint_blobs', 'checkpoints']) {
            await c.query(`DELETE FROM ${s}.${t} WHERE thread_id = ANY($1::text[])`, [cpIds]);
          }
          // Workers holding a deleted run stop it; their finish() then finds nothing to update.
          for (const r of runs.filter((x) => x.status === 'running'))
            await notify(c, { type: 'cancel', run_id: r.run_id as string, action: 'interrupt' });
          for (const r of runs) await notify(c, { type: 'run_done', run_id: r.run_id as string });
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
        if (deleted.length) {
          const ids = deleted;
          await c.query(`DELETE FROM ${s}.runs WHERE thread_id = ANY($1::uuid[])`, [ids]);
          await c.query(`DELETE FROM ${s}.threads WHERE thread_id = ANY($1::uuid[])`, [ids]);
          for (const t of ['checkpoint_writes', 'checkpoint_blobs', 'checkpoints']) {
            await c.query(`DELETE FROM ${s}.${t} WHERE thread_id = ANY($1::text[])`, [ids]);
          }
        }
        return { deleted, pruned };
      });
    },
    async search(q: ThreadQuery) {
      const params: unknown[] = [];
      const w = where('t', q, params);
      params.push(q.limit ?? 10, q.offset ?? 0);
      const { rows } = await pool.query(
        `SELECT * FROM ${s}.threads ${w} ${orderBy(q, THREAD_SORT)}
        LIMIT $${params.length - 1} OFFSET $${params.length}`,
        params,
      );
      return rows.map(toThread);
    },
    async count(q: ThreadQuery) {
      const params: unknown[] = [];
      const { rows } = await pool.query(`SELECT count(*)::int AS n FROM ${s}.threads ${where('t', q, params)}`, params);
      return rows[0].n as number;
    },
    async copy(id: string, newId: string) {
      return tx(async (c) => {
        await requireThread(c, id);
        const { rows } = await c.query(
          `INSERT INTO ${s}.threads (thread_id, metadata, status, config, "values",
          interrupts, error) SELECT $2, metadata || jsonb_build_object('thread_id', $3::text), CASE WHEN status = 'busy' THEN 'idle' ELSE status END, config,
          "values", interrupts, error FROM ${s}.threads WHERE thread_id = $1 RETURNING *`,
          [id, newId, newId],
        );
        await c.query(
          `INSERT INTO ${s}.checkpoints SELECT $2, checkpoint_ns, checkpoint_id, parent_checkpoint_id,
          type, checkpoint, metadata FROM ${s}.checkpoints WHERE thread_id = $1`,
          [id, newId],
        );
        await c.query(
          `INSERT INTO ${s}.checkpoint_blobs SELECT $2, checkpoint_ns, channel, version, type, blob
          FROM ${s}.checkpoint_blobs WHERE thread_id = $1`,
          [id, newId],
        );
        await c.query(
          `INSERT INTO ${s}.checkpoint_writes SELECT $2, checkpoint_ns, checkpoint_id, task_id, idx,
          channel, type, blob FROM ${s}.checkpoint_writes WHERE thread_id = $1`,
          [id, newId],
        );
        return toThread(rows[0]);
      });
    },
    async setState(id: string, values: Json | null, interrupted: boolean, interrupts: Json) {
      const { rowCount } = await pool.query(
        `UPDATE ${s}.threads SET "values" = $2, interrupts = $3,
        state_updated_at = now(), updated_at = now(), status = CASE WHEN EXISTS (SELECT 1 FROM ${s}.runs
        WHERE thread_id = $1 AND status IN ('pending','running')) THEN status ELSE $4 END WHERE thread_id = $1`,
        [
          id,
          values === null ? null : jsonbParam(codec, values),
          JSON.stringify(interrupts),
          interrupted ? 'interrupted' : 'idle',
        ],
      );
      if (!rowCount) throw new NotFoundError(`Thread with ID ${id} not found`);
    },
  };
}

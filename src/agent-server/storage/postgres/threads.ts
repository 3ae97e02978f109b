// Threads of the Postgres store (a thread's runs and checkpoints go with it).
import { ConflictError, NotFoundError } from '../../../lib/errors.ts';
import { THREAD_SORT } from '../common.ts';
import type { IfExists, Json, NewThread, ThreadQuery, ThreadStore } from '../types.ts';
import { THREAD_COLS, toThread, type PgContext } from './context.ts';

export function postgresThreads(ctx: PgContext): ThreadStore {
  const { pool, s, named, tx, notify, requireThread, where, orderBy } = ctx;

  return {
    async create(t: NewThread, ifExists: IfExists) {
      // Without a TTL of its own the thread gets the column default (langgraph.json's default_ttl, see index.ts).
      const { rows } =
        t.ttl_minutes != null
          ? await pool.query(
              `INSERT INTO ${s}.threads (thread_id, metadata, ttl_minutes) VALUES ($1, $2, $3)
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
    async patch(id: string, p: { metadata?: Json; ttl_minutes?: number }) {
      const { rows } = await pool.query(
        `UPDATE ${s}.threads SET metadata = metadata || $2::jsonb, updated_at = now(),
        ttl_minutes = coalesce($3::float8, ttl_minutes) WHERE thread_id = $1 RETURNING ${THREAD_COLS}`,
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
    async sweepExpired(limit: number) {
      return tx(async (c) => {
        // Rows a run is being created on are locked by that transaction and skipped: the next sweep sees them busy.
        const { rows } = await c.query(
          `SELECT thread_id FROM ${s}.threads t WHERE ttl_minutes IS NOT NULL
          AND status <> 'busy' AND updated_at + ttl_minutes * interval '1 minute' < now()
          AND NOT EXISTS (SELECT 1 FROM ${s}.runs r WHERE r.thread_id = t.thread_id AND r.status IN ('pending','running'))
          LIMIT $1 FOR UPDATE SKIP LOCKED`,
          [limit],
        );
        const ids = rows.map((r) => r.thread_id as string);
        if (!ids.length) return ids;
        await c.query(`DELETE FROM ${s}.runs WHERE thread_id = ANY($1::uuid[])`, [ids]);
        await c.query(`DELETE FROM ${s}.threads WHERE thread_id = ANY($1::uuid[])`, [ids]);
        for (const t of ['checkpoint_writes', 'checkpoint_blobs', 'checkpoints']) {
          await c.query(`DELETE FROM ${s}.${t} WHERE thread_id = ANY($1::text[])`, [ids]);
        }
        return ids;
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
          interrupts, error) SELECT $2, metadata, CASE WHEN status = 'busy' THEN 'idle' ELSE status END, config,
          "values", interrupts, error FROM ${s}.threads WHERE thread_id = $1 RETURNING *`,
          [id, newId],
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
          values === null ? null : JSON.stringify(values),
          JSON.stringify(interrupts),
          interrupted ? 'interrupted' : 'idle',
        ],
      );
      if (!rowCount) throw new NotFoundError(`Thread with ID ${id} not found`);
    },
  };
}

// Threads of the Postgres store: created, read (with their latest checkpoints in one statement for GET state),
// searched, copied with their checkpoints, their state's columns written; removal is in thread-removals.ts.
import { ConflictError, NotFoundError } from '../../../lib/errors.ts';
import { THREAD_HEAD_COLUMNS, THREAD_SORT, threadHeadOf } from '../common.ts';
import type { IfExists, Json, NewThread, ThreadQuery, ThreadStore } from '../types.ts';
import { checkpointSelectList, splitThreadRows } from '../read-ahead.ts';
import type { FewerTripsPostgresSaver } from './checkpointer.ts';
import { THREAD_COLS, type PgContext } from './context.ts';
import { postgresThreadRemovals } from './thread-removals.ts';
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
  const { pool, s, named, tx, requireThread, where, orderBy, codec, toThread } = ctx;

  // GET state's reads of a thread, its latest root checkpoint and that one's parent, in one statement: a row per
  // checkpoint (at most two, newest first), each with the thread's columns but its values (ThreadHead); one row of
  // NULL checkpoint columns when it has none; no row when the thread does not exist. Undefined when the package's
  // checkpoint read is not the one this saver knows: the thread is read, then the checkpoints (saver.readAhead).
  const latestTwo = saver.latestTwoSubquery('$1');
  const withCheckpoints = latestTwo
    ? `SELECT ${THREAD_HEAD_COLUMNS.map((c) => `t.${c}`).join(', ')}, ${checkpointSelectList(CHECKPOINT_COLS)}
      FROM ${s}.threads t LEFT JOIN ${latestTwo} ck ON true WHERE t.thread_id = $1::uuid`
    : undefined;

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
    ...postgresThreadRemovals(ctx),
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

// Creating a run (Postgres): the fast path, one statement on a free thread (in four prepared forms), and the slow
// path under the thread's lock for everything else (a thread to create, runs to cancel first, a busy thread).
import { ConflictError, NotFoundError, StaleAssistantError } from '../../../../lib/errors.ts';
import { decideCreate } from '../../run-rules.ts';
import type { ClaimRequest, RunQueue } from '../../ports/run-queue.ts';
import type { NewRun, RunRecord, RunStatus } from '../../types.ts';
import { RUN_COLS, type PgContext, type Q } from '../context.ts';
import { jsonbParam } from '../../data-cipher.ts';
import { claimStatementParts } from './claim.ts';

/**
 * The run create's fast path (postgresRuns' create) in four forms: with or without the claim, with or without the
 * assistant check. Each form plans the same whatever its parameters, so Postgres keeps one generic plan per
 * connection; a single form whose parameters switched whole subqueries on and off ($11 NULL: no claim, $13 NULL: no
 * check) made Postgres plan it again at every call on many connections (a custom plan looked cheaper than the
 * generic one), and planning this statement cost more than running it.
 */
const createStatements = new Map<string, { name: string; text: string }>();
export function runCreateStatement(s: string, claiming: boolean, checkAssistant: boolean) {
  const key = `${claiming ? 'c' : ''}${checkAssistant ? 'a' : ''}`;
  let st = createStatements.get(`${s}.${key}`);
  if (st) return st;
  // $13 and $11 stay in every form's text (a parameter the text never names has no type); a form without the
  // check or the claim only ever gets NULL for them.
  const av = checkAssistant
    ? `av AS (SELECT EXISTS (SELECT 1 FROM ${s}.assistants a WHERE a.assistant_id = $3 AND a.xmin::text = $13) AS ok)`
    : `av AS (SELECT $13::text IS NULL AS ok)`;
  const cl = claiming
    ? `cl AS (SELECT ($9::float8 <= 0 AND NOT st.inflight AND NOT st.busy
            AND NOT EXISTS (SELECT 1 FROM ${s}.runs p WHERE p.status = 'pending'
              AND (p.not_before IS NULL OR p.not_before <= now())
              AND NOT EXISTS (SELECT 1 FROM ${s}.runs x WHERE x.thread_id = p.thread_id AND x.status = 'running')))
            AS now FROM st)`
    : `cl AS (SELECT false AS now FROM st)`;
  st = {
    name: `ap_run_create${key ? `_${key}` : ''}_${s}`,
    text: `WITH lk AS (SELECT t.thread_id, t.status FROM ${s}.threads t WHERE t.thread_id = $2 FOR UPDATE),
        st AS (SELECT lk.thread_id, EXISTS (SELECT 1 FROM ${s}.runs r WHERE r.thread_id = lk.thread_id
            AND r.status IN ('pending','running')) AS inflight, lk.status = 'busy' AS busy FROM lk),
        ${av},
        ${cl},
        ins AS (INSERT INTO ${s}.runs (run_id, thread_id, assistant_id, metadata, status, kwargs, multitask_strategy,
            not_before, created_at, updated_at, attempt, worker_id, lease_expires_at)
          SELECT $1, st.thread_id, $3, $4, CASE WHEN cl.now THEN 'running' ELSE 'pending' END, $5, $6,
            CASE WHEN $9::float8 > 0 THEN now() + make_interval(secs => $9::float8 / 1000) END,
            clock_timestamp(), clock_timestamp(), CASE WHEN cl.now THEN 1 ELSE 0 END,
            CASE WHEN cl.now THEN $11::text END,
            CASE WHEN cl.now THEN now() + make_interval(secs => $12::float8) END
          FROM st, cl, av WHERE av.ok AND ($6 = 'enqueue' OR NOT (st.inflight OR st.busy))
          RETURNING ${RUN_COLS}),
        th AS (UPDATE ${s}.threads SET status = 'busy', metadata = metadata || $7::jsonb, updated_at = now()
          WHERE thread_id = (SELECT thread_id FROM ins) RETURNING 1),
        n AS (SELECT pg_notify($8, $10) FROM ins WHERE ins.status = 'pending'),
        nc AS (SELECT NOT EXISTS (SELECT 1 FROM ${s}.checkpoints c WHERE c.thread_id = $2::text
            AND c.checkpoint_ns = '') AS none FROM ins WHERE ins.status = 'running')
        SELECT (SELECT ok FROM av) AS _assistant_ok, (SELECT none FROM nc) AS _no_checkpoint,
          (SELECT count(*) FROM st) AS _found, (SELECT inflight FROM st) AS _inflight,
          (SELECT count(*) FROM th) AS _th, (SELECT count(*) FROM n) AS _n, ins.*
        FROM (SELECT 1) one LEFT JOIN ins ON true`,
  };
  createStatements.set(`${s}.${key}`, st);
  return st;
}

export function postgresRunCreate(
  ctx: PgContext,
): Pick<RunQueue, 'create'> & { createIn(c: Q, run: NewRun): Promise<RunRecord> } {
  const { pool, s, codec, toRun, channel, origin, local, tx, applyCancel } = ctx;
  const { claimedRun } = claimStatementParts(ctx);

  /**
   * Creates a run inside the caller's transaction (the run create's slow path; crons fire through it in the same
   * transaction that claims their tick). Sends the wake-up NOTIFY; the caller emits `local` after commit.
   */
  async function createIn(c: Q, run: NewRun): Promise<RunRecord> {
    if (run.assistant_token !== undefined) {
      // As the fast path checks it (no lock: a patch committed after this is a patch after the run's create).
      const { rows } = await c.query(`SELECT 1 FROM ${s}.assistants WHERE assistant_id = $1 AND xmin::text = $2`, [
        run.assistant_id,
        run.assistant_token,
      ]);
      if (!rows[0]) throw new StaleAssistantError(run.assistant_id);
    }
    if (run.if_not_exists === 'create') {
      await c.query(
        `INSERT INTO ${s}.threads (thread_id, metadata) VALUES ($1, $2) ON CONFLICT (thread_id) DO NOTHING`,
        [run.thread_id, JSON.stringify(run.thread_metadata)],
      );
    }
    // Lock first, then read the in-flight runs in a later statement: its snapshot is taken after the lock,
    // so it sees every run committed by whoever held the thread before us.
    const { rows: lock } = await c.query(`SELECT thread_id FROM ${s}.threads WHERE thread_id = $1 FOR UPDATE`, [
      run.thread_id,
    ]);
    if (!lock[0]) throw new NotFoundError(`Thread with ID ${run.thread_id} not found`);
    const { rows: inflight } = await c.query(
      `SELECT run_id, status FROM ${s}.runs WHERE thread_id = $1
      AND status IN ('pending','running') ORDER BY seq`,
      [run.thread_id],
    );
    const decision = decideCreate(run.multitask_strategy, inflight as Array<{ run_id: string; status: RunStatus }>);
    if (decision.kind === 'reject') throw new ConflictError(decision.detail);
    for (const e of decision.cancel) await applyCancel(c, e);
    // clock_timestamp(): the moment of the insert, not the start of this transaction.
    const { rows } = await c.query(
      `WITH ins AS (INSERT INTO ${s}.runs (run_id, thread_id, assistant_id, metadata,
        status, kwargs, multitask_strategy, not_before, created_at, updated_at) VALUES ($1, $2, $3, $4, 'pending',
        $5, $6, CASE WHEN $9::float8 > 0 THEN now() + make_interval(secs => $9::float8 / 1000) END,
        clock_timestamp(), clock_timestamp()) RETURNING *),
      th AS (UPDATE ${s}.threads SET status = 'busy', metadata = metadata || $7::jsonb, updated_at = now()
        WHERE thread_id = $2 RETURNING 1),
      n AS (SELECT pg_notify($8, $10))
      SELECT ins.*, (SELECT count(*) FROM th) AS _th, (SELECT count(*) FROM n) AS _n FROM ins`,
      [
        run.run_id,
        run.thread_id,
        run.assistant_id,
        JSON.stringify(run.metadata),
        jsonbParam(codec, run.kwargs ?? {}),
        run.multitask_strategy,
        JSON.stringify(run.thread_metadata),
        channel,
        run.delay_ms ?? 0,
        JSON.stringify({ type: 'wake', o: origin }),
      ],
    );
    return toRun(rows[0]);
  }

  return {
    createIn,
    async create(run: NewRun, claim?: ClaimRequest) {
      // Fast path, one statement: lock the thread; when it has nothing in flight (or the strategy is enqueue)
      // insert the run, mark the thread busy and wake the claimers. In flight means a pending or running run
      // in this statement's snapshot, or the thread row (read under the lock, so current) still busy: a run
      // committed while we waited for the lock made the thread busy in the same transaction. With `claim`, a run
      // that a claim would take at once (nothing in flight on its thread, no delay, no other run waiting to be
      // claimed: claims go oldest first) is inserted claimed by that worker instead, and nobody is woken. With an
      // assistant token, nothing is written unless the assistant's row still has it (StaleAssistantError).
      const claiming = !!claim && !(run.delay_ms && run.delay_ms > 0);
      const fast = await pool.query({
        ...runCreateStatement(s, claiming, run.assistant_token != null),
        values: [
          run.run_id,
          run.thread_id,
          run.assistant_id,
          JSON.stringify(run.metadata),
          jsonbParam(codec, run.kwargs ?? {}),
          run.multitask_strategy,
          JSON.stringify(run.thread_metadata),
          channel,
          run.delay_ms ?? 0,
          JSON.stringify({ type: 'wake', o: origin }),
          claiming ? claim.workerId : null,
          claiming ? claim.leaseMs / 1000 : 0,
          run.assistant_token ?? null,
        ],
      });
      const row = fast.rows[0];
      if (row && row._assistant_ok === false) throw new StaleAssistantError(run.assistant_id);
      if (row?.run_id) {
        const created = claimedRun(row);
        if (created.status === 'pending') local({ type: 'wake' });
        return created;
      }
      const found = Number(row?._found) > 0;
      if (!found && run.if_not_exists !== 'create')
        throw new NotFoundError(`Thread with ID ${run.thread_id} not found`);
      if (found && row._inflight) {
        const early = decideCreate(run.multitask_strategy, [{ run_id: '', status: 'pending' }]);
        if (early.kind === 'reject') throw new ConflictError(early.detail);
      }
      // Slow path: a thread to create, runs to cancel (interrupt, rollback) or a busy status to check.
      const created = await tx((c) => createIn(c, run));
      local({ type: 'wake' });
      return created;
    },
  };
}

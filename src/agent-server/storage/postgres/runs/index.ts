// Runs of the Postgres store: the queue, leases and cancels. The run cycle's hot statements (create on a free
// thread, claim, finish) are single named statements that encode run-rules.ts in SQL; the slower paths read the
// rows under the thread's lock, ask run-rules.ts and execute its answer.
import { ConflictError, NotFoundError, StaleAssistantError } from '../../../../lib/errors.ts';
import { outcomeValuesText, TERMINAL_STATUSES_SQL, withEndedValues } from '../../common.ts';
import {
  cancelEffect,
  decideCreate,
  decideDelete,
  decideSweep,
  mayRollback,
  threadErrorAfter,
  threadStatusAfter,
} from '../../run-rules.ts';
import type { CancelAction, Json, NewRun, RunOutcome, RunRecord, RunStatus, RunStore, SweepResult } from '../../types.ts';
import { RUN_COLS, valuesParam, type PgContext, type Q } from '../context.ts';
import { fromJsonb, jsonbParam } from '../../data-cipher.ts';

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

export function postgresRuns(ctx: PgContext): RunStore & { createIn(c: Q, run: NewRun): Promise<RunRecord> } {
  const {
    pool,
    s,
    codec,
    toRun,
    channel,
    origin,
    gate,
    changed,
    afterWrite,
    local,
    tx,
    named,
    notify,
    lockThreadOfRun,
    settleThread,
    applyCancel,
    afterDequeue,
    removeRolledBack,
  } = ctx;

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

  /**
   * The CTEs that claim (claim, finishAndClaim): `cand`, the thread of the oldest claimable run, locked (SKIP LOCKED:
   * another claimer has it), and `claimed`, its oldest due pending run, now worker `worker`'s for `leaseSecs` (SQL
   * parameters). The UPDATE re-checks status under the row lock, so a claimer working from a stale snapshot gets
   * nothing instead of a second copy. `ending`: run $1 ends in the same statement (CTE r), so its thread counts as
   * free once r ended it, and it is not a candidate itself.
   */
  /** A run ($1 on thread $2) and, once it has ended, its thread's values (getWithValues): a join's one read. */
  const RUN_WITH_VALUES = `SELECT ${RUN_COLS.split(',')
    .map((c) => `r.${c.trim()}`)
    .join(', ')}, CASE WHEN r.status IN (${TERMINAL_STATUSES_SQL})
    THEN t."values" END AS _values
    FROM ${s}.runs r LEFT JOIN ${s}.threads t ON t.thread_id = r.thread_id WHERE r.run_id = $1 AND r.thread_id = $2`;

  const claimCtes = (worker: string, leaseSecs: string, ending = false) => {
    const notEnding = ending ? ' AND run_id <> $1' : '';
    const endingNow = ending ? ' AND NOT (x.run_id = $1 AND EXISTS (SELECT 1 FROM r))' : '';
    // nc: the claimed run's thread has no root checkpoint (RunRecord.no_checkpoint); not asked when it is the
    // thread of the run ending in the same statement.
    const sameThread = ending ? ' WHERE claimed.thread_id NOT IN (SELECT thread_id FROM r)' : '';
    return `cand AS (
          SELECT t.thread_id FROM ${s}.threads t
          JOIN (SELECT thread_id, min(seq) AS first FROM ${s}.runs WHERE status = 'pending'${notEnding}
            AND (not_before IS NULL OR not_before <= now()) GROUP BY thread_id) p ON p.thread_id = t.thread_id
          WHERE NOT EXISTS (SELECT 1 FROM ${s}.runs x WHERE x.thread_id = t.thread_id AND x.status = 'running'${endingNow})
          ORDER BY p.first LIMIT 1 FOR UPDATE OF t SKIP LOCKED),
        claimed AS (
          UPDATE ${s}.runs SET status = 'running', attempt = attempt + 1, worker_id = ${worker},
            lease_expires_at = now() + make_interval(secs => ${leaseSecs}), updated_at = now()
          WHERE run_id = (SELECT q.run_id FROM ${s}.runs q WHERE q.thread_id = (SELECT thread_id FROM cand)
            AND q.status = 'pending'${notEnding.replace('run_id', 'q.run_id')}
            AND (q.not_before IS NULL OR q.not_before <= now()) ORDER BY q.seq LIMIT 1)
            AND status = 'pending'
          RETURNING ${RUN_COLS}),
        nc AS (SELECT NOT EXISTS (SELECT 1 FROM ${s}.checkpoints k WHERE k.thread_id = claimed.thread_id::text
            AND k.checkpoint_ns = '') AS none FROM claimed${sameThread})`;
  };

  /** A run a statement claimed, with no_checkpoint when its `_no_checkpoint` column says so. */
  const claimedRun = (row: Record<string, unknown>): RunRecord => {
    const run = toRun(row);
    if (row._no_checkpoint === true) run.no_checkpoint = true;
    return run;
  };

  // The finish statements (finish, finishAndClaim) share their parameters $1–$13 and these parts.
  /** The thread of run $1 locked (the order claims lock in), then the run ended if worker $2 holds it (r). */
  const finishEnd = `lk AS (
          SELECT thread_id FROM ${s}.threads WHERE thread_id = (SELECT thread_id FROM ${s}.runs WHERE run_id = $1)
          FOR UPDATE),
        r AS (UPDATE ${s}.runs SET status = $3, error = $4, updated_at = now(), worker_id = NULL, lease_expires_at = NULL
          WHERE run_id = $1 AND worker_id = $2 AND status = 'running' AND thread_id = (SELECT thread_id FROM lk)
          RETURNING thread_id)`;
  /** The SET list settling the ended run's thread t; `busyWhen`: SQL that makes it busy whatever the outcome. */
  const finishSettle = (busyWhen: string) => `status = CASE WHEN ${busyWhen} THEN 'busy'
              WHEN $5 = 'error' THEN 'error' WHEN $6::boolean THEN 'interrupted'
              WHEN EXISTS (SELECT 1 FROM ${s}.runs p WHERE p.thread_id = t.thread_id AND p.status = 'pending'
                AND p.run_id <> $1) THEN 'busy' ELSE 'idle' END,
            "values" = CASE WHEN $7::boolean THEN $8::jsonb ELSE t."values" END,
            state_updated_at = CASE WHEN $7::boolean THEN now() ELSE t.state_updated_at END,
            updated_at = now(), interrupts = $9, error = $10`;
  /** Whether a queued run of the thread became claimable (m), and the run_done saying so (n). */
  const finishTell = `m AS (SELECT EXISTS (SELECT 1 FROM ${s}.runs p WHERE p.thread_id = r.thread_id
            AND p.status = 'pending' AND p.run_id <> $1) AS more FROM r),
        n AS (SELECT pg_notify($11, CASE WHEN m.more THEN $12 ELSE $13 END) FROM m)`;
  const finishParams = (runId: string, workerId: string, outcome: RunOutcome): unknown[] => {
    const values = valuesParam(codec, outcomeValuesText(outcome));
    const threadError = threadErrorAfter(outcome);
    return [
      runId,
      workerId,
      outcome.status,
      outcome.error ? JSON.stringify(outcome.error) : null,
      // The thread's status and error as the run rules say (a refused resume leaves the thread as it was).
      threadStatusAfter(outcome, false) === 'error' ? 'error' : 'ok',
      !!outcome.interrupted,
      values !== undefined,
      values ?? null,
      JSON.stringify(outcome.interrupts ?? {}),
      threadError === null ? null : JSON.stringify(threadError),
      channel,
      JSON.stringify({ type: 'run_done', run_id: runId, o: origin, more: true }),
      JSON.stringify({ type: 'run_done', run_id: runId, o: origin, more: false }),
    ];
  };

  return {
    createIn,
    async create(run: NewRun, claim?: { workerId: string; leaseMs: number }) {
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
    async get(threadId: string, runId: string) {
      const { rows } = await pool.query(
        named('run_get', `SELECT ${RUN_COLS} FROM ${s}.runs WHERE run_id = $1 AND thread_id = $2`, [runId, threadId]),
      );
      return rows[0] ? toRun(rows[0]) : null;
    },
    async getWithValues(threadId: string, runId: string) {
      const { rows } = await pool.query(named('run_get_values', RUN_WITH_VALUES, [runId, threadId]));
      const row = rows[0] as Record<string, unknown> | undefined;
      if (!row) return null;
      return withEndedValues(toRun(row), fromJsonb<Json | null>(codec, row._values) ?? null);
    },
    async getById(runId: string) {
      const { rows } = await pool.query(
        named('run_get_by_id', `SELECT ${RUN_COLS} FROM ${s}.runs WHERE run_id = $1`, [runId]),
      );
      return rows[0] ? toRun(rows[0]) : null;
    },
    async list(threadId: string, q: { limit: number; offset: number; status?: RunStatus }) {
      const { rows } = await pool.query(
        `SELECT * FROM ${s}.runs WHERE thread_id = $1 AND ($2::text IS NULL OR
        status = $2) ORDER BY seq DESC LIMIT $3 OFFSET $4`,
        [threadId, q.status ?? null, q.limit, q.offset],
      );
      return rows.map(toRun);
    },
    async delete(threadId: string, runId: string) {
      await tx(async (c) => {
        await c.query(`SELECT 1 FROM ${s}.threads WHERE thread_id = $1 FOR UPDATE`, [threadId]);
        const { rows } = await c.query(`SELECT status FROM ${s}.runs WHERE run_id = $1 AND thread_id = $2 FOR UPDATE`, [
          runId,
          threadId,
        ]);
        if (!rows[0]) throw new NotFoundError(`Run ${runId} not found`);
        const decision = decideDelete({ run_id: runId, status: rows[0].status as RunStatus });
        if (decision.kind === 'conflict') throw new ConflictError(decision.detail);
        await c.query(`DELETE FROM ${s}.runs WHERE run_id = $1`, [runId]);
        if (decision.settleThread) await afterDequeue(c, threadId);
        await notify(c, { type: 'run_done', run_id: runId });
      });
    },
    async claim(workerId: string, leaseMs: number) {
      if (gate.quietAt === gate.changes && Date.now() < gate.dueAt) return null;
      // One statement (claimCtes; a claimer that got nothing from a stale snapshot tries again). _more: is there
      // another claimable thread; _due_ms: when the earliest delayed run becomes due (both for the short-cut above).
      for (let i = 0; i < 5; i++) {
        const seen = gate.changes;
        const t0 = Date.now();
        const { rows } = await pool.query({
          name: `ap_claim_${s}`,
          text: `WITH ${claimCtes('$1', '$2')},
          th AS (UPDATE ${s}.threads SET status = 'busy', updated_at = now()
            WHERE thread_id = (SELECT thread_id FROM claimed) RETURNING 1)
          SELECT (SELECT count(*) FROM cand) AS _cand, (SELECT count(*) FROM th) AS _th,
            EXISTS (SELECT 1 FROM ${s}.runs p WHERE p.status = 'pending'
              AND (p.not_before IS NULL OR p.not_before <= now())
              AND p.thread_id IS DISTINCT FROM (SELECT thread_id FROM cand)
              AND NOT EXISTS (SELECT 1 FROM ${s}.runs x WHERE x.thread_id = p.thread_id AND x.status = 'running'))
              AS _more,
            (SELECT extract(epoch FROM min(d.not_before) - now()) * 1000 FROM ${s}.runs d
              WHERE d.status = 'pending' AND d.not_before > now())::float8 AS _due_ms,
            (SELECT none FROM nc) AS _no_checkpoint, c.*
          FROM (SELECT 1) one LEFT JOIN claimed c ON true`,
          values: [workerId, leaseMs / 1000],
        });
        const row = rows[0];
        const nothing = !row || (!row.run_id && Number(row._cand) === 0);
        if (nothing && row?._more) {
          // Claimable work whose thread row is locked (another claimer, or a write that sends no notification,
          // maybe in another process): look again shortly instead of staying quiet until the safety tick.
          setTimeout(() => local({ type: 'wake' }), 25).unref();
          return null;
        }
        if (nothing || (row.run_id && !row._more)) {
          // Nothing else to take: quiet until an event, unless it came while we looked.
          gate.quietAt = seen;
          gate.dueAt = row?._due_ms == null ? Infinity : t0 + Math.max(0, Number(row._due_ms));
        }
        if (row?.run_id) return claimedRun(row);
        if (nothing) return null;
      }
      return null;
    },
    async heartbeat(workerId: string, runIds: string[], leaseMs: number) {
      if (!runIds.length) return [];
      const { rows } = await pool.query(
        named(
          'heartbeat',
          `UPDATE ${s}.runs
        SET lease_expires_at = now() + make_interval(secs => $3)
        WHERE run_id = ANY($1::uuid[]) AND worker_id = $2 AND status = 'running' RETURNING run_id`,
          [runIds, workerId, leaseMs / 1000],
        ),
      );
      return rows.map((r) => r.run_id as string);
    },
    async finish(runId: string, workerId: string, outcome: RunOutcome) {
      // One statement: thread locked first (same order as claim), run ended, thread status settled, waiters told
      // (the run_done says whether a queued run of the thread became claimable: `more`).
      const { rows } = await pool.query(
        named(
          'finish',
          `WITH ${finishEnd},
        th AS (UPDATE ${s}.threads t SET ${finishSettle('false')} FROM r WHERE t.thread_id = r.thread_id RETURNING 1),
        ${finishTell}
        SELECT (SELECT count(*) FROM r) AS _done, (SELECT count(*) FROM th) AS _th, (SELECT count(*) FROM n) AS _n,
          coalesce((SELECT more FROM m), false) AS _more`,
          finishParams(runId, workerId, outcome),
        ),
      );
      if (rows[0]?._more) changed();
      // Waiters here and in other processes hear about it through NOTIFY.
      return Number(rows[0]?._done) > 0;
    },
    async finishAndClaim(runId: string, workerId: string, outcome: RunOutcome, leaseMs: number) {
      // finish's statement and claim's in one. The claim's snapshot still shows this run running, so its thread
      // counts as free when `r` ended it; one UPDATE per thread row (a second one in the same statement would be
      // lost): the finished run's thread is busy when the claimed run is on it, else settled as finish settles it.
      const { rows } = await pool.query(
        named(
          'finish_claim',
          `WITH ${finishEnd},
        ${claimCtes('$2', '$14', true)},
        th AS (UPDATE ${s}.threads t SET ${finishSettle('t.thread_id = (SELECT thread_id FROM claimed)')}
          FROM r WHERE t.thread_id = r.thread_id RETURNING 1),
        th2 AS (UPDATE ${s}.threads SET status = 'busy', updated_at = now()
          WHERE thread_id = (SELECT thread_id FROM claimed) AND thread_id NOT IN (SELECT thread_id FROM r) RETURNING 1),
        ${finishTell}
        SELECT (SELECT count(*) FROM r) AS _done, (SELECT count(*) FROM th) AS _th, (SELECT count(*) FROM th2) AS _th2,
          (SELECT count(*) FROM n) AS _n, coalesce((SELECT more FROM m), false) AS _more,
          (SELECT none FROM nc) AS _no_checkpoint, c.*
        FROM (SELECT 1) one LEFT JOIN claimed c ON true`,
          [...finishParams(runId, workerId, outcome), leaseMs / 1000],
        ),
      );
      const row = rows[0];
      const next = row?.run_id ? claimedRun(row) : null;
      // With nothing claimed (or a run left behind a thread another claimer held), the next claim must look.
      if (row?._more || !next) changed();
      return { finished: Number(row?._done) > 0, next };
    },
    async rollback(runId: string, workerId: string | null) {
      await tx(async (c) => {
        await lockThreadOfRun(c, runId);
        const { rows } = await c.query(`SELECT thread_id, worker_id FROM ${s}.runs WHERE run_id = $1 FOR UPDATE`, [
          runId,
        ]);
        if (!rows[0] || !mayRollback(rows[0] as { worker_id: string | null }, workerId)) return;
        await removeRolledBack(c, rows[0].thread_id as string, runId);
        await notify(c, { type: 'run_done', run_id: runId });
        await notify(c, { type: 'wake' });
      });
    },
    async release(workerId: string, runIds: string[]) {
      if (!runIds.length) return;
      await afterWrite(
        pool.query(
          `UPDATE ${s}.runs SET status = 'pending', attempt = greatest(attempt - 1, 0),
        worker_id = NULL, lease_expires_at = NULL WHERE run_id = ANY($1::uuid[]) AND worker_id = $2
        AND status = 'running'`,
          [runIds, workerId],
        ),
      );
      await pool.query('SELECT pg_notify($1, $2)', [channel, JSON.stringify({ type: 'wake', o: origin })]);
    },
    async cancel(threadId: string, runId: string, action: CancelAction, reason?: string | null) {
      return tx(async (c) => {
        await c.query(`SELECT 1 FROM ${s}.threads WHERE thread_id = $1 FOR UPDATE`, [threadId]);
        const { rows } = await c.query(`SELECT * FROM ${s}.runs WHERE run_id = $1 AND thread_id = $2 FOR UPDATE`, [
          runId,
          threadId,
        ]);
        if (!rows[0]) throw new NotFoundError(`Run ${runId} not found`);
        const run = toRun(rows[0]);
        const effect = cancelEffect(run, action);
        await applyCancel(c, effect);
        // Only a cancel that takes effect says why; a finished run keeps what it had.
        const cancel_reason = reason && effect.effect !== 'none' ? reason : run.cancel_reason;
        if (cancel_reason !== run.cancel_reason && effect.effect !== 'delete') {
          await c.query(`UPDATE ${s}.runs SET cancel_reason = $2 WHERE run_id = $1`, [run.run_id, cancel_reason]);
        }
        if (effect.effect === 'delete' || effect.effect === 'interrupt') await afterDequeue(c, threadId);
        if (effect.effect === 'interrupt') return { ...run, status: 'interrupted' as const, cancel_reason };
        if (effect.effect === 'flag') return { ...run, cancel_action: action, cancel_reason };
        return run;
      });
    },
    async cancelMany(threadId: string, runIds: string[], action: CancelAction) {
      const ids = [...new Set(runIds)];
      return tx(async (c) => {
        await c.query(`SELECT 1 FROM ${s}.threads WHERE thread_id = $1 FOR UPDATE`, [threadId]);
        const { rows } = await c.query(
          `SELECT * FROM ${s}.runs WHERE run_id = ANY($1::uuid[]) AND thread_id = $2 ORDER BY seq FOR UPDATE`,
          [ids, threadId],
        );
        // uuid columns answer lowercase; a request may name a run in capitals.
        const byId = new Map(rows.map((r) => [String(r.run_id).toLowerCase(), toRun(r)]));
        const missing = ids.find((id) => !byId.has(id.toLowerCase()));
        if (missing) throw new NotFoundError(`Run ${missing} not found`);
        let dequeued = false;
        const out: RunRecord[] = [];
        for (const run of new Map(ids.map((id) => [id.toLowerCase(), byId.get(id.toLowerCase())!])).values()) {
          const effect = cancelEffect(run, action);
          await applyCancel(c, effect);
          if (effect.effect === 'delete' || effect.effect === 'interrupt') dequeued = true;
          if (effect.effect === 'interrupt') out.push({ ...run, status: 'interrupted' });
          else if (effect.effect === 'flag') out.push({ ...run, cancel_action: action });
          else out.push(run);
        }
        if (dequeued) await afterDequeue(c, threadId);
        return out;
      });
    },
    async listByStatus(statuses: Array<'pending' | 'running'>) {
      if (!statuses.length) return [];
      const { rows } = await pool.query(
        `SELECT ${RUN_COLS} FROM ${s}.runs WHERE status = ANY($1::text[]) ORDER BY seq`,
        [statuses],
      );
      return rows.map(toRun);
    },
    async cancelRequests(runIds: string[]) {
      const out = new Map<string, CancelAction>();
      if (!runIds.length) return out;
      const { rows } = await pool.query(`SELECT run_id, cancel_action FROM ${s}.runs WHERE run_id = ANY($1::uuid[])`, [
        runIds,
      ]);
      const found = new Set(rows.map((r) => r.run_id as string));
      for (const r of rows) if (r.cancel_action) out.set(r.run_id as string, r.cancel_action as CancelAction);
      for (const id of runIds) if (!found.has(id)) out.set(id, 'interrupt');
      return out;
    },
    async sweep(maxAttempts: number): Promise<SweepResult> {
      // The safety tick: the next claim queries again (e.g. a thread that was locked when we last looked).
      changed();
      const res: SweepResult = { requeued: [], failed: [] };
      const { rows: expired } = await pool.query(`SELECT run_id, thread_id FROM ${s}.runs WHERE status = 'running'
        AND lease_expires_at < now() ORDER BY seq LIMIT 100`);
      // One transaction per run, thread locked first like every other writer; the lease is re-checked under lock.
      for (const e of expired) {
        await tx(async (c) => {
          const { rows: locked } = await c.query(
            `SELECT 1 FROM ${s}.threads WHERE thread_id = $1 FOR UPDATE SKIP LOCKED`,
            [e.thread_id],
          );
          if (!locked[0]) return;
          const { rows } = await c.query(
            `SELECT * FROM ${s}.runs WHERE run_id = $1 AND status = 'running'
            AND lease_expires_at < now() FOR UPDATE`,
            [e.run_id],
          );
          if (!rows[0]) return;
          const r = toRun(rows[0]);
          const decision = decideSweep(r, maxAttempts);
          if (decision.kind === 'rollback') {
            await removeRolledBack(c, r.thread_id, r.run_id);
            await notify(c, { type: 'run_done', run_id: r.run_id });
            res.failed.push(r.run_id);
          } else if (decision.kind === 'end') {
            const { outcome } = decision;
            await c.query(
              `UPDATE ${s}.runs SET status = $2, error = $3, worker_id = NULL, lease_expires_at = NULL,
              updated_at = now() WHERE run_id = $1`,
              [r.run_id, outcome.status, outcome.error ? JSON.stringify(outcome.error) : null],
            );
            await settleThread(c, r.thread_id, outcome);
            await notify(c, { type: 'run_done', run_id: r.run_id });
            res.failed.push(r.run_id);
          } else {
            await c.query(
              `UPDATE ${s}.runs SET status = 'pending', worker_id = NULL, lease_expires_at = NULL,
              updated_at = now() WHERE run_id = $1`,
              [r.run_id],
            );
            await notify(c, { type: 'wake' });
            res.requeued.push(r.run_id);
          }
        });
      }
      return res;
    },
  };
}

// Claiming runs (Postgres): the queue's take (oldest claimable run first, one claimer per run), leases kept alive by
// heartbeats, and runs given back on a graceful shutdown. The claim's CTEs are shared with finishAndClaim.
import type { RunQueue } from '../../ports/run-queue.ts';
import type { RunRecord } from '../../types.ts';
import { RUN_COLS, type PgContext } from '../context.ts';

/** The statement parts that claim (claim, finishAndClaim and the create that claims at once). */
export function claimStatementParts(ctx: PgContext) {
  const { s, toRun } = ctx;

  /**
   * The CTEs that claim (claim, finishAndClaim): `cand`, the thread of the oldest claimable run, locked (SKIP LOCKED:
   * another claimer has it), and `claimed`, its oldest due pending run, now worker `worker`'s for `leaseSecs` (SQL
   * parameters). The UPDATE re-checks status under the row lock, so a claimer working from a stale snapshot gets
   * nothing instead of a second copy. `ending`: run $1 ends in the same statement (CTE r), so its thread counts as
   * free once r ended it, and it is not a candidate itself.
   */
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

  return { claimCtes, claimedRun };
}

export function postgresRunClaims(ctx: PgContext): Pick<RunQueue, 'claim' | 'heartbeat' | 'release'> {
  const { pool, s, channel, origin, gate, afterWrite, local, named } = ctx;
  const { claimCtes, claimedRun } = claimStatementParts(ctx);

  return {
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
  };
}

// Ending runs (Postgres): finish, one statement that ends the run, settles its thread and tells the waiters, and
// finishAndClaim, the same statement also claiming the run the freed slot goes to next.
import { outcomeValuesText } from '../../common.ts';
import { threadErrorAfter, threadStatusAfter } from '../../run-rules.ts';
import type { RunQueue } from '../../ports/run-queue.ts';
import type { RunOutcome } from '../../types.ts';
import { valuesParam, type PgContext } from '../context.ts';
import { claimStatementParts } from './claim.ts';

export function postgresRunFinish(ctx: PgContext): Pick<RunQueue, 'finish' | 'finishAndClaim'> {
  const { pool, s, codec, channel, origin, changed, named } = ctx;
  const { claimCtes, claimedRun } = claimStatementParts(ctx);

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
  };
}

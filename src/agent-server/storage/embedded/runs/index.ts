// Runs of the embedded store: the queue, leases and cancels. What each change does to the runs in flight and to
// the thread is decided by run-rules.ts; this file executes it inside one IMMEDIATE transaction.
import { ConflictError, NotFoundError } from '../../../../lib/errors.ts';
import { TERMINAL_STATUSES_SQL, withEndedValues } from '../../common.ts';
import {
  cancelEffect,
  decideCreate,
  decideDelete,
  decideSweep,
  mayFinish,
  mayRollback,
  threadStatusAfterDequeue,
  threadStatusAfterRemoval,
  type CancelEffect,
} from '../../run-rules.ts';
import type {
  CancelAction,
  NewRun,
  RunOutcome,
  RunRecord,
  RunStatus,
  RunStore,
  StorageEvent,
  SweepResult,
} from '../../types.ts';
import { j, pj, type EmbeddedContext, type Row } from '../context.ts';

export function embeddedRuns(
  ctx: EmbeddedContext,
): RunStore & { createIn(run: NewRun, events: StorageEvent[]): RunRecord } {
  const { sql, inTx, st, emit, now, settleThread, rollbackCheckpoints, codec, toRun, readNullable } = ctx;
  /** A run and, once it has ended, its thread's values (getWithValues): a join's one read. */
  const runWithValues = sql(`SELECT r.*, CASE WHEN r.status IN (${TERMINAL_STATUSES_SQL}) THEN t."values" END AS _values
    FROM ap_runs r LEFT JOIN ap_threads t ON t.thread_id = r.thread_id WHERE r.run_id = ?`);

  /** Applies one cancel decision to a run in the open transaction; returns the event to send after commit. */
  function applyCancel(c: CancelEffect): StorageEvent | null {
    switch (c.effect) {
      case 'delete':
        st.deleteRun.run(c.run_id);
        return { type: 'run_done', run_id: c.run_id };
      case 'interrupt':
        sql(`UPDATE ap_runs SET status = 'interrupted', updated_at = ? WHERE run_id = ?`).run(now(), c.run_id);
        return { type: 'run_done', run_id: c.run_id };
      case 'flag':
        sql('UPDATE ap_runs SET cancel_action = ? WHERE run_id = ?').run(c.action, c.run_id);
        return { type: 'cancel', run_id: c.run_id, action: c.action };
      case 'none':
        return null;
    }
  }

  /** A pending run left the queue: the thread goes idle once nothing else is in flight. */
  function afterDequeue(threadId: string): void {
    const status = threadStatusAfterDequeue(!!st.inflight.get(threadId));
    if (status) st.threadStatus.run(status, now(), threadId);
  }

  /** Deletes a cancelled run and its checkpoints; the thread is busy while more runs wait. */
  function removeRolledBack(threadId: string, runId: string): void {
    rollbackCheckpoints(threadId, runId);
    st.deleteRun.run(runId);
    st.threadStatus.run(threadStatusAfterRemoval(!!st.hasPending.get(threadId)), now(), threadId);
  }

  /** Ends a claimed run and settles its thread, inside the caller's open transaction; false: not this worker's. */
  function finishIn(runId: string, workerId: string, outcome: RunOutcome): boolean {
    const r = st.getRun.get(runId) as Row | undefined;
    if (!r || !mayFinish(r as Pick<RunRecord, 'status' | 'worker_id'>, workerId)) return false;
    sql(`UPDATE ap_runs SET status = ?, error = ?, updated_at = ?, worker_id = NULL,
      lease_expires_at = NULL WHERE run_id = ?`).run(
      outcome.status,
      outcome.error ? j(outcome.error) : null,
      now(),
      runId,
    );
    settleThread(r.thread_id as string, outcome);
    return true;
  }

  /** Claims a claimable run for `workerId`, inside the caller's open transaction. */
  function claimIn(runId: string, threadId: string, workerId: string, leaseMs: number): RunRecord {
    const ts = now();
    st.setRunning.run(workerId, Date.now() + leaseMs, ts, runId);
    st.threadBusy.run(ts, threadId);
    return toRun(st.getRun.get(runId) as Row);
  }

  /**
   * Creates a run inside the caller's open transaction (crons fire through it in the transaction that claims their
   * tick); the events to send after commit go to `events`.
   */
  function createIn(run: NewRun, events: StorageEvent[]): RunRecord {
    const ts = now();
    let thread = st.threadMetadata.get(run.thread_id) as Row | undefined;
    if (!thread) {
      if (run.if_not_exists !== 'create') throw new NotFoundError(`Thread with ID ${run.thread_id} not found`);
      st.insertThread.run(run.thread_id, ts, ts, ts, j(run.thread_metadata));
      thread = st.threadMetadata.get(run.thread_id) as Row;
    }
    const decision = decideCreate(run.multitask_strategy, (st.inflight.all(run.thread_id) as Row[]).map(toRun));
    if (decision.kind === 'reject') throw new ConflictError(decision.detail);
    for (const c of decision.cancel) {
      const e = applyCancel(c);
      if (e) events.push(e);
    }
    st.insertRun.run(
      run.run_id,
      run.thread_id,
      run.assistant_id,
      ts,
      ts,
      j(run.metadata),
      codec.write(run.kwargs ?? {}),
      run.multitask_strategy,
      run.delay_ms ? Date.now() + run.delay_ms : null,
    );
    const meta = { ...pj(thread.metadata), ...run.thread_metadata };
    sql(`UPDATE ap_threads SET status = 'busy', metadata = ?, updated_at = ? WHERE thread_id = ?`).run(
      j(meta),
      ts,
      run.thread_id,
    );
    return toRun(st.getRun.get(run.run_id) as Row);
  }

  return {
    createIn,
    async create(run: NewRun, claim?: { workerId: string; leaseMs: number }) {
      const events: StorageEvent[] = [];
      const created = inTx(() => {
        const r = createIn(run, events);
        // The claim a wake-up would send next, in this transaction: only when it would take this very run.
        if (!claim || (st.claimable.get(Date.now()) as Row | undefined)?.run_id !== r.run_id) return r;
        return claimIn(r.run_id, r.thread_id, claim.workerId, claim.leaseMs);
      });
      for (const e of events) emit(e);
      if (created.status === 'pending') emit({ type: 'wake' });
      return created;
    },
    async get(threadId: string, runId: string) {
      const r = st.getRun.get(runId) as Row | undefined;
      return r && r.thread_id === threadId ? toRun(r) : null;
    },
    async getWithValues(threadId: string, runId: string) {
      const r = runWithValues.get(runId) as Row | undefined;
      if (!r || r.thread_id !== threadId) return null;
      return withEndedValues(toRun(r), readNullable(r._values));
    },
    async getById(runId: string) {
      const r = st.getRun.get(runId) as Row | undefined;
      return r ? toRun(r) : null;
    },
    async list(threadId: string, q: { limit: number; offset: number; status?: RunStatus }) {
      const params: unknown[] = [threadId];
      let where = 'thread_id = ?';
      if (q.status) {
        where += ' AND status = ?';
        params.push(q.status);
      }
      return (
        sql(`SELECT * FROM ap_runs WHERE ${where} ORDER BY seq DESC LIMIT ? OFFSET ?`).all(
          ...params,
          q.limit,
          q.offset,
        ) as Row[]
      ).map(toRun);
    },
    async delete(threadId: string, runId: string) {
      inTx(() => {
        const r = st.getRun.get(runId) as Row | undefined;
        if (!r || r.thread_id !== threadId) throw new NotFoundError(`Run ${runId} not found`);
        const decision = decideDelete(r as Pick<RunRecord, 'run_id' | 'status'>);
        if (decision.kind === 'conflict') throw new ConflictError(decision.detail);
        st.deleteRun.run(runId);
        if (decision.settleThread) afterDequeue(threadId);
      });
      emit({ type: 'run_done', run_id: runId });
    },
    async claim(workerId: string, leaseMs: number) {
      // Most claims find nothing (the engine claims until the queue is empty, once per wake-up): a plain read
      // says so without taking the write lock and committing an empty transaction. This process is the only one
      // that creates and claims runs, so a run it finds here is still claimable inside the transaction below.
      if (!st.claimable.get(Date.now())) return null;
      return inTx(() => {
        const r = st.claimable.get(Date.now()) as Row | undefined;
        return r ? claimIn(r.run_id as string, r.thread_id as string, workerId, leaseMs) : null;
      });
    },
    async heartbeat(workerId: string, runIds: string[], leaseMs: number) {
      if (!runIds.length) return [];
      const held: string[] = [];
      const upd = sql(`UPDATE ap_runs SET lease_expires_at = ? WHERE run_id = ? AND worker_id = ?
        AND status = 'running'`);
      inTx(() => {
        for (const id of runIds) if (upd.run(Date.now() + leaseMs, id, workerId).changes) held.push(id);
      });
      return held;
    },
    async finish(runId: string, workerId: string, outcome: RunOutcome) {
      const ok = inTx(() => finishIn(runId, workerId, outcome));
      if (ok) {
        emit({ type: 'run_done', run_id: runId });
        emit({ type: 'wake' });
      }
      return ok;
    },
    async finishAndClaim(runId: string, workerId: string, outcome: RunOutcome, leaseMs: number) {
      const result = inTx(() => {
        const finished = finishIn(runId, workerId, outcome);
        const r = st.claimable.get(Date.now()) as Row | undefined;
        return { finished, next: r ? claimIn(r.run_id as string, r.thread_id as string, workerId, leaseMs) : null };
      });
      if (result.finished) emit({ type: 'run_done', run_id: runId });
      // The claimer took what it can; with nothing claimed, the wake-up lets it look again (as after finish()).
      if (result.finished && !result.next) emit({ type: 'wake' });
      return result;
    },
    async rollback(runId: string, workerId: string | null) {
      const done = inTx(() => {
        const r = st.getRun.get(runId) as Row | undefined;
        if (!r || !mayRollback(r as Pick<RunRecord, 'worker_id'>, workerId)) return false;
        removeRolledBack(r.thread_id as string, runId);
        return true;
      });
      if (done) {
        emit({ type: 'run_done', run_id: runId });
        emit({ type: 'wake' });
      }
    },
    async release(workerId: string, runIds: string[]) {
      const upd = sql(`UPDATE ap_runs SET status = 'pending', attempt = max(attempt - 1, 0),
        worker_id = NULL, lease_expires_at = NULL WHERE run_id = ? AND worker_id = ? AND status = 'running'`);
      inTx(() => {
        for (const id of runIds) upd.run(id, workerId);
      });
      emit({ type: 'wake' });
    },
    async cancel(threadId: string, runId: string, action: CancelAction, reason?: string | null) {
      let event: StorageEvent | null = null;
      const result = inTx(() => {
        const r = st.getRun.get(runId) as Row | undefined;
        if (!r || r.thread_id !== threadId) throw new NotFoundError(`Run ${runId} not found`);
        const run = toRun(r);
        const effect = cancelEffect(run, action);
        event = applyCancel(effect);
        // Only a cancel that takes effect says why; a finished run keeps what it had.
        const cancel_reason = reason && effect.effect !== 'none' ? reason : run.cancel_reason;
        if (cancel_reason !== run.cancel_reason && effect.effect !== 'delete') {
          sql('UPDATE ap_runs SET cancel_reason = ? WHERE run_id = ?').run(cancel_reason, runId);
        }
        if (effect.effect === 'delete' || effect.effect === 'interrupt') afterDequeue(threadId);
        if (effect.effect === 'interrupt') return { ...run, status: 'interrupted' as const, cancel_reason };
        if (effect.effect === 'flag') return { ...run, cancel_action: action, cancel_reason };
        return run;
      });
      if (event) emit(event);
      return result;
    },
    async cancelMany(threadId: string, runIds: string[], action: CancelAction) {
      const events: StorageEvent[] = [];
      const result = inTx(() => {
        const runs = [...new Set(runIds)].map((id) => {
          const r = st.getRun.get(id) as Row | undefined;
          if (!r || r.thread_id !== threadId) throw new NotFoundError(`Run ${id} not found`);
          return toRun(r);
        });
        let dequeued = false;
        const out = runs.map((run) => {
          const effect = cancelEffect(run, action);
          const e = applyCancel(effect);
          if (e) events.push(e);
          if (effect.effect === 'delete' || effect.effect === 'interrupt') dequeued = true;
          if (effect.effect === 'interrupt') return { ...run, status: 'interrupted' as const };
          if (effect.effect === 'flag') return { ...run, cancel_action: action };
          return run;
        });
        if (dequeued) afterDequeue(threadId);
        return out;
      });
      for (const e of events) emit(e);
      return result;
    },
    async listByStatus(statuses: Array<'pending' | 'running'>) {
      if (!statuses.length) return [];
      return (
        sql(`SELECT * FROM ap_runs WHERE status IN (${statuses.map(() => '?').join(',')}) ORDER BY seq`).all(
          ...statuses,
        ) as Row[]
      ).map(toRun);
    },
    async cancelRequests(runIds: string[]) {
      const out = new Map<string, CancelAction>();
      if (!runIds.length) return out;
      const rows = sql(`SELECT run_id, cancel_action, status FROM ap_runs WHERE run_id IN
        (${runIds.map(() => '?').join(',')})`).all(...runIds) as Row[];
      const found = new Set(rows.map((r) => r.run_id as string));
      for (const r of rows) if (r.cancel_action) out.set(r.run_id as string, r.cancel_action as CancelAction);
      // A run deleted under its worker (thread deleted) must stop too.
      for (const id of runIds) if (!found.has(id)) out.set(id, 'interrupt');
      return out;
    },
    async sweep(maxAttempts: number): Promise<SweepResult> {
      const res: SweepResult = { requeued: [], failed: [] };
      inTx(() => {
        const rows = sql(`SELECT * FROM ap_runs WHERE status = 'running' AND lease_expires_at < ?`).all(
          Date.now(),
        ) as Row[];
        for (const row of rows) {
          const r = toRun(row);
          const decision = decideSweep(r, maxAttempts);
          if (decision.kind === 'rollback') {
            removeRolledBack(r.thread_id, r.run_id);
            res.failed.push(r.run_id);
          } else if (decision.kind === 'end') {
            const { outcome } = decision;
            sql(`UPDATE ap_runs SET status = ?, error = ?, worker_id = NULL, lease_expires_at = NULL,
              updated_at = ? WHERE run_id = ?`).run(
              outcome.status,
              outcome.error ? j(outcome.error) : null,
              now(),
              r.run_id,
            );
            settleThread(r.thread_id, outcome);
            res.failed.push(r.run_id);
          } else {
            sql(`UPDATE ap_runs SET status = 'pending', worker_id = NULL, lease_expires_at = NULL,
              updated_at = ? WHERE run_id = ?`).run(now(), r.run_id);
            res.requeued.push(r.run_id);
          }
        }
      });
      for (const run_id of res.failed) emit({ type: 'run_done', run_id });
      if (res.requeued.length) emit({ type: 'wake' });
      return res;
    },
  };
}

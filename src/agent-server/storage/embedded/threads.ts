// Threads of the embedded store (a thread's runs and checkpoints go with it).
import { ConflictError } from '../../../lib/errors.ts';
import { THREAD_HEAD_COLUMNS, THREAD_SORT, threadHeadOf } from '../common.ts';
import { pruneBusyDetail, threadStatusAfterStateUpdate } from '../run-rules.ts';
import type { IfExists, Json, NewThread, PruneStrategy, ThreadQuery, ThreadStore } from '../types.ts';
import { checkpointSelectList, splitThreadRows } from '../read-ahead.ts';
import { LATEST_TWO_CHECKPOINTS, LATEST_TWO_COLUMNS, type CheckpointSaver } from './checkpoint-saver.ts';
import { j, pj, type EmbeddedContext, type Row } from './context.ts';

// GET state's reads of a thread, its latest root checkpoint and that one's parent, in one statement: a row per
// checkpoint (at most two, newest first), each with the thread's columns but its values (ThreadHead); one row of
// NULL checkpoint columns when it has none; no row when the thread does not exist.
const THREAD_WITH_CHECKPOINTS = `SELECT ${THREAD_HEAD_COLUMNS.map((c) => `t.${c}`).join(', ')},
  ${checkpointSelectList(LATEST_TWO_COLUMNS)}
  FROM ap_threads t LEFT JOIN ${LATEST_TWO_CHECKPOINTS} ck ON 1
  WHERE t.thread_id = @thread_id ORDER BY ck.checkpoint_id DESC`;

export function embeddedThreads(
  { sql, inTx, st, emit, now, requireThread, searchWhere, orderBy, codec, toThread }: EmbeddedContext,
  saver: CheckpointSaver,
): ThreadStore {
  interface DeletedRuns {
    /** Runs a worker is executing: told to stop. */
    running: string[];
    /** Every run deleted: its waiters are told it is done. */
    deleted: string[];
  }

  /** Deletes the thread, its runs and its checkpoints inside the open transaction. */
  function deleteIn(id: string): DeletedRuns {
    const all = sql(`SELECT run_id, status FROM ap_runs WHERE thread_id = ?`).all(id) as Row[];
    sql('DELETE FROM ap_runs WHERE thread_id = ?').run(id);
    sql('DELETE FROM ap_threads WHERE thread_id = ?').run(id);
    sql('DELETE FROM writes WHERE thread_id = ?').run(id);
    sql('DELETE FROM checkpoints WHERE thread_id = ?').run(id);
    return {
      running: all.filter((r) => r.status === 'running').map((r) => r.run_id as string),
      deleted: all.map((r) => r.run_id as string),
    };
  }

  function announce(gone: DeletedRuns): void {
    // Workers holding a deleted run stop it; their finish() then finds nothing to update.
    for (const run_id of gone.running) emit({ type: 'cancel', run_id, action: 'interrupt' });
    for (const run_id of gone.deleted) emit({ type: 'run_done', run_id });
  }

  /**
   * keep_latest on one thread inside the open transaction: the latest checkpoint of each namespace stays (what
   * SqliteSaver.getTuple loads: the highest checkpoint_id), with its pending writes; a legacy checkpoint (v < 4)
   * keeps its parent too, whose TASKS writes the saver reads as its pending sends. Everything else goes; a kept
   * checkpoint whose parent went becomes the namespace's root.
   */
  function keepLatest(id: string): void {
    sql(`WITH latest AS (SELECT checkpoint_ns, max(checkpoint_id) AS checkpoint_id FROM checkpoints
        WHERE thread_id = ? GROUP BY checkpoint_ns),
      keep AS (
        SELECT checkpoint_ns, checkpoint_id FROM latest
        UNION SELECT c.checkpoint_ns, c.parent_checkpoint_id FROM checkpoints c
          JOIN latest l ON l.checkpoint_ns = c.checkpoint_ns AND l.checkpoint_id = c.checkpoint_id
          WHERE c.thread_id = ? AND c.parent_checkpoint_id IS NOT NULL
            AND CASE WHEN json_valid(CAST(c.checkpoint AS TEXT))
              THEN coalesce(json_extract(CAST(c.checkpoint AS TEXT), '$.v'), 0) < 4 ELSE 0 END)
      DELETE FROM checkpoints WHERE thread_id = ?
        AND (checkpoint_ns, checkpoint_id) NOT IN (SELECT checkpoint_ns, checkpoint_id FROM keep)`).run(id, id, id);
    sql(`DELETE FROM writes WHERE thread_id = ? AND NOT EXISTS (SELECT 1 FROM checkpoints c
      WHERE c.thread_id = writes.thread_id AND c.checkpoint_ns = writes.checkpoint_ns
        AND c.checkpoint_id = writes.checkpoint_id)`).run(id);
    sql(`UPDATE checkpoints SET parent_checkpoint_id = NULL WHERE thread_id = ? AND parent_checkpoint_id IS NOT NULL
      AND NOT EXISTS (SELECT 1 FROM checkpoints p WHERE p.thread_id = checkpoints.thread_id
        AND p.checkpoint_ns = checkpoints.checkpoint_ns AND p.checkpoint_id = checkpoints.parent_checkpoint_id)`).run(
      id,
    );
  }

  return {
    async create(t: NewThread, ifExists: IfExists) {
      return inTx(() => {
        const existing = st.getThread.get(t.thread_id) as Row | undefined;
        if (existing) {
          if (ifExists === 'do_nothing') return toThread(existing);
          throw new ConflictError(`Thread ${t.thread_id} already exists`);
        }
        const ts = now();
        st.insertThread.run(t.thread_id, ts, ts, ts, j(t.metadata));
        // An explicit TTL (strategy "delete") replaces the default the insert statement wrote.
        if (t.ttl_minutes != null)
          sql(`UPDATE ap_threads SET ttl_minutes = ?, ttl_strategy = 'delete' WHERE thread_id = ?`).run(
            t.ttl_minutes,
            t.thread_id,
          );
        return toThread(st.getThread.get(t.thread_id) as Row);
      });
    },
    async get(id: string) {
      const r = st.getThread.get(id) as Row | undefined;
      return r ? toThread(r) : null;
    },
    async metadata(id: string) {
      const r = st.threadMetadata.get(id) as Row | undefined;
      return r ? pj(r.metadata) : null;
    },
    async getReadingAhead(id: string, token: string) {
      const rows = sql(THREAD_WITH_CHECKPOINTS).all({ thread_id: id }) as Row[];
      const { thread, checkpoints } = splitThreadRows(rows, LATEST_TWO_COLUMNS);
      if (!thread) return { thread: null, release: () => undefined };
      return { thread: threadHeadOf(toThread, thread), release: await saver.keepAhead(token, checkpoints) };
    },
    async patch(id: string, p: { metadata?: Json; ttl_minutes?: number }) {
      return inTx(() => {
        const cur = toThread(requireThread(id));
        const ttl = p.ttl_minutes ?? null;
        sql(`UPDATE ap_threads SET metadata = ?, updated_at = ?, ttl_minutes = coalesce(?, ttl_minutes),
          ttl_strategy = CASE WHEN ? IS NULL THEN ttl_strategy ELSE 'delete' END WHERE thread_id = ?`).run(
          j({ ...cur.metadata, ...p.metadata }),
          now(),
          ttl,
          ttl,
          id,
        );
        return toThread(st.getThread.get(id) as Row);
      });
    },
    async delete(id: string) {
      const gone = inTx(() => {
        requireThread(id);
        return deleteIn(id);
      });
      announce(gone);
    },
    async prune(ids: string[], strategy: PruneStrategy) {
      const unique = [...new Set(ids)];
      let gone: DeletedRuns = { running: [], deleted: [] };
      const pruned = inTx(() => {
        const found = unique.filter((id) => st.getThread.get(id) !== undefined);
        if (strategy === 'delete') {
          for (const id of found) {
            const d = deleteIn(id);
            gone = { running: [...gone.running, ...d.running], deleted: [...gone.deleted, ...d.deleted] };
          }
          return found;
        }
        const busy = found.filter((id) => st.inflight.get(id) !== undefined);
        if (busy.length) throw new ConflictError(pruneBusyDetail(busy));
        for (const id of found) keepLatest(id);
        return found;
      });
      announce(gone);
      return pruned;
    },
    async sweepExpired(limit: number) {
      // One transaction: a run created after the check would find its thread gone (and answer 404), never run on it.
      // A keep_latest thread already pruned at its current updated_at is left alone until it is updated again.
      return inTx(() => {
        const rows = sql(`SELECT thread_id, coalesce(ttl_strategy, 'delete') AS strategy FROM ap_threads t
          WHERE ttl_minutes IS NOT NULL AND status <> 'busy'
          AND julianday(updated_at) + ttl_minutes / 1440.0 < julianday(?)
          AND (coalesce(ttl_strategy, 'delete') <> 'keep_latest' OR ttl_pruned_updated_at IS NULL
            OR ttl_pruned_updated_at <> updated_at)
          AND NOT EXISTS (SELECT 1 FROM ap_runs r WHERE r.thread_id = t.thread_id AND r.status IN ('pending','running'))
          LIMIT ?`).all(now(), limit) as Row[];
        const deleted: string[] = [];
        const pruned: string[] = [];
        for (const r of rows) {
          const id = r.thread_id as string;
          if (r.strategy === 'keep_latest') {
            keepLatest(id);
            sql('UPDATE ap_threads SET ttl_pruned_updated_at = updated_at WHERE thread_id = ?').run(id);
            pruned.push(id);
            continue;
          }
          sql('DELETE FROM ap_runs WHERE thread_id = ?').run(id);
          sql('DELETE FROM ap_threads WHERE thread_id = ?').run(id);
          sql('DELETE FROM writes WHERE thread_id = ?').run(id);
          sql('DELETE FROM checkpoints WHERE thread_id = ?').run(id);
          deleted.push(id);
        }
        return { deleted, pruned };
      });
    },
    async search(q: ThreadQuery) {
      const params: unknown[] = [];
      const text = `SELECT * FROM ap_threads ${searchWhere('t', q, params)} ${orderBy(q, THREAD_SORT)} LIMIT ? OFFSET ?`;
      return (sql(text).all(...params, q.limit ?? 10, q.offset ?? 0) as Row[]).map(toThread);
    },
    async count(q: ThreadQuery) {
      const params: unknown[] = [];
      const r = sql(`SELECT count(*) AS n FROM ap_threads ${searchWhere('t', q, params)}`).get(...params);
      return (r as Row).n as number;
    },
    async copy(id: string, newId: string) {
      return inTx(() => {
        const row = requireThread(id);
        const src = toThread({ ...row, values: null });
        const ts = now();
        sql(`INSERT INTO ap_threads (thread_id, created_at, updated_at, state_updated_at, metadata, status,
          config, "values", interrupts, error) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?)`).run(
          newId,
          ts,
          ts,
          ts,
          // The copy's metadata names the copy, as the platform's does.
          j({ ...src.metadata, thread_id: newId }),
          src.status === 'busy' ? 'idle' : src.status,
          j(src.config),
          // As stored: the copy is sealed under the same key (rotation seals it again like any other row).
          row.values ?? null,
          j(src.interrupts),
          src.error === null ? null : j(src.error),
        );
        sql(`INSERT INTO checkpoints SELECT ?, checkpoint_ns, checkpoint_id, parent_checkpoint_id, type,
          checkpoint, metadata FROM checkpoints WHERE thread_id = ?`).run(newId, id);
        sql(`INSERT INTO writes SELECT ?, checkpoint_ns, checkpoint_id, task_id, idx, channel, type, value
          FROM writes WHERE thread_id = ?`).run(newId, id);
        return toThread(st.getThread.get(newId) as Row);
      });
    },
    async setState(id: string, values: Json | null, interrupted: boolean, interrupts: Json) {
      inTx(() => {
        requireThread(id);
        const status = threadStatusAfterStateUpdate(!!st.inflight.get(id), interrupted);
        const ts = now();
        sql(`UPDATE ap_threads SET "values" = ?, interrupts = ?, state_updated_at = ?, updated_at = ?,
          status = coalesce(?, status) WHERE thread_id = ?`).run(
          values === null ? null : codec.write(values),
          j(interrupts),
          ts,
          ts,
          status,
          id,
        );
      });
    },
  };
}

// Checkpoint tuples a saver read ahead for one reader: GET state needs a thread's latest root checkpoint and that
// one's parent (whose tasks are the state's metadata.writes), and a store reads both in the statement that reads
// the thread (ThreadStore.getReadingAhead). The reader's getTuple calls carry a token under READ_AHEAD_KEY and are
// answered from here; every other call reads as before.
import type { RunnableConfig } from '@langchain/core/runnables';
import type { CheckpointTuple } from '@langchain/langgraph-checkpoint';
import { READ_AHEAD_KEY } from './types.ts';

/**
 * The select list that names a checkpoint read's `columns` in a statement that also reads the thread, when the
 * read is joined as `ck`: `ck.<column> AS ck_<column>`.
 */
export function checkpointSelectList(columns: readonly string[]): string {
  return columns.map((c) => `ck.${c} AS ck_${c}`).join(', ');
}

/**
 * The rows of such a statement (one per checkpoint, newest first; one of NULL checkpoint columns when the thread has
 * none; none when there is no thread): the thread's row and the checkpoints' rows in the read's own column names.
 */
export function splitThreadRows<R extends Record<string, unknown>>(
  rows: R[],
  columns: readonly string[],
): { thread: R | undefined; checkpoints: Record<string, unknown>[] } {
  const checkpoints = rows
    .filter((r) => r.ck_checkpoint_id != null)
    .map((r) => Object.fromEntries(columns.map((c) => [c, r[`ck_${c}`]])));
  return { thread: rows[0], checkpoints };
}

export class ReadAheadTuples {
  /** By token, then by checkpoint id ('' for the latest); each is handed out once. */
  private readonly byToken = new Map<string, Map<string, CheckpointTuple | undefined>>();

  /** How many readers' tuples are held (for tests: nothing is left behind). */
  get size(): number {
    return this.byToken.size;
  }

  /**
   * Keeps the newest root checkpoint and the one before it when that is its parent (after a fork it need not be)
   * for the reads carrying `token`; `newestFirst` may be empty (a thread without checkpoints). Call the returned
   * function when the reader is done: it drops what was not taken.
   */
  keep(token: string, [latest, before]: CheckpointTuple[]): () => void {
    const got = new Map<string, CheckpointTuple | undefined>([['', latest]]);
    const parentId = latest?.parentConfig?.configurable?.checkpoint_id as string | undefined;
    if (parentId && before?.config.configurable?.checkpoint_id === parentId) got.set(parentId, before);
    this.byToken.set(token, got);
    return () => {
      if (this.byToken.get(token) === got) this.byToken.delete(token);
    };
  }

  /** The tuple kept for this read (`found: false` when the read is not one of a reader's, or was not read ahead). */
  take(config: RunnableConfig): { found: boolean; tuple?: CheckpointTuple } {
    const c = config.configurable;
    const token = c?.[READ_AHEAD_KEY] as string | undefined;
    if (!token || c?.checkpoint_ns) return { found: false };
    const got = this.byToken.get(token);
    const id = (c?.checkpoint_id as string | undefined) ?? '';
    if (!got?.has(id)) return { found: false };
    const tuple = got.get(id);
    got.delete(id);
    return tuple ? { found: true, tuple } : { found: true };
  }
}

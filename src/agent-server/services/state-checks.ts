// The checks and refusals of thread state reads and writes (services/state.ts): a request's checkpoint namespace,
// the 404s of a subgraph namespace or checkpoint that is not there (saying which), and the 409 of a busy thread.
import { BadRequestError, ConflictError, NotFoundError } from '../../lib/errors.ts';
import type { PregelLike } from '../graphs/index.ts';
import {
  EMPTY_STATE,
  checkpointNsProblem,
  readThreadState,
  subgraphPath,
  type CheckpointSelector,
} from '../runs/state.ts';
import type { Thread } from '../storage/types.ts';

/** The namespace a request's checkpoint names ('' for the root graph), refused with 400 when malformed. */
export function namespaceOf(sel: CheckpointSelector | null | undefined): string {
  const ns = sel?.checkpoint_ns ?? '';
  const problem = ns ? checkpointNsProblem(ns) : null;
  if (problem) throw new BadRequestError(problem);
  return ns;
}

/** Whether a namespace's subgraph path is one of the graph's declared subgraphs (undefined: cannot tell). */
async function declaresSubgraph(graph: PregelLike, ns: string): Promise<boolean | undefined> {
  if (!graph.getSubgraphsAsync) return undefined;
  const path = subgraphPath(ns);
  try {
    for await (const [name] of graph.getSubgraphsAsync(path, true)) if (name === path) return true;
  } catch {
    return undefined;
  }
  return false;
}

/** 404 for a subgraph namespace with no checkpoint on the thread, saying whether the graph has such a subgraph. */
export async function namespaceNotFound(
  graph: PregelLike | null,
  threadId: string,
  ns: string,
): Promise<NotFoundError> {
  const shown = ns.length > 200 ? `${ns.slice(0, 200)}...` : ns;
  if (graph && (await declaresSubgraph(graph, ns)) === false) {
    return new NotFoundError(
      `Subgraph "${subgraphPath(shown)}" not found: checkpoint_ns "${shown}" names no subgraph of the thread's graph`,
    );
  }
  return new NotFoundError(`No checkpoint found in namespace "${shown}" of thread ${threadId}`);
}

/**
 * The 404 for a subgraph checkpoint that could not be read: the namespace's when it has no checkpoint at all
 * (or names no subgraph), the checkpoint id's when only that one is missing from it.
 */
export async function subgraphCheckpointNotFound(
  graph: PregelLike,
  threadId: string,
  sel: CheckpointSelector | null | undefined,
  ns: string,
  checkpointId: string | null | undefined,
): Promise<NotFoundError> {
  if (checkpointId) {
    const latest = await readThreadState(graph, threadId, { ...sel, checkpoint_id: null }).catch(() => EMPTY_STATE);
    if (latest.checkpoint_id) return new NotFoundError(`Checkpoint ${checkpointId} not found in namespace "${ns}"`);
  }
  return namespaceNotFound(graph, threadId, ns);
}

/** LangGraph's own refusal of a namespace naming no subgraph (whichever version's wording) as a 404. */
export function isSubgraphNotFound(err: unknown): boolean {
  return err instanceof Error && /subgraph\b.*\bnot found/i.test(err.message);
}

/** A thread's state may be written only with no run in flight on it (a run writes checkpoints of its own). */
export function assertNotBusy(thread: Thread): void {
  if (thread.status === 'busy') {
    throw new ConflictError(
      `Thread ${thread.thread_id} is busy: a run is in flight; wait for it to finish before updating the state`,
    );
  }
}

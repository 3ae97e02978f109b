// Thread state outside runs: reads of a thread's (or a subgraph's) checkpoints, the single state update, history,
// and the bookkeeping after a write (the thread's record, the thread stream's state_update event). The checks and
// refusals they share are in state-checks.ts.
import { randomUUID } from 'node:crypto';
import { BadRequestError, NotFoundError } from '../../lib/errors.ts';
import type { PregelLike, StateSnapshotLike } from '../graphs/index.ts';
import {
  EMPTY_STATE,
  checkpointConfigurable,
  interruptsOf,
  readThreadState,
  toApiState,
  type ApiThreadState,
  type CheckpointSelector,
} from '../runs/state.ts';
import { toPlain } from '../serde.ts';
import type { Json, Thread, ThreadHead } from '../storage/types.ts';
import { publishStateUpdate } from '../streams/thread-events.ts';
import type { AssistantService } from './assistants.ts';
import { threadNotFound, type ServiceDeps } from './context.ts';
import {
  assertNotBusy,
  isSubgraphNotFound,
  namespaceNotFound,
  namespaceOf,
  subgraphCheckpointNotFound,
} from './state-checks.ts';
import type { ThreadService } from './threads.ts';

export type StateService = ReturnType<typeof createStateService>;

export function createStateService({
  storage,
  graphs,
  engine,
  assistants,
  threads,
}: Pick<ServiceDeps, 'storage' | 'graphs' | 'engine'> & { assistants: AssistantService; threads: ThreadService }) {
  const { graphIds } = assistants;

  function graphFor(graphId: string, config: Json = {}): Promise<PregelLike> {
    assistants.requireGraph(graphId);
    return graphs.getGraph(graphId, config, { checkpointer: engine.checkpointer });
  }

  /**
   * The graph that reads or updates a thread's state. Only a factory's graph depends on the config, so only then
   * is the thread's config looked up (a read of its latest run): a compiled graph is the same under any config.
   */
  async function graphForThread(graphId: string, thread: ThreadHead): Promise<PregelLike> {
    return graphFor(graphId, graphs.isFactory(graphId) ? await threads.graphConfig(thread) : {});
  }

  /** The thread (404 when missing) and its latest checkpoints read ahead, in one statement. */
  async function threadReadingAhead(
    threadId: string,
  ): Promise<{ thread: ThreadHead; token: string; release: () => void }> {
    const token = randomUUID();
    const { thread, release } = await storage.threads.getReadingAhead(threadId, token);
    if (!thread) {
      release();
      throw new NotFoundError(threadNotFound(threadId));
    }
    return { thread, token, release };
  }

  async function threadGraph(threadId: string, known?: ThreadHead): Promise<PregelLike | null> {
    const thread = known ?? (await threads.require(threadId));
    const graphId = thread.metadata.graph_id;
    if (typeof graphId !== 'string' || !graphIds.has(graphId)) return null;
    return graphForThread(graphId, thread);
  }

  /**
   * A thread's state: the latest root graph checkpoint, the one a checkpoint id names, or, for a checkpoint with
   * a subgraph's checkpoint_ns, that subgraph's (latest or named) checkpoint as LangGraph reads it.
   */
  async function getState(
    threadId: string,
    checkpoint?: string | CheckpointSelector,
    subgraphs = false,
  ): Promise<ApiThreadState> {
    const sel = typeof checkpoint === 'string' ? { checkpoint_id: checkpoint } : (checkpoint ?? undefined);
    const ns = namespaceOf(sel);
    const checkpointId = sel?.checkpoint_id ?? undefined;
    // The latest root state: the thread and the checkpoints it needs in one read.
    if (!ns && !checkpointId) {
      const ahead = await threadReadingAhead(threadId);
      try {
        const graph = await threadGraph(threadId, ahead.thread);
        return graph
          ? await readThreadState(graph, threadId, undefined, { subgraphs, readAhead: ahead.token })
          : { ...EMPTY_STATE };
      } finally {
        ahead.release();
      }
    }
    const graph = await threadGraph(threadId);
    if (!graph) {
      if (ns) throw await namespaceNotFound(null, threadId, ns);
      return { ...EMPTY_STATE };
    }
    let state: ApiThreadState;
    try {
      state = await readThreadState(graph, threadId, ns ? sel : checkpointId, { subgraphs });
    } catch (err) {
      if (ns && isSubgraphNotFound(err)) throw await namespaceNotFound(graph, threadId, ns);
      throw err;
    }
    if (ns && !state.checkpoint_id) throw await subgraphCheckpointNotFound(graph, threadId, sel, ns, checkpointId);
    if (checkpointId && !state.checkpoint_id) throw new NotFoundError(`Checkpoint ${checkpointId} not found`);
    return state;
  }

  /** The thread, when its state may be written now (assertNotBusy). */
  async function writableThread(threadId: string): Promise<Thread> {
    const thread = await threads.require(threadId);
    assertNotBusy(thread);
    return thread;
  }

  /** A writable thread (writableThread) and its graph, which it must have from a run (400 before its first). */
  async function writableThreadGraph(
    threadId: string,
  ): Promise<{ thread: Thread; graphId: string; graph: PregelLike }> {
    const thread = await threads.require(threadId);
    const graphId = thread.metadata.graph_id;
    if (typeof graphId !== 'string' || !graphIds.has(graphId)) {
      throw new BadRequestError(
        `Thread ${threadId} has no graph yet: run an assistant on it before updating its state`,
      );
    }
    assertNotBusy(thread);
    return { thread, graphId, graph: await graphForThread(graphId, thread) };
  }

  /**
   * After a write to a thread's checkpoints: the thread's record (about the root graph, whichever graph the write
   * went to) and the state_update event of thread streams.
   */
  async function recordStateWrite(threadId: string, graph: PregelLike): Promise<void> {
    const snapshot = await graph.getState({ configurable: { thread_id: threadId, checkpoint_ns: '' } });
    await storage.threads.setState(
      threadId,
      toPlain<Json>(snapshot.values ?? {}),
      snapshot.next.length > 0,
      interruptsOf(snapshot),
    );
    await publishStateUpdate(storage.streams, threadId, await getState(threadId), randomUUID());
  }

  async function updateState(
    threadId: string,
    body: {
      values?: unknown;
      checkpoint_id?: string | null;
      checkpoint?: CheckpointSelector | null;
      as_node?: string | null;
    },
  ) {
    const ns = namespaceOf(body.checkpoint);
    const { thread, graphId, graph } = await writableThreadGraph(threadId);
    const cp = body.checkpoint_id ?? body.checkpoint?.checkpoint_id;
    const sel: CheckpointSelector = { ...body.checkpoint, checkpoint_id: cp };
    const configurable = checkpointConfigurable(threadId, sel) as Json;
    if (ns) {
      // A subgraph's update goes on a checkpoint it already has: LangGraph would otherwise start a history in
      // any namespace under a declared subgraph's name, task id or not.
      let existing: ApiThreadState;
      try {
        existing = await readThreadState(graph, threadId, sel);
      } catch (err) {
        if (isSubgraphNotFound(err)) throw await namespaceNotFound(graph, threadId, ns);
        throw err;
      }
      if (!existing.checkpoint_id) throw await subgraphCheckpointNotFound(graph, threadId, sel, ns, cp);
    }
    const metadata = { graph_id: graphId, assistant_id: thread.metadata.assistant_id, thread_id: threadId };
    let next: Json;
    try {
      next = await graph.updateState({ configurable, metadata }, body.values ?? null, body.as_node ?? undefined);
    } catch (err) {
      if (ns && isSubgraphNotFound(err)) throw await namespaceNotFound(graph, threadId, ns);
      // Graph-level refusals (unknown node, ambiguous update) are the caller's input problem.
      throw new BadRequestError(`State update rejected: ${(err as Error).message}`);
    }
    await recordStateWrite(threadId, graph);
    const c = (next.configurable ?? {}) as Json;
    const checkpoint = {
      thread_id: threadId,
      checkpoint_ns: String(c.checkpoint_ns ?? ''),
      checkpoint_id: String(c.checkpoint_id ?? ''),
      checkpoint_map: (c.checkpoint_map as Json | undefined) ?? null,
    };
    return { checkpoint, configurable: checkpoint };
  }

  async function history(
    threadId: string,
    q: {
      limit: number;
      before?: string | null;
      metadata?: Json | null;
      checkpoint_id?: string | null;
      /** A subgraph's namespace (and checkpoint_map) to list that subgraph's checkpoints. */
      checkpoint?: CheckpointSelector | null;
    },
  ): Promise<ApiThreadState[]> {
    const ns = namespaceOf(q.checkpoint);
    const checkpointId = q.checkpoint_id ?? q.checkpoint?.checkpoint_id ?? undefined;
    const graph = await threadGraph(threadId);
    if (!graph) {
      if (ns) throw await namespaceNotFound(null, threadId, ns);
      return [];
    }
    const configurable = checkpointConfigurable(threadId, { ...q.checkpoint, checkpoint_id: checkpointId }) as Json;
    const opts: Json = { limit: q.limit + 1 };
    if (q.before) opts.before = { configurable: { thread_id: threadId, checkpoint_ns: ns, checkpoint_id: q.before } };
    if (q.metadata && Object.keys(q.metadata).length) opts.filter = q.metadata;
    const snaps: StateSnapshotLike[] = [];
    try {
      for await (const s of graph.getStateHistory({ configurable }, opts)) snaps.push(s);
    } catch (err) {
      if (ns && isSubgraphNotFound(err)) throw await namespaceNotFound(graph, threadId, ns);
      throw err;
    }
    // An empty page of a namespace that never had a checkpoint is a namespace naming nothing.
    if (ns && !snaps.length) {
      const latest = await readThreadState(graph, threadId, { ...q.checkpoint, checkpoint_id: null }).catch(
        () => EMPTY_STATE,
      );
      if (!latest.checkpoint_id) throw await namespaceNotFound(graph, threadId, ns);
    }
    // One extra snapshot fetched so the last one shown still gets its writes from its parent.
    return snaps.slice(0, q.limit).map((s, i) => toApiState(s, snaps[i + 1]));
  }

  return {
    get: getState,
    update: updateState,
    history,
    namespaceOf,
    writableThread,
    writableThreadGraph,
    recordStateWrite,
  };
}

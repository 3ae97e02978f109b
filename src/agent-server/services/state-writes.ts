// Thread state writes beside the single update (state.ts):
// - patchState: merges metadata into one checkpoint's metadata in place (PATCH /threads/{id}/state, the SDK's
//   threads.patchState). No new checkpoint, no new step: the checkpoint is written back under its own id, parent
//   and channel versions, through the store's saver.
// - applySupersteps: a new thread's supersteps (POST /threads with `supersteps`, the SDK's way of copying a thread
//   between deployments). Each superstep is one step, its updates applied together as LangGraph's bulkUpdateState
//   does; an update's `command` is applied as a LangGraph Command.
import { BadRequestError, NotFoundError } from '../../lib/errors.ts';
import type { RunEngine } from '../runs/engine.ts';
import { toCommand } from '../runs/executor.ts';
import { checkpointConfigurable, type CheckpointSelector } from '../runs/state.ts';
import type { Json } from '../storage/types.ts';
import type { StateService } from './state.ts';

/** One superstep as the API takes it: updates as if these nodes had run in the same step. */
interface Superstep {
  updates: Array<{
    values?: unknown;
    command?: { update?: unknown; resume?: unknown; goto?: unknown } | null;
    as_node: string;
  }>;
}

interface CheckpointTuple {
  config: Json;
  checkpoint: Json;
  metadata?: Json;
  parentConfig?: Json;
}

interface Saver {
  getTuple(config: Json): Promise<CheckpointTuple | undefined>;
  put(config: Json, checkpoint: Json, metadata: Json, newVersions: Json): Promise<Json>;
}

export function createStateWrites({ engine, state }: { engine: RunEngine; state: StateService }) {
  const saver = engine.checkpointer as unknown as Saver;

  async function patchState(
    threadId: string,
    metadata: Json,
    checkpoint?: CheckpointSelector,
  ): Promise<Record<never, never>> {
    const ns = state.namespaceOf(checkpoint);
    await state.writableThread(threadId);
    // The path's thread, whatever the checkpoint object says; a subgraph's namespace reaches its checkpoints.
    const configurable = checkpointConfigurable(threadId, checkpoint) as Json;
    const checkpointId = checkpoint?.checkpoint_id;
    const saved = await saver.getTuple({ configurable });
    if (!saved) {
      const where = ns ? ` in namespace "${ns.slice(0, 200)}"` : '';
      throw new NotFoundError(
        checkpointId
          ? `Checkpoint ${checkpointId} not found${where}`
          : `Thread ${threadId} has no checkpoint to patch${where}`,
      );
    }
    // Written back where it was: the parent's config names the parent (none for a namespace's first checkpoint), and
    // no channel changed, so no channel value is written again.
    const at = saved.parentConfig ?? { configurable: { thread_id: threadId, checkpoint_ns: ns } };
    await saver.put(at, saved.checkpoint, { ...(saved.metadata ?? {}), ...metadata }, {});
    return {};
  }

  async function applySupersteps(threadId: string, supersteps: Superstep[]): Promise<void> {
    if (!supersteps.length) return;
    const { thread, graph, graphId } = await state.writableThreadGraph(threadId);
    const steps = supersteps.map((s) => ({
      updates: s.updates.map((u) => ({
        values: u.command ? toCommand(u.command) : (u.values ?? null),
        asNode: u.as_node,
      })),
    }));
    // The same checkpoint metadata as a single update's (the run checkpointer merges config.metadata in).
    const config = {
      configurable: { thread_id: threadId, checkpoint_ns: '' },
      metadata: { graph_id: graphId, assistant_id: thread.metadata.assistant_id, thread_id: threadId },
    };
    try {
      await graph.bulkUpdateState(config, steps);
    } catch (err) {
      // Graph-level refusals (unknown node, ambiguous update) are the caller's input problem.
      throw new BadRequestError(`State update rejected: ${(err as Error).message}`);
    }
    await state.recordStateWrite(threadId, graph);
  }

  return { patchState, applySupersteps };
}

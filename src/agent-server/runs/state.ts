// Thread state as the API shows it: the graph's StateSnapshot turned into plain JSON with the seed's fields
// (checkpoint_id, parent_checkpoint_id, metadata.writes) and the SDK's (checkpoint, parent_checkpoint objects).
import type { PregelLike, StateSnapshotLike } from '../graphs/index.ts';
import { toPlain } from '../serde.ts';

type Config = { configurable?: Record<string, unknown> };

export interface ApiCheckpoint {
  thread_id: string;
  checkpoint_ns: string;
  checkpoint_id: string | null;
  checkpoint_map: Record<string, unknown> | null;
}

export interface ApiThreadState {
  values: unknown;
  next: string[];
  tasks: Array<Record<string, unknown>>;
  metadata: Record<string, unknown> | null;
  created_at: string | null;
  checkpoint: ApiCheckpoint | null;
  parent_checkpoint: ApiCheckpoint | null;
  checkpoint_id: string | null;
  parent_checkpoint_id: string | null;
  interrupts: unknown[];
}

function checkpointOf(config: Config | undefined): ApiCheckpoint | null {
  const c = config?.configurable;
  if (!c?.checkpoint_id) return null;
  return {
    thread_id: String(c.thread_id ?? ''),
    checkpoint_ns: String(c.checkpoint_ns ?? ''),
    checkpoint_id: String(c.checkpoint_id),
    checkpoint_map: (c.checkpoint_map as Record<string, unknown> | undefined) ?? null,
  };
}

/** What each node wrote in the step that produced a checkpoint: the results of the parent's tasks. */
export function writesFrom(parent: StateSnapshotLike | undefined): Record<string, unknown> | null {
  if (!parent) return null;
  const done = parent.tasks.filter((t) => t.result !== undefined && t.result !== null);
  if (!done.length) return null;
  return Object.fromEntries(done.map((t) => [String(t.name), t.result]));
}

export function toApiState(snapshot: StateSnapshotLike, parent?: StateSnapshotLike): ApiThreadState {
  const checkpoint = checkpointOf(snapshot.config as Config);
  const parentCheckpoint = checkpointOf(snapshot.parentConfig as Config | undefined);
  const tasks = snapshot.tasks.map((t) => ({
    id: t.id,
    name: t.name,
    path: t.path ?? null,
    error: t.error ? (t.error instanceof Error ? t.error.message : String(t.error)) : null,
    interrupts: t.interrupts ?? [],
    checkpoint: checkpointOf((t.state as Config | undefined) ?? undefined),
    state: null,
    result: t.result ?? null,
  }));
  const metadata = snapshot.metadata ? { ...snapshot.metadata, writes: writesFrom(parent) } : null;
  return toPlain<ApiThreadState>({
    values: snapshot.values ?? {},
    next: snapshot.next,
    tasks,
    metadata,
    created_at: snapshot.createdAt ?? null,
    checkpoint,
    parent_checkpoint: parentCheckpoint,
    checkpoint_id: checkpoint?.checkpoint_id ?? null,
    parent_checkpoint_id: parentCheckpoint?.checkpoint_id ?? null,
    interrupts: tasks.flatMap((t) => t.interrupts as unknown[]),
  });
}

export const EMPTY_STATE: ApiThreadState = {
  values: {},
  next: [],
  tasks: [],
  metadata: null,
  created_at: null,
  checkpoint: null,
  parent_checkpoint: null,
  checkpoint_id: null,
  parent_checkpoint_id: null,
  interrupts: [],
};

/** Latest (or a given) checkpoint of a thread, with writes taken from its parent. */
export async function readThreadState(
  graph: PregelLike,
  threadId: string,
  checkpointId?: string,
  opts: { subgraphs?: boolean } = {},
): Promise<ApiThreadState> {
  const configurable: Record<string, unknown> = { thread_id: threadId, checkpoint_ns: '' };
  if (checkpointId) configurable.checkpoint_id = checkpointId;
  const snapshot = await graph.getState({ configurable }, opts);
  if (!snapshot.config?.configurable || !(snapshot.config.configurable as Record<string, unknown>).checkpoint_id) {
    return { ...EMPTY_STATE };
  }
  const parentId = (snapshot.parentConfig as Config | undefined)?.configurable?.checkpoint_id;
  const parent = parentId
    ? await graph.getState({ configurable: { thread_id: threadId, checkpoint_ns: '', checkpoint_id: parentId } })
    : undefined;
  return toApiState(snapshot, parent);
}

/** Interrupts by task id, as thread records carry them. */
export function interruptsOf(snapshot: StateSnapshotLike): Record<string, unknown[]> {
  const out: Record<string, unknown[]> = {};
  for (const t of snapshot.tasks) {
    const list = (t.interrupts as unknown[] | undefined) ?? [];
    if (list.length) out[String(t.id)] = toPlain(list);
  }
  return out;
}

// Thread state as the API shows it: the graph's StateSnapshot turned into plain JSON with the seed's fields
// (checkpoint_id, parent_checkpoint_id, metadata.writes) and the SDK's (checkpoint, parent_checkpoint objects).
import { randomUUID } from 'node:crypto';
import type { PregelLike, StateSnapshotLike } from '../graphs/index.ts';
import { toJsonReady, toPlain } from '../serde.ts';
import { READ_AHEAD_KEY } from '../storage/types.ts';

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

/**
 * A checkpoint a request names (POST /threads/{id}/state/checkpoint, /state, /history): its namespace ('' or
 * absent for the root graph, `node:task_id` segments joined by `|` for a subgraph's), optionally which
 * checkpoint, and the subgraph's checkpoint_map. A thread_id in it is ignored: the path names the thread.
 */
export interface CheckpointSelector {
  checkpoint_id?: string | null;
  checkpoint_ns?: string | null;
  checkpoint_map?: Record<string, unknown> | null;
}

const MAX_CHECKPOINT_NS_LENGTH = 1000;

/** Why a checkpoint_ns is malformed (loosely: bounded, and every `|` segment names a node), or null. */
export function checkpointNsProblem(ns: string): string | null {
  if (ns.length > MAX_CHECKPOINT_NS_LENGTH) {
    return `checkpoint_ns is too long (${ns.length} characters, at most ${MAX_CHECKPOINT_NS_LENGTH})`;
  }
  const shown = ns.length > 200 ? `${ns.slice(0, 200)}...` : ns;
  for (const segment of ns.split('|')) {
    if (/^\d+$/.test(segment)) continue;
    if (!segment.split(':')[0]!.trim()) {
      return `checkpoint_ns "${shown}" is malformed: it is "node:task_id" segments joined by "|", each naming a node`;
    }
  }
  return null;
}

/** A namespace without its task ids, as LangGraph names subgraphs: "a:1|b:2" -> "a|b". */
export function subgraphPath(ns: string): string {
  return ns
    .split('|')
    .filter((part) => !/^\d+$/.test(part))
    .map((part) => part.split(':')[0])
    .join('|');
}

/**
 * The configurable that addresses a named checkpoint of a thread. The root graph's ('' namespace) is exactly
 * what it always was; a subgraph's namespace brings its checkpoint_map, and LangGraph's state methods delegate
 * to the subgraph. The thread is always the one given (the path's), never one the selector names.
 */
export function checkpointConfigurable(threadId: string, sel?: CheckpointSelector | null): Record<string, unknown> {
  const ns = sel?.checkpoint_ns ?? '';
  const configurable: Record<string, unknown> = { thread_id: threadId, checkpoint_ns: ns };
  if (sel?.checkpoint_id) configurable.checkpoint_id = sel.checkpoint_id;
  if (ns && sel?.checkpoint_map && typeof sel.checkpoint_map === 'object' && !Array.isArray(sel.checkpoint_map)) {
    configurable.checkpoint_map = sel.checkpoint_map;
  }
  return configurable;
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

/**
 * A subgraph task's config: its thread and namespace, and its checkpoint id and map only when the config has them.
 * A task that has not run yet names no checkpoint: `{thread_id, checkpoint_ns}`, as the platform and the reference
 * servers show it (clients pass it back whole to read or update that subgraph's state).
 */
function taskCheckpointOf(config: Config | undefined): Partial<ApiCheckpoint> | null {
  const c = config?.configurable;
  if (!c || typeof c.checkpoint_ns !== 'string' || !c.checkpoint_ns) return checkpointOf(config);
  return {
    thread_id: String(c.thread_id ?? ''),
    checkpoint_ns: c.checkpoint_ns,
    ...(c.checkpoint_id ? { checkpoint_id: String(c.checkpoint_id) } : {}),
    ...(c.checkpoint_map ? { checkpoint_map: c.checkpoint_map as Record<string, unknown> } : {}),
  };
}

function isSnapshot(v: unknown): v is StateSnapshotLike {
  if (typeof v !== 'object' || v === null) return false;
  const s = v as Record<string, unknown>;
  return 'values' in s && Array.isArray(s.next) && Array.isArray(s.tasks) && typeof s.config === 'object';
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
  const tasks = snapshot.tasks.map((t) => {
    // A subgraph task's state: its config (thread and namespace) by default, its whole snapshot with
    // `subgraphs`; as the reference servers show them, the config as `checkpoint`, the snapshot as `state`.
    const sub = isSnapshot(t.state) ? t.state : null;
    return {
      id: t.id,
      name: t.name,
      path: t.path ?? null,
      error: t.error ? (t.error instanceof Error ? t.error.message : String(t.error)) : null,
      interrupts: t.interrupts ?? [],
      checkpoint: sub ? null : taskCheckpointOf(t.state as Config | undefined),
      state: sub ? toApiState(sub) : null,
      result: t.result ?? null,
    };
  });
  const metadata = snapshot.metadata ? { ...snapshot.metadata, writes: writesFrom(parent) } : null;
  // Read-only, JSON-ready: a reply serialises it once (no copy through text first).
  return toJsonReady<ApiThreadState>({
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

/**
 * Latest (or a given) checkpoint of a thread, with writes taken from its parent. A checkpoint id alone names a
 * root graph checkpoint; a selector with a checkpoint_ns reads the subgraph's checkpoint in that namespace.
 */
export async function readThreadState(
  graph: PregelLike,
  threadId: string,
  checkpoint?: string | CheckpointSelector,
  opts: { subgraphs?: boolean; readAhead?: string } = {},
): Promise<ApiThreadState> {
  const sel = typeof checkpoint === 'string' ? { checkpoint_id: checkpoint } : checkpoint;
  const configurable = checkpointConfigurable(threadId, sel);
  const latestRoot = !sel?.checkpoint_id && !configurable.checkpoint_ns;
  // The caller read the latest root checkpoint and its parent ahead already (ThreadStore.getReadingAhead).
  if (latestRoot && opts.readAhead) {
    return stateOf(graph, threadId, sel, { ...configurable, [READ_AHEAD_KEY]: opts.readAhead }, opts);
  }
  // The latest root state needs the latest checkpoint and its parent: one read for both where the saver can.
  const saver = (graph as { checkpointer?: { readAhead?: ReadAhead } }).checkpointer;
  if (latestRoot && typeof saver?.readAhead === 'function') {
    const token = randomUUID();
    const release = await saver.readAhead(threadId, token);
    try {
      return await stateOf(graph, threadId, sel, { ...configurable, [READ_AHEAD_KEY]: token }, opts);
    } finally {
      release();
    }
  }
  return stateOf(graph, threadId, sel, configurable, opts);
}

type ReadAhead = (threadId: string, token: string) => Promise<() => void>;

async function stateOf(
  graph: PregelLike,
  threadId: string,
  sel: CheckpointSelector | null | undefined,
  configurable: Record<string, unknown>,
  opts: { subgraphs?: boolean },
): Promise<ApiThreadState> {
  const snapshot = await graph.getState({ configurable }, opts);
  if (!snapshot.config?.configurable || !(snapshot.config.configurable as Record<string, unknown>).checkpoint_id) {
    return { ...EMPTY_STATE };
  }
  // A namespace nothing was saved in comes back as an empty snapshot echoing the config it was asked with.
  if (configurable.checkpoint_ns && !snapshot.createdAt && !snapshot.metadata) return { ...EMPTY_STATE };
  const parentConf = (snapshot.parentConfig as Config | undefined)?.configurable;
  const parentId = parentConf?.checkpoint_id;
  const parent = parentId
    ? await graph.getState({
        configurable: {
          ...checkpointConfigurable(threadId, { ...sel, checkpoint_ns: String(parentConf.checkpoint_ns ?? '') }),
          ...(configurable[READ_AHEAD_KEY] ? { [READ_AHEAD_KEY]: configurable[READ_AHEAD_KEY] } : {}),
          checkpoint_id: parentId,
        },
      })
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

/** LangGraph's interrupt ids (xxh3-128, hex): a resume whose keys all are such ids answers those interrupts. */
const INTERRUPT_ID = /^[0-9a-f]{32}$/;

/** The interrupt ids a command's resume answers by id (LangGraph's resume map), or null for a plain value. */
export function namedInterruptIds(resume: unknown): string[] | null {
  const keys = resume && typeof resume === 'object' && !Array.isArray(resume) ? Object.keys(resume) : [];
  return keys.length && keys.every((k) => INTERRUPT_ID.test(k)) ? keys : null;
}

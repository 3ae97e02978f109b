// Domain operations behind the routes: assistant resolution, run creation (kwargs exactly as the platform
// records them), thread state reads and updates. Throws typed errors; knows nothing about HTTP.
import { randomUUID } from 'node:crypto';
import { BadRequestError, NotFoundError } from '../lib/errors.ts';
import type { GraphRegistry, PregelLike, StateSnapshotLike } from './graphs/index.ts';
import { systemAssistantId } from './graphs/index.ts';
import type { RunEngine } from './runs/engine.ts';
import { EMPTY_STATE, interruptsOf, readThreadState, toApiState, type ApiThreadState } from './runs/state.ts';
import type { RunCreateBody } from './routes/schemas.ts';
import { toPlain } from './serde.ts';
import type { Assistant, Json, RunRecord, Storage, Thread } from './storage/types.ts';

const UUID_RE = /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/i;

export interface ServiceDeps {
  storage: Storage;
  graphs: GraphRegistry;
  engine: RunEngine;
}

export type AgentService = ReturnType<typeof createAgentService>;

export function createAgentService({ storage, graphs, engine }: ServiceDeps) {
  const graphIds = new Set(graphs.specs.map((s) => s.graphId));

  /** A graph name maps to its system assistant; anything else must be an assistant UUID. */
  async function resolveAssistant(idOrGraph: string): Promise<Assistant> {
    const id = graphIds.has(idOrGraph) ? systemAssistantId(idOrGraph) : idOrGraph;
    const found = UUID_RE.test(id) ? await storage.assistants.get(id) : null;
    if (!found) throw new NotFoundError(`Assistant "${idOrGraph}" not found`);
    return found;
  }

  async function requireThread(threadId: string): Promise<Thread> {
    const t = await storage.threads.get(threadId);
    if (!t) throw new NotFoundError(`Thread with ID ${threadId} not found`);
    return t;
  }

  function graphFor(graphId: string, config: Json = {}): Promise<PregelLike> {
    if (!graphIds.has(graphId)) throw new NotFoundError(`Graph "${graphId}" not found`);
    return graphs.getGraph(graphId, config, { checkpointer: engine.checkpointer });
  }

  async function createRun(threadId: string | null, body: RunCreateBody): Promise<RunRecord> {
    const assistant = await resolveAssistant(body.assistant_id);
    const stateless = threadId === null;
    const thread_id = threadId ?? randomUUID();
    const run_id = randomUUID();
    const cfg = (body.config ?? {}) as Json;
    const assistantCfg = (assistant.config ?? {}) as Json;
    const checkpointId = body.checkpoint_id ?? body.checkpoint?.checkpoint_id ?? null;
    const configurable = {
      ...((assistantCfg.configurable as Json | undefined) ?? {}),
      ...((cfg.configurable as Json | undefined) ?? {}),
      run_id,
      user_id: '',
      graph_id: assistant.graph_id,
      thread_id,
      assistant_id: assistant.assistant_id,
      checkpoint_id: checkpointId,
    };
    const streamMode = body.stream_mode ?? ['values'];
    const kwargs: Json = {
      input: body.input ?? null,
      command: body.command ?? null,
      config: {
        ...assistantCfg,
        ...cfg,
        metadata: { ...((cfg.metadata as Json | undefined) ?? {}), created_by: 'system' },
        configurable,
      },
      context: body.context ?? (Object.keys(assistant.context).length ? assistant.context : null),
      webhook: body.webhook ?? null,
      temporary: stateless && body.on_completion !== 'keep',
      stream_mode: Array.isArray(streamMode) ? streamMode : [streamMode],
      feedback_keys: body.feedback_keys ?? null,
      interrupt_after: body.interrupt_after ?? null,
      interrupt_before: body.interrupt_before ?? null,
      subgraphs: body.stream_subgraphs ?? false,
      resumable: body.stream_resumable ?? false,
      on_disconnect: body.on_disconnect ?? 'continue',
      durability: body.durability ?? null,
    };
    const delay_ms = body.after_seconds ? Math.round(body.after_seconds * 1000) : 0;
    const created = await storage.runs.create({
      delay_ms,
      run_id,
      thread_id,
      assistant_id: assistant.assistant_id,
      metadata: body.metadata ?? {},
      kwargs,
      multitask_strategy: body.multitask_strategy ?? 'reject',
      if_not_exists: stateless ? 'create' : (body.if_not_exists ?? 'reject'),
      thread_metadata: { graph_id: assistant.graph_id, assistant_id: assistant.assistant_id },
    });
    if (delay_ms) engine.wakeAfter(delay_ms);
    return created;
  }

  /** join/wait answer: the thread's values, or {__error__} for a failed run. */
  async function runResult(threadId: string, run: RunRecord | null): Promise<unknown> {
    if (run && (run.status === 'error' || run.status === 'timeout')) {
      return { __error__: run.error ?? { error: 'Error', message: `Run ended with status ${run.status}` } };
    }
    const thread = await storage.threads.get(threadId);
    return thread?.values ?? {};
  }

  async function threadGraph(threadId: string): Promise<PregelLike | null> {
    const thread = await requireThread(threadId);
    const graphId = thread.metadata.graph_id;
    if (typeof graphId !== 'string' || !graphIds.has(graphId)) return null;
    return graphFor(graphId);
  }

  async function getState(threadId: string, checkpointId?: string, subgraphs = false): Promise<ApiThreadState> {
    const graph = await threadGraph(threadId);
    if (!graph) return { ...EMPTY_STATE };
    const state = await readThreadState(graph, threadId, checkpointId, { subgraphs });
    if (checkpointId && !state.checkpoint_id) throw new NotFoundError(`Checkpoint ${checkpointId} not found`);
    return state;
  }

  async function updateState(
    threadId: string,
    body: { values?: unknown; checkpoint_id?: string | null; checkpoint?: { checkpoint_id?: string | null } | null; as_node?: string | null },
  ) {
    const thread = await requireThread(threadId);
    const graphId = thread.metadata.graph_id;
    if (typeof graphId !== 'string' || !graphIds.has(graphId)) {
      throw new BadRequestError(`Thread ${threadId} has no graph yet: run an assistant on it before updating its state`);
    }
    const graph = await graphFor(graphId);
    const configurable: Json = { thread_id: threadId, checkpoint_ns: '' };
    const cp = body.checkpoint_id ?? body.checkpoint?.checkpoint_id;
    if (cp) configurable.checkpoint_id = cp;
    const metadata = { graph_id: graphId, assistant_id: thread.metadata.assistant_id, thread_id: threadId };
    let next: Json;
    try {
      next = await graph.updateState({ configurable, metadata }, body.values ?? null, body.as_node ?? undefined);
    } catch (err) {
      // Graph-level refusals (unknown node, ambiguous update) are the caller's input problem.
      throw new BadRequestError(`State update rejected: ${(err as Error).message}`);
    }
    const snapshot = await graph.getState({ configurable: { thread_id: threadId, checkpoint_ns: '' } });
    await storage.threads.setState(threadId, toPlain<Json>(snapshot.values ?? {}), snapshot.next.length > 0,
      interruptsOf(snapshot));
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
    q: { limit: number; before?: string | null; metadata?: Json | null; checkpoint_id?: string | null },
  ): Promise<ApiThreadState[]> {
    const graph = await threadGraph(threadId);
    if (!graph) return [];
    const configurable: Json = { thread_id: threadId, checkpoint_ns: '' };
    if (q.checkpoint_id) configurable.checkpoint_id = q.checkpoint_id;
    const opts: Json = { limit: q.limit + 1 };
    if (q.before) opts.before = { configurable: { thread_id: threadId, checkpoint_ns: '', checkpoint_id: q.before } };
    if (q.metadata && Object.keys(q.metadata).length) opts.filter = q.metadata;
    const snaps: StateSnapshotLike[] = [];
    for await (const s of graph.getStateHistory({ configurable }, opts)) snaps.push(s);
    // One extra snapshot fetched so the last one shown still gets its writes from its parent.
    return snaps.slice(0, q.limit).map((s, i) => toApiState(s, snaps[i + 1]));
  }

  return { resolveAssistant, requireThread, createRun, runResult, getState, updateState, history, graphIds };
}

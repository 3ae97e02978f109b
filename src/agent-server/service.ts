// Domain operations behind the routes: assistant resolution, run creation (kwargs exactly as the platform
// records them), thread state reads and updates. Throws typed errors; knows nothing about HTTP.
import { randomUUID } from 'node:crypto';
import type { IncomingHttpHeaders } from 'node:http';
import { BadRequestError, ConflictError, NotFoundError, ValidationError } from '../lib/errors.ts';
import { equalityPart, matchesFilters, type AuthFilters, type RequestAuth } from './auth/custom.ts';
import type { GraphRegistry, PregelLike, StateSnapshotLike } from './graphs/index.ts';
import { configurableHeaderPicker, type ConfigurableHeadersConfig } from './http/configurable-headers.ts';
import { systemAssistantId } from './graphs/index.ts';
import type { RunEngine } from './runs/engine.ts';
import { webhookUrlProblem, type WebhookPolicy } from './runs/webhooks.ts';
import {
  EMPTY_STATE,
  checkpointConfigurable,
  checkpointNsProblem,
  interruptsOf,
  readThreadState,
  subgraphPath,
  toApiState,
  type ApiThreadState,
  type CheckpointSelector,
} from './runs/state.ts';
import type { RunCreateBody } from './routes/schemas.ts';
import { toPlain } from './serde.ts';
import { publishStateUpdate } from './streams/thread-events.ts';
import {
  TERMINAL_RUN_STATUSES,
  type Assistant,
  type AssistantVersion,
  type Json,
  type NewRun,
  type RunRecord,
  type Storage,
  type Thread,
} from './storage/types.ts';

const threadNotFound = (threadId: string) => `Thread not found: ${threadId}`;

function ignoreNotFound(err: unknown): void {
  if (!(err instanceof NotFoundError)) throw err;
}

const UUID_RE = /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/i;

/** Keys of `config.configurable` only the server sets (from custom auth); a client's values are dropped. */
const RESERVED_CONFIGURABLE = ['langgraph_auth_user', 'langgraph_auth_user_id', 'langgraph_auth_permissions'] as const;

/** The caller of a run under custom auth: who they are and what the threads:create_run handler decided. */
export interface RunAuth {
  auth: RequestAuth | null;
  filters?: AuthFilters;
  /** The id the handler was shown for the run. */
  runId?: string;
  /** The request's headers: the ones langgraph.json's http.configurable_headers lets through go into configurable. */
  headers?: IncomingHttpHeaders;
  /** The caller's assistants:read filter for an assistant id: a run may use only an assistant its caller can read. */
  assistantFilter?: AssistantReadFilter;
}

/**
 * Runs the assistants:read handler for an assistant id (its filter; a denial throws). An assistant the filter hides
 * is answered exactly like one that does not exist.
 */
export type AssistantReadFilter = (assistantId: string) => Promise<AuthFilters | undefined>;

/**
 * Assistant versions: every create and PATCH records one; `setLatest` makes an earlier one current again. The stores
 * keep them (written in the same transaction as create/patch).
 */
export interface AssistantVersions {
  /** Newest first; metadata filters by containment. NotFoundError when the assistant is unknown. */
  list(assistantId: string, q: { limit: number; offset: number; metadata?: Json }): Promise<AssistantVersion[]>;
  /** Copies the version's fields onto the assistant (its `version` becomes that number) and returns it. */
  setLatest(assistantId: string, version: number): Promise<Assistant>;
}

export interface ServiceDeps {
  storage: Storage;
  graphs: GraphRegistry;
  engine: RunEngine;
  versions?: AssistantVersions;
  /** Where run webhooks may point (--webhook-allow, langgraph.json webhooks.url); default: public hosts only. */
  webhookPolicy?: WebhookPolicy;
  /** langgraph.json http.configurable_headers (absent: every x-* header and user-agent, as on the platform). */
  configurableHeaders?: ConfigurableHeadersConfig | null;
}

/** The versions the store keeps. */
export function storedVersions(storage: Storage): AssistantVersions {
  // The platform's texts, which clients match on.
  const requireAssistant = async (id: string) => {
    if (!(await storage.assistants.get(id))) throw new NotFoundError(`Assistant not found: ${id}`);
  };
  return {
    async list(assistantId, q) {
      await requireAssistant(assistantId);
      return storage.assistants.listVersions(assistantId, q);
    },
    async setLatest(assistantId, version) {
      await requireAssistant(assistantId);
      try {
        return await storage.assistants.setLatest(assistantId, version);
      } catch (err) {
        if (err instanceof NotFoundError)
          throw new NotFoundError(`Assistant version not found: ${assistantId} version ${version}`);
        throw err;
      }
    },
  };
}

export type AgentService = ReturnType<typeof createAgentService>;

export function createAgentService({
  storage,
  graphs,
  engine,
  versions = storedVersions(storage),
  webhookPolicy = { allow: [] },
  configurableHeaders,
}: ServiceDeps) {
  const pickHeaders = configurableHeaderPicker(configurableHeaders);
  const graphIds = new Set(graphs.specs.map((s) => s.graphId));

  /** A webhook URL the policy refuses outright → 422 naming the field (addresses are checked at delivery). */
  function checkWebhook(url: string | null | undefined): void {
    if (!url) return;
    const problem = webhookUrlProblem(url, webhookPolicy);
    if (problem) throw new ValidationError(`webhook: ${problem}`);
  }

  /**
   * A graph name maps to its system assistant; anything else must be an assistant UUID. The 404 texts are the
   * platform's ("Assistant not found", "No assistant found for graph ..."): clients match on them. With
   * `readFilter` (custom auth), the caller's assistants:read handler runs before the read, and an assistant its
   * filter hides is the same 404 as a missing one.
   */
  async function resolveAssistant(idOrGraph: string, readFilter?: AssistantReadFilter): Promise<Assistant> {
    const id = graphIds.has(idOrGraph) ? systemAssistantId(idOrGraph) : idOrGraph;
    if (!UUID_RE.test(id)) throw new NotFoundError(`No assistant found for graph ${idOrGraph} (assistant not found)`);
    const filters = readFilter ? await readFilter(id) : undefined;
    const found = await storage.assistants.get(id);
    if (!found || !matchesFilters(found.metadata, filters))
      throw new NotFoundError(`Assistant not found: ${idOrGraph}`);
    return found;
  }

  async function requireThread(threadId: string): Promise<Thread> {
    const t = await storage.threads.get(threadId);
    if (!t) throw new NotFoundError(threadNotFound(threadId));
    return t;
  }

  /** A store call on one thread whose only NotFoundError is that thread missing: answered with the platform text. */
  async function onThread<T>(threadId: string, op: () => Promise<T>): Promise<T> {
    try {
      return await op();
    } catch (err) {
      if (err instanceof NotFoundError) throw new NotFoundError(threadNotFound(threadId));
      throw err;
    }
  }

  function graphFor(graphId: string, config: Json = {}): Promise<PregelLike> {
    if (!graphIds.has(graphId)) throw new NotFoundError(`Graph "${graphId}" not found`);
    return graphs.getGraph(graphId, config, { checkpointer: engine.checkpointer });
  }

  /**
   * The config a thread's graph is built with when it is read or updated outside a run: that of the thread's
   * latest run (the assistant's config merged with the run's), else that of the assistant named in its metadata.
   * Factory graphs (`(config) => graph`) may have nodes that exist only under that config.
   */
  async function threadConfig(thread: Thread): Promise<Json> {
    const [latest] = await storage.runs.list(thread.thread_id, { limit: 1, offset: 0 });
    const cfg = latest?.kwargs.config as Json | undefined;
    if (cfg) {
      const { checkpoint_id: _c, run_id: _r, ...configurable } = (cfg.configurable as Json | undefined) ?? {};
      return { ...cfg, configurable };
    }
    const assistantId = thread.metadata.assistant_id;
    const assistant =
      typeof assistantId === 'string' && UUID_RE.test(assistantId) ? await storage.assistants.get(assistantId) : null;
    return {
      ...(assistant?.config ?? {}),
      configurable: { ...((assistant?.config.configurable as Json | undefined) ?? {}) },
    };
  }

  /** `protocol`: started over the thread protocol (its events are stored in the protocol-native form). */
  async function createRun(
    threadId: string | null,
    body: RunCreateBody,
    caller?: RunAuth,
    opts?: { protocol?: boolean },
  ): Promise<RunRecord> {
    const run = await buildRun(threadId, body, caller);
    if (opts?.protocol) run.kwargs.protocol = true;
    const created = await onThread(run.thread_id, () => storage.runs.create(run));
    if (run.delay_ms) engine.wakeAfter(run.delay_ms);
    return created;
  }

  /**
   * The run a create request asks for, as the store takes it (kwargs exactly as the platform records them);
   * `threadId` null: a stateless run on a new thread (`newThreadId`, else a random one).
   */
  async function buildRun(
    threadId: string | null,
    body: RunCreateBody,
    caller?: RunAuth,
    newThreadId?: string,
  ): Promise<NewRun> {
    checkWebhook(body.webhook);
    const assistant = await resolveAssistant(body.assistant_id, caller?.assistantFilter);
    const stateless = threadId === null;
    const thread_id = threadId ?? newThreadId ?? randomUUID();
    const run_id = caller?.runId ?? randomUUID();
    const cfg = (body.config ?? {}) as Json;
    const assistantCfg = (assistant.config ?? {}) as Json;
    const checkpointId = body.checkpoint_id ?? body.checkpoint?.checkpoint_id ?? null;
    const requested: Json = {
      ...((assistantCfg.configurable as Json | undefined) ?? {}),
      ...((cfg.configurable as Json | undefined) ?? {}),
      // The platform lets the request's headers override the body's configurable keys of the same name.
      ...(caller?.headers ? pickHeaders(caller.headers) : {}),
    };
    for (const key of RESERVED_CONFIGURABLE) delete requested[key];
    const user = caller?.auth;
    const configurable = {
      ...requested,
      ...(user
        ? {
            langgraph_auth_user: user.user,
            langgraph_auth_user_id: user.user.identity,
            langgraph_auth_permissions: user.permissions,
          }
        : {}),
      run_id,
      // Under custom auth the caller's identity, whatever the client sent; without it the caller's own user_id
      // passes through, as on the platform ('' when none is given).
      user_id: user ? user.user.identity : (requested.user_id ?? ''),
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
      // checkpoint_during is durability's older name (the SDK still sends it): false keeps only the final checkpoint.
      durability:
        body.durability ?? (body.checkpoint_during == null ? null : body.checkpoint_during ? 'async' : 'exit'),
    };
    const delay_ms = body.after_seconds ? Math.round(body.after_seconds * 1000) : 0;
    return {
      delay_ms,
      run_id,
      thread_id,
      assistant_id: assistant.assistant_id,
      metadata: body.metadata ?? {},
      kwargs,
      multitask_strategy: body.multitask_strategy ?? 'reject',
      if_not_exists: stateless ? 'create' : (body.if_not_exists ?? 'reject'),
      // A thread this run creates carries the handler's equality filter (e.g. its owner), so its creator sees it.
      thread_metadata: {
        ...equalityPart(caller?.filters),
        graph_id: assistant.graph_id,
        assistant_id: assistant.assistant_id,
      },
    };
  }

  /**
   * on_completion "delete" (the default of stateless runs): the temporary thread goes once the run has ended.
   * Wait and stream requests delete it themselves; a background run is watched by this process.
   */
  function deleteThreadWhenDone(run: RunRecord): void {
    if (!run.kwargs.temporary) return;
    void engine
      .waitForRun(run.thread_id, run.run_id, undefined, run)
      .then((done) =>
        done && TERMINAL_RUN_STATUSES.has(done.status) ? storage.threads.delete(run.thread_id) : undefined,
      )
      .catch(() => undefined);
  }

  /**
   * POST /runs/batch: stateless background runs, created in order (one bad item stops the rest). `callers[i]` is
   * what custom auth decided for item i.
   */
  async function createBatch(bodies: RunCreateBody[], callers: Array<RunAuth | undefined> = []): Promise<RunRecord[]> {
    const out: RunRecord[] = [];
    for (const [i, body] of bodies.entries()) {
      const run = await createRun(null, body, callers[i]);
      deleteThreadWhenDone(run);
      out.push(run);
    }
    return out;
  }

  /**
   * DELETE /assistants/{id}; with deleteThreads also the threads whose metadata.assistant_id names it. Under custom
   * auth `threadFilter` gives the caller's threads:delete filter (a denial throws before anything is deleted): only
   * the threads it lets the caller delete go, never another user's that ran the same assistant.
   */
  async function deleteAssistant(
    idOrGraph: string,
    deleteThreads: boolean,
    threadFilter?: () => Promise<AuthFilters | undefined>,
  ): Promise<void> {
    const assistant = await resolveAssistant(idOrGraph);
    if (deleteThreads) {
      const filters = threadFilter ? await threadFilter() : undefined;
      const metadata = { ...equalityPart(filters), assistant_id: assistant.assistant_id };
      const page = 500;
      let skipped = 0;
      for (;;) {
        const threads = await storage.threads.search({ metadata, limit: page, offset: skipped });
        for (const t of threads) {
          if (matchesFilters(t.metadata, filters)) await storage.threads.delete(t.thread_id).catch(ignoreNotFound);
          else skipped += 1;
        }
        if (threads.length < page) break;
      }
    }
    await storage.assistants.delete(assistant.assistant_id);
  }

  /** join/wait answer: the thread's values, or {__error__} for a failed run. */
  async function runResult(threadId: string, run: RunRecord | null): Promise<unknown> {
    if (run && (run.status === 'error' || run.status === 'timeout')) {
      return { __error__: run.error ?? { error: 'Error', message: `Run ended with status ${run.status}` } };
    }
    const thread = await storage.threads.get(threadId);
    return thread?.values ?? {};
  }

  /**
   * The graph that reads or updates a thread's state. Only a factory's graph depends on the config, so only then
   * is the thread's config looked up (a read of its latest run): a compiled graph is the same under any config.
   */
  async function graphForThread(graphId: string, thread: Thread): Promise<PregelLike> {
    return graphFor(graphId, graphs.isFactory(graphId) ? await threadConfig(thread) : {});
  }

  async function threadGraph(threadId: string): Promise<PregelLike | null> {
    const thread = await requireThread(threadId);
    const graphId = thread.metadata.graph_id;
    if (typeof graphId !== 'string' || !graphIds.has(graphId)) return null;
    return graphForThread(graphId, thread);
  }

  /** The namespace a request's checkpoint names ('' for the root graph), refused with 400 when malformed. */
  function namespaceOf(sel: CheckpointSelector | null | undefined): string {
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
  async function namespaceNotFound(graph: PregelLike | null, threadId: string, ns: string): Promise<NotFoundError> {
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
  async function subgraphCheckpointNotFound(
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
  function isSubgraphNotFound(err: unknown): boolean {
    return err instanceof Error && /subgraph\b.*\bnot found/i.test(err.message);
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

  /** A thread's state may be written only with no run in flight on it (a run writes checkpoints of its own). */
  function assertNotBusy(thread: Thread): void {
    if (thread.status === 'busy') {
      throw new ConflictError(
        `Thread ${thread.thread_id} is busy: a run is in flight; wait for it to finish before updating the state`,
      );
    }
  }

  /** The thread, when its state may be written now (assertNotBusy). */
  async function writableThread(threadId: string): Promise<Thread> {
    const thread = await requireThread(threadId);
    assertNotBusy(thread);
    return thread;
  }

  /** A writable thread (writableThread) and its graph, which it must have from a run (400 before its first). */
  async function writableThreadGraph(
    threadId: string,
  ): Promise<{ thread: Thread; graphId: string; graph: PregelLike }> {
    const thread = await requireThread(threadId);
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
    resolveAssistant,
    requireThread,
    onThread,
    threadConfig,
    createRun,
    buildRun,
    checkWebhook,
    createBatch,
    deleteThreadWhenDone,
    deleteAssistant,
    runResult,
    getState,
    updateState,
    writableThread,
    writableThreadGraph,
    recordStateWrite,
    namespaceOf,
    history,
    versions,
    graphIds,
  };
}

// Runs: creation (kwargs exactly as the platform records them), stateless batches and their temporary threads,
// what join and wait answer, and the run store's reads and cancels.
import { randomUUID } from 'node:crypto';
import { NotFoundError, StaleAssistantError, ValidationError } from '../../lib/errors.ts';
import { equalityPart } from '../auth/custom.ts';
import { configurableHeaderPicker } from './configurable-headers.ts';
import { webhookUrlProblem } from '../runs/webhook-policy.ts';
import type { RunCreateBody } from '../schemas/runs.ts';
import {
  TERMINAL_RUN_STATUSES,
  type CancelAction,
  type Json,
  type NewRun,
  type RunRecord,
  type RunStatus,
} from '../storage/types.ts';
import type { AssistantService } from './assistants.ts';
import { threadNotFound, type RunAuth, type ServiceDeps } from './context.ts';
import type { ThreadService } from './threads.ts';

/** Keys of `config.configurable` only the server sets (from custom auth); a client's values are dropped. */
const RESERVED_CONFIGURABLE = ['langgraph_auth_user', 'langgraph_auth_user_id', 'langgraph_auth_permissions'] as const;

export type RunService = ReturnType<typeof createRunService>;

export function createRunService({
  storage,
  engine,
  webhookPolicy = { allow: [] },
  configurableHeaders,
  assistants,
  threads,
}: Omit<ServiceDeps, 'graphs'> & { assistants: AssistantService; threads: ThreadService }) {
  const pickHeaders = configurableHeaderPicker(configurableHeaders);

  /** A webhook URL the policy refuses outright → 422 naming the field (addresses are checked at delivery). */
  function checkWebhook(url: string | null | undefined): void {
    if (!url) return;
    const problem = webhookUrlProblem(url, webhookPolicy);
    if (problem) throw new ValidationError(`webhook: ${problem}`);
  }

  /** `protocol`: started over the thread protocol (its events are stored in the protocol-native form). */
  async function createRun(
    threadId: string | null,
    body: RunCreateBody,
    caller?: RunAuth,
    opts?: { protocol?: boolean },
  ): Promise<RunRecord> {
    // The assistant as last read for a run here, checked by the create itself; changed since: read it again and
    // build the run anew; changed once more in between: built and stored without the check, as every run once was.
    // The create's only NotFoundError is the thread missing: answered with the platform's text.
    let run: NewRun;
    let created: RunRecord;
    for (let attempt = 1; ; attempt++) {
      run = await buildRun(
        threadId,
        body,
        caller,
        undefined,
        attempt === 1 ? 'cached' : attempt === 2 ? 'fresh' : undefined,
      );
      if (opts?.protocol) run.kwargs.protocol = true;
      try {
        created = await engine.createRun(run);
        break;
      } catch (err) {
        if (err instanceof NotFoundError) throw new NotFoundError(threadNotFound(run.thread_id));
        if (!(err instanceof StaleAssistantError) || attempt >= 3) throw err;
      }
    }
    // Answered as created (pending), as the platform answers every create, also when this process claimed it in
    // the same write: it runs already, and a read of it says so.
    return created.status === 'running' ? { ...created, status: 'pending', attempt: 0, worker_id: null } : created;
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
    /** Set: the assistant comes with the token the create checks ('cached': as last read for a run). */
    assistantRead?: 'cached' | 'fresh',
  ): Promise<NewRun> {
    checkWebhook(body.webhook);
    const { assistant, token } = assistantRead
      ? await assistants.resolveForRun(body.assistant_id, caller?.assistantFilter, assistantRead === 'fresh')
      : { assistant: await assistants.resolve(body.assistant_id, caller?.assistantFilter), token: undefined };
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
        // The run's metadata goes into its checkpoints' metadata too, as on the platform: the history of a thread
        // can then be filtered by it (getHistory({metadata})).
        metadata: { ...((cfg.metadata as Json | undefined) ?? {}), ...(body.metadata ?? {}), created_by: 'system' },
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
      ...(body.strict_resume ? { strict_resume: true } : {}),
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
      ...(token !== undefined ? { assistant_token: token } : {}),
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
   * What join and wait answer: the thread's values after the run, or its error. `valuesJson`: the values the run
   * stored on its thread as it finished (RunEngine.finalValues), when this process finished it: no read then.
   */
  async function runResult(
    threadId: string,
    run: RunRecord | null,
    valuesJson?: string,
    threadValues?: Json | null,
  ): Promise<unknown> {
    if (run && (run.status === 'error' || run.status === 'timeout')) {
      return { __error__: run.error ?? { error: 'Error', message: `Run ended with status ${run.status}` } };
    }
    if (valuesJson !== undefined) return JSON.parse(valuesJson) as unknown;
    if (threadValues !== undefined) return threadValues ?? {};
    const thread = await threads.get(threadId);
    return thread?.values ?? {};
  }

  async function requireRun(threadId: string, runId: string): Promise<RunRecord> {
    const run = await storage.runs.get(threadId, runId);
    if (!run) throw new NotFoundError(`Run ${runId} not found on thread ${threadId}`);
    return run;
  }

  /**
   * requireRun, with the thread's values read in the same statement once the run has ended (`values`: what
   * runResult takes as `threadValues`): a join of an ended run is one read.
   */
  async function requireRunWithValues(
    threadId: string,
    runId: string,
  ): Promise<{ run: RunRecord; values?: Json | null }> {
    const got = await storage.runs.getWithValues(threadId, runId);
    if (!got) throw new NotFoundError(`Run ${runId} not found on thread ${threadId}`);
    return got;
  }

  return {
    create: createRun,
    build: buildRun,
    checkWebhook,
    createBatch,
    deleteThreadWhenDone,
    result: runResult,
    require: requireRun,
    requireWithValues: requireRunWithValues,
    get: (threadId: string, runId: string): Promise<RunRecord | null> => storage.runs.get(threadId, runId),
    getById: (runId: string): Promise<RunRecord | null> => storage.runs.getById(runId),
    list: (threadId: string, q: { limit: number; offset: number; status?: RunStatus }): Promise<RunRecord[]> =>
      storage.runs.list(threadId, q),
    listByStatus: (statuses: Array<'pending' | 'running'>): Promise<RunRecord[]> => storage.runs.listByStatus(statuses),
    delete: (threadId: string, runId: string): Promise<void> => storage.runs.delete(threadId, runId),
    cancel: (threadId: string, runId: string, action: CancelAction, reason?: string | null): Promise<RunRecord> =>
      storage.runs.cancel(threadId, runId, action, reason),
    cancelMany: (threadId: string, runIds: string[], action: CancelAction): Promise<RunRecord[]> =>
      storage.runs.cancelMany(threadId, runIds, action),
  };
}

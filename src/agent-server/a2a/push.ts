// A2A push notifications: a client names a URL (with a token, and credentials for the receiver's Authorization
// header) where a task's changes are POSTed, so it need not hold a stream open. A config is set with the send
// (0.3 configuration.pushNotificationConfig, 1.0 configuration.taskPushNotificationConfig: kept in the run's
// metadata, so it is there before the run starts) or later by the config methods (kept in the task's thread
// metadata under "a2a_push:<run_id>:<config_id>", one key per config so concurrent sets never overwrite each other;
// a deleted config is a null there). Both are durable on every store, and read and written as the caller through the
// API, so another user's task is not found. Deliveries go through the run webhooks' notifier: the same address
// checks (--webhook-allow), timeouts and retries; the payload is the task in the dialect the config was set in.
import { z } from 'zod';
import type { Logger } from '../../lib/logger.ts';
import { parseParams, INVALID_PARAMS, RpcError } from '../http/jsonrpc.ts';
import type { Json, RunOutcome, RunRecord, Storage } from '../storage/types.ts';
import { webhookUrlProblem, type WebhookPolicy } from '../runs/webhook-policy.ts';
import type { WebhookNotifier } from '../runs/webhooks.ts';
import { writeTask, type Dialect, type Task } from './dialects.ts';
import { getTask, parseTaskId, TASK_NOT_FOUND, type AgentContext } from './tasks.ts';
import { taskOfRun, type RunRow } from './view.ts';

/** A push config in the neutral model; `dialect`: the shape its notifications are written in. */
export interface PushConfig {
  id: string;
  url: string;
  token?: string;
  /** HTTP auth scheme and credentials for the receiver's Authorization header. */
  scheme?: string;
  credentials?: string;
  dialect: Dialect;
}

const Id = z.string().min(1).max(200);
const Url = z.string().min(1).max(2048);
const Config03 = z.looseObject({
  id: z.string().max(200).nullish(),
  url: Url,
  token: z.string().max(1000).nullish(),
  authentication: z
    .looseObject({ schemes: z.array(z.string().min(1).max(100)).min(1), credentials: z.string().max(4000).nullish() })
    .nullish(),
});
const Config10 = z.looseObject({
  id: z.string().max(200).nullish(),
  url: Url,
  token: z.string().max(1000).nullish(),
  authentication: z.looseObject({ scheme: z.string().max(100), credentials: z.string().max(4000).nullish() }).nullish(),
});

// The params schemas, built once: a zod schema costs more to build than to run, and every message/send reads one.
const SendConfigParams = {
  '0.3': z.looseObject({
    configuration: z.looseObject({ pushNotificationConfig: Config03.nullish() }).nullish(),
  }),
  '1.0': z.looseObject({
    configuration: z.looseObject({ taskPushNotificationConfig: Config10.nullish() }).nullish(),
  }),
};
const SetParams03 = z.looseObject({ taskId: Id, pushNotificationConfig: Config03 });
const ConfigCallParams03 = z.looseObject({ id: Id, pushNotificationConfigId: z.string().max(200).nullish() });
const CreateParams10 = z.looseObject({ taskId: Id });
const ConfigCallParams10 = z.looseObject({ taskId: Id, id: z.string().max(200).optional() });

/** A config as a client sent it, its URL checked as a run webhook's is (the address again when delivering). */
export function readConfig(
  dialect: Dialect,
  raw: z.infer<typeof Config03> | z.infer<typeof Config10>,
  policy: WebhookPolicy,
  defaultId: string,
  field: string,
): PushConfig {
  const problem = webhookUrlProblem(raw.url, policy);
  if (problem) throw new RpcError(INVALID_PARAMS, `${field}.url: ${problem}`);
  const auth = raw.authentication as { schemes?: string[]; scheme?: string; credentials?: string | null } | null;
  const scheme = auth?.schemes?.[0] ?? auth?.scheme;
  if (scheme !== undefined && !/^[\w!#$%&'*+.^`|~-]+$/.test(scheme))
    throw new RpcError(INVALID_PARAMS, `${field}.authentication: "${scheme}" is not an HTTP auth scheme`);
  if (auth?.credentials && /[\r\n]/.test(auth.credentials))
    throw new RpcError(INVALID_PARAMS, `${field}.authentication.credentials: must be one line`);
  if (raw.token && /[\r\n]/.test(raw.token)) throw new RpcError(INVALID_PARAMS, `${field}.token: must be one line`);
  return {
    id: raw.id || defaultId,
    url: raw.url,
    ...(raw.token ? { token: raw.token } : {}),
    ...(scheme ? { scheme } : {}),
    ...(auth?.credentials ? { credentials: auth.credentials } : {}),
    dialect,
  };
}

/** The push config of a send (0.3 configuration.pushNotificationConfig, 1.0 configuration.taskPushNotificationConfig). */
export function readSendConfig(dialect: Dialect, method: string, params: unknown, policy: WebhookPolicy) {
  const field = dialect === '0.3' ? 'pushNotificationConfig' : 'taskPushNotificationConfig';
  const p = parseParams(SendConfigParams[dialect], method, params) as {
    configuration?: Record<string, z.infer<typeof Config03> | null | undefined> | null;
  };
  const raw = p.configuration?.[field];
  return raw ? readConfig(dialect, raw, policy, 'default', `${method}: params.configuration.${field}`) : undefined;
}

/** The params of the config methods: which task, which config, and for a set the config itself. */
export function readConfigCall(dialect: Dialect, method: string, params: unknown, policy: WebhookPolicy) {
  if (dialect === '0.3') {
    if (method.endsWith('/set')) {
      const p = parseParams(SetParams03, method, params);
      return {
        taskId: p.taskId,
        config: readConfig(
          dialect,
          p.pushNotificationConfig,
          policy,
          'default',
          `${method}: params.pushNotificationConfig`,
        ),
      };
    }
    const p = parseParams(ConfigCallParams03, method, params);
    return { taskId: p.id, configId: p.pushNotificationConfigId || undefined };
  }
  if (method === 'CreateTaskPushNotificationConfig') {
    // 1.0 sends the TaskPushNotificationConfig itself; older drafts wrapped it in {taskId, config}.
    const p = parseParams(CreateParams10, method, params);
    const inner = (params as { config?: unknown; pushNotificationConfig?: unknown }).config ?? params;
    const c = parseParams(Config10, method, inner);
    return { taskId: p.taskId, config: readConfig(dialect, c, policy, 'default', `${method}: params`) };
  }
  const p = parseParams(ConfigCallParams10, method, params);
  return { taskId: p.taskId, configId: p.id || undefined };
}

/** A config as the dialect returns it (the token and credentials go back to their owner, as they set them). */
export function writeConfig(d: Dialect, taskId: string, c: PushConfig): Record<string, unknown> {
  if (d === '0.3')
    return {
      taskId,
      pushNotificationConfig: {
        id: c.id,
        url: c.url,
        ...(c.token ? { token: c.token } : {}),
        ...(c.scheme
          ? { authentication: { schemes: [c.scheme], ...(c.credentials ? { credentials: c.credentials } : {}) } }
          : {}),
      },
    };
  return {
    id: c.id,
    taskId,
    url: c.url,
    token: c.token ?? '',
    ...(c.scheme ? { authentication: { scheme: c.scheme, credentials: c.credentials ?? '' } } : {}),
  };
}

const keyPrefix = (runId: string) => `a2a_push:${runId}:`;

const StoredConfig = z.object({
  id: z.string(),
  url: z.string(),
  token: z.string().optional(),
  scheme: z.string().optional(),
  credentials: z.string().optional(),
  dialect: z.enum(['0.3', '1.0']),
});

/**
 * A task's configs: the one its first run was sent with, overlaid by those of its thread's metadata (a null there
 * is a deleted one). Malformed entries (someone patched the metadata by hand) are skipped.
 */
export function configsOf(firstRunMetadata: Json | undefined, threadMetadata: Json | undefined, runId: string) {
  const out = new Map<string, PushConfig>();
  const sent = StoredConfig.safeParse((firstRunMetadata as Record<string, unknown> | undefined)?.a2a_push);
  if (sent.success) out.set(sent.data.id, sent.data);
  const prefix = keyPrefix(runId);
  for (const [k, v] of Object.entries((threadMetadata as Record<string, unknown> | undefined) ?? {})) {
    if (!k.startsWith(prefix)) continue;
    const id = k.slice(prefix.length);
    if (v === null) out.delete(id);
    else {
      const c = StoredConfig.safeParse(v);
      if (c.success && c.data.id === id) out.set(id, c.data);
    }
  }
  return [...out.values()];
}

/** The task's configs as the caller may see them; another user's task is not found (getTask, as the caller). */
async function readConfigs(ctx: AgentContext, taskId: string): Promise<PushConfig[]> {
  await getTask(ctx, taskId);
  const { threadId, runId } = parseTaskId(taskId);
  const [thread, run] = await Promise.all([
    ctx.api.call('GET', `/threads/${threadId}`),
    ctx.api.call('GET', `/threads/${threadId}/runs/${runId}`),
  ]);
  if (thread.status !== 200) throw new RpcError(TASK_NOT_FOUND, `Task not found: ${taskId}`);
  const meta = run.status === 200 ? (run.body as RunRow).metadata : undefined;
  return configsOf(meta as Json | undefined, (thread.body as { metadata?: Json }).metadata, runId);
}

async function writeEntry(ctx: AgentContext, taskId: string, id: string, value: PushConfig | null): Promise<void> {
  const { threadId, runId } = parseTaskId(taskId);
  const res = await ctx.api.call('PATCH', `/threads/${threadId}`, {
    metadata: { [`${keyPrefix(runId)}${id}`]: value as unknown as Json },
  });
  if (res.status === 404) throw new RpcError(TASK_NOT_FOUND, `Task not found: ${taskId}`);
  if (res.status !== 200) throw new RpcError(INVALID_PARAMS, `storing the push config failed (status ${res.status})`);
}

export async function setConfig(ctx: AgentContext, taskId: string, config: PushConfig): Promise<PushConfig> {
  await getTask(ctx, taskId);
  await writeEntry(ctx, taskId, config.id, config);
  return config;
}

export async function getConfig(ctx: AgentContext, taskId: string, configId: string | undefined): Promise<PushConfig> {
  const all = await readConfigs(ctx, taskId);
  const found = configId ? all.find((c) => c.id === configId) : all[0];
  if (!found)
    throw new RpcError(
      INVALID_PARAMS,
      `Task ${taskId} has no push notification config${configId ? ` ${configId}` : ''}`,
    );
  return found;
}

export const listConfigs = readConfigs;

export async function deleteConfig(ctx: AgentContext, taskId: string, configId: string | undefined): Promise<void> {
  const found = await getConfig(ctx, taskId, configId);
  await writeEntry(ctx, taskId, found.id, null);
}

/** The body a config's receiver gets: 0.3 the task; 1.0 a StreamResponse holding it. */
export function notificationBody(c: PushConfig, task: Task): string {
  return JSON.stringify(c.dialect === '0.3' ? writeTask('0.3', task) : { task: writeTask('1.0', task) });
}

export function notificationHeaders(c: PushConfig): Record<string, string> {
  return {
    ...(c.token ? { 'x-a2a-notification-token': c.token } : {}),
    ...(c.scheme ? { authorization: c.credentials ? `${c.scheme} ${c.credentials}` : c.scheme } : {}),
  };
}

/**
 * Sends a task's push notifications from the run engine's hooks: "working" when one of its runs starts, its state
 * when the run ends. Only A2A runs (their metadata names a context) are looked at; their configs are read from the
 * store, so a config set on another replica, or before a restart, is seen.
 */
export class PushNotifier {
  constructor(private readonly opts: { storage: Storage; webhooks: WebhookNotifier; logger: Logger }) {}

  /** Per task, the notifications under way: the next waits for them, so a receiver sees working before completed. */
  private readonly chains = new Map<string, Promise<void>>();

  started(run: RecordLike): void {
    this.enqueue(run, undefined);
  }

  finished(run: RecordLike, outcome: RunOutcome): void {
    this.enqueue(run, outcome);
  }

  private enqueue(run: RecordLike, outcome: RunOutcome | undefined): void {
    if (typeof run.metadata?.a2a_context_id !== 'string') return;
    const key = run.thread_id;
    const next = (this.chains.get(key) ?? Promise.resolve())
      .then(() => this.send(run, outcome))
      .catch((err) => this.opts.logger.warn({ err, run_id: run.run_id }, 'A2A push notification failed'));
    this.chains.set(key, next);
    void next.finally(() => {
      if (this.chains.get(key) === next) this.chains.delete(key);
    });
  }

  private async send(run: RecordLike, outcome: RunOutcome | undefined): Promise<void> {
    const meta = (run.metadata ?? {}) as Record<string, unknown>;
    if (typeof meta.a2a_context_id !== 'string') return;
    const taskId = typeof meta.a2a_task_id === 'string' ? meta.a2a_task_id : `${run.thread_id}:${run.run_id}`;
    const { runId: firstRunId } = parseTaskId(taskId);
    const { storage } = this.opts;
    // The thread's metadata only: its values (the whole state, megabytes in a long conversation) are not needed.
    const threadMetadata = await storage.threads.metadata(run.thread_id);
    const first = firstRunId === run.run_id ? run : await storage.runs.getById(firstRunId);
    const configs = configsOf(first?.metadata, threadMetadata ?? undefined, firstRunId);
    // A resume may name its own config: it joins the task's.
    const own = StoredConfig.safeParse(meta.a2a_push);
    if (first !== run && own.success && !configs.some((c) => c.id === own.data.id)) configs.push(own.data);
    if (!configs.length) return;
    const row: RunRow = {
      run_id: run.run_id,
      thread_id: run.thread_id,
      status: outcome ? outcome.status : 'running',
      created_at: run.created_at,
      updated_at: new Date().toISOString(),
      metadata: meta,
      kwargs: run.kwargs as RunRow['kwargs'],
    };
    const values = outcome
      ? outcome.valuesJson !== undefined
        ? (JSON.parse(outcome.valuesJson) as unknown)
        : outcome.values
      : undefined;
    const task = await taskOfRun(taskId, row, values, async () => {
      const t = await storage.threads.get(run.thread_id);
      return t ? { values: t.values as Record<string, unknown> | null, interrupts: t.interrupts as never } : undefined;
    });
    await Promise.all(
      configs.map((c) =>
        this.opts.webhooks.post(c.url, notificationBody(c, task), notificationHeaders(c), {
          run_id: run.run_id,
          a2a_task_id: taskId,
        }),
      ),
    );
  }
}

type RecordLike = Pick<RunRecord, 'run_id' | 'thread_id' | 'created_at' | 'metadata' | 'kwargs'>;

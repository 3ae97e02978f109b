// Wires the agent server together: graphs, storage, run engine, HTTP. Listens and shuts down gracefully.
import type { FastifyInstance, FastifyListenOptions } from 'fastify';
import { isConnectionError } from '../lib/connection-errors.ts';
import type { Logger } from '../lib/logger.ts';
import { buildApp } from './app.ts';
import { loadServerExtensions } from './http/extensions.ts';
import { watchKeyHashFile, withAccessTokens } from './http/api-keys.ts';
import type { AgentServerConfig } from './config.ts';
import { postgresPoolSizes } from './sizing.ts';
import { loadGraphs, type GraphRegistry } from './graphs/index.ts';
import { bundleUi } from './graphs/ui.ts';
import { installMainThreadPlatform, loopbackUrl } from './platform/index.ts';
import { activityCredential } from './platform/activity.ts';
import { instrumentStorage } from './runs/run-metrics.ts';
import type { RunExecutor } from './runs/executor.ts';
import { ThreadExecutor } from './runs/thread-executor.ts';
import { installLeanRunContext } from './shims/lean-run-context.ts';
import { CronScheduler } from './services/cron-scheduler.ts';
import { RunEngine } from './runs/engine.ts';
import { readWebhooksConfig } from './runs/webhook-policy.ts';
import { WebhookNotifier } from './runs/webhooks.ts';
import { PushNotifier } from './a2a/push.ts';
import { postToCustomRoute } from './http/custom-app.ts';
import { createAgentService } from './services/index.ts';
import { openEmbeddedStorage } from './storage/embedded/index.ts';
import { loadEmbedder, readItemsConfig } from './storage/items.ts';
import { langSmithFeedback } from './streams/feedback.ts';
import { readThreadTtlConfig } from './storage/thread-ttl.ts';
import type { EngineStorage } from './storage/ports/run-queue.ts';
import type { Json, RunOutcome, RunRecord, Storage } from './storage/types.ts';

export interface RunningServer {
  app: FastifyInstance;
  url: string;
  storage: Storage;
  engine: RunEngine;
  close(): Promise<void>;
}

export async function openStorage(config: AgentServerConfig, logger: Logger): Promise<EngineStorage> {
  // langgraph.json "store": item TTLs and the embeddings of semantic search.
  const items = await readItemsConfig(config.configPath);
  const embedder = await loadEmbedder(items);
  // langgraph.json "checkpointer.ttl": default thread TTL and how often expired threads are swept.
  const threadTtl = await readThreadTtlConfig(config.configPath);
  const streamRetentionMs = config.streamRetentionSecs * 1000;
  // A database (or Redis) that starts alongside the server (its own pod, a compose service), restarts or fails over
  // is waited for with backoff, within --database-wait, whatever the connection-class error (refused, reset, admin
  // shutdown 57P01, starting up 57P03, dropped mid-migration); a refusal (bad password, missing database) fails at once.
  const deadline = Date.now() + config.databaseWaitSecs * 1000;
  const streams = config.redisUrl
    ? await openRedisStreams(config.redisUrl, streamRetentionMs, deadline, logger)
    : undefined;
  logger.info({ stream_events: streams ? 'redis' : config.databaseUrl ? 'postgres' : 'memory' }, 'stream events store');
  // The key id only (a one-way function of the key), so that a log tells which key a process was given.
  logger.info({ data_key: config.dataKeyring?.currentId ?? null }, 'agent data at rest');
  if (!config.databaseUrl) {
    return openEmbeddedStorage({
      dataDir: config.dataDir,
      items,
      embedder,
      logger,
      threadTtl,
      streamRetentionMs,
      ...(streams ? { streams } : {}),
      ...(config.dataKeyring ? { keyring: config.dataKeyring } : {}),
    });
  }
  const databaseUrl = config.databaseUrl;
  // Loaded only here: the Postgres adapter, its checkpointer and driver cost an embedded-store server's start about
  // as much CPU again as its own graph's imports (bench/results/cold-start.md).
  const { openPostgresStorage } = await import('./storage/postgres/index.ts');
  for (let delay = 250; ; delay = Math.min(delay * 2, 5_000)) {
    try {
      return await openPostgresStorage({
        databaseUrl,
        logger,
        poolSize: postgresPoolSizes(config.postgresPoolMaxSize, config.executorThreads).main,
        items,
        embedder,
        threadTtl,
        streamRetentionMs,
        ...(streams ? { streams } : {}),
        ...(config.dataKeyring ? { keyring: config.dataKeyring } : {}),
      });
    } catch (err) {
      if (!isConnectionError(err) || Date.now() + delay > deadline) {
        await streams?.close();
        throw err;
      }
      logger.warn({ reason: (err as Error).message, retry_in_ms: delay }, 'database not reachable yet; retrying');
      await new Promise((r) => setTimeout(r, delay));
    }
  }
}

/** Stream events on Redis (--redis-url), waiting for it like for the database; an auth refusal fails at once. */
async function openRedisStreams(url: string, retentionMs: number, deadline: number, logger: Logger) {
  // Loaded only with --redis-url: most servers never need the Redis client.
  const { redisStreamEvents } = await import('./storage/redis/stream-events.ts');
  for (let delay = 250; ; delay = Math.min(delay * 2, 5_000)) {
    try {
      return await redisStreamEvents({ url, retentionMs, logger });
    } catch (err) {
      const message = (err as Error).message;
      if (/WRONGPASS|NOAUTH|NOPERM/.test(message) || Date.now() + delay > deadline)
        throw new Error(`--redis-url: cannot use Redis: ${message}`, { cause: err });
      logger.warn({ reason: message, retry_in_ms: delay }, 'redis not reachable yet; retrying');
      await new Promise((r) => setTimeout(r, delay));
    }
  }
}

/**
 * Every graph gets its system assistant (id = uuid5 of the graph name). `defaults` is LANGGRAPH_CONFIG as the
 * platform reads it: per graph id, "context" becomes the assistant's context and every other key its config;
 * applied at each start, so a changed value updates assistants made by earlier starts.
 */
export async function ensureSystemAssistants(
  storage: Storage,
  graphs: GraphRegistry,
  defaults: Record<string, Record<string, unknown>> = {},
): Promise<void> {
  for (const spec of graphs.specs) {
    const { context, ...config } = defaults[spec.graphId] ?? {};
    await storage.assistants.upsertSystem({
      assistant_id: spec.assistantId,
      graph_id: spec.graphId,
      config,
      context:
        context !== null && typeof context === 'object' && !Array.isArray(context)
          ? (context as Record<string, unknown>)
          : {},
      metadata: { created_by: 'system' },
      name: spec.graphId,
      description: null,
    });
  }
}

export async function startAgentServer(config: AgentServerConfig, logger: Logger): Promise<RunningServer> {
  for (const note of config.notes ?? []) logger.warn(note);
  // Before any graph module is imported: getLogger() and new Client() at module top level must work.
  const plannedHost = config.host === '0.0.0.0' || config.host === '::' ? '127.0.0.1' : config.host;
  const platform = installMainThreadPlatform({
    logger,
    plannedUrl: `http://${plannedHost.includes(':') ? `[${plannedHost}]` : plannedHost}:${config.port}`,
    logLevel: config.logLevel,
  });
  // No per-call langsmith RunTree while tracing is off (shims/lean-run-context.ts).
  installLeanRunContext();
  // Where a start's time goes (said with 'agent server listening'): what a sleeping deployment's first request waits.
  const mark = startMarks();
  const graphs = await loadGraphs(config.configPath, { logger, isolateFailures: !config.strict });
  // langgraph.json "ui": components bundled for the browser (a failure is reported, or refuses to start under --strict).
  const ui = await bundleUi(config.configPath, { logger, strict: config.strict });
  // langgraph.json "auth" and "http": loaded before the store opens, so a bad auth or app path fails fast.
  const extensions = await loadServerExtensions(config.configPath, logger);
  mark('graphs');
  const unknownDefaults = Object.keys(config.graphDefaults ?? {}).filter(
    (id) => !graphs.specs.some((s) => s.graphId === id),
  );
  if (unknownDefaults.length)
    logger.warn({ graphs: unknownDefaults }, 'LANGGRAPH_CONFIG names graphs that langgraph.json does not');
  const storage = instrumentStorage(await openStorage(config, logger));
  await ensureSystemAssistants(storage, graphs, config.graphDefaults);
  mark('store');
  const webhookConfig = await readWebhooksConfig(config.configPath, config.webhookAllow, process.env);
  // Relative webhooks ("/my-route") go to the custom app's own routes, in process; without one they are refused.
  const customApp = extensions.app;
  if (!customApp) {
    webhookConfig.policy.selfRoutesProblem ??=
      "a relative webhook calls the deployment's own custom routes, and langgraph.json has no http.app";
  }
  const webhooks = new WebhookNotifier({
    ...webhookConfig,
    logger: logger.child({ component: 'webhooks' }),
    ...(customApp ? { self: (path, body, headers) => postToCustomRoute(customApp, path, body, headers) } : {}),
  });
  const push = new PushNotifier({ storage, webhooks, logger: logger.child({ component: 'a2a-push' }) });
  if (extensions.http.disable_webhooks) logger.info('http.disable_webhooks: run webhooks are never sent');
  if (!config.langsmith)
    logger.info('LangSmith not configured (LANGSMITH_API_KEY): runs with feedback_keys get no feedback event');
  const engine = new RunEngine({
    storage,
    graphs,
    logger,
    ...(config.langsmith
      ? { feedback: langSmithFeedback(config.langsmith, logger.child({ component: 'feedback' })) }
      : {}),
    // The thread's values after the run: the outcome has them unless the run left them unchanged.
    // langgraph.json http.disable_webhooks: runs still accept a webhook, nothing is ever sent.
    // A2A push notifications go through the same notifier (its address checks, timeouts and retries).
    onRunStarted: (run: RunRecord) => push.started(run),
    onRunFinished: (run: RunRecord, outcome: RunOutcome) => {
      push.finished(run, outcome);
      if (extensions.http.disable_webhooks) return;
      webhooks.notify(run, outcome, async () =>
        outcome.valuesJson !== undefined
          ? (JSON.parse(outcome.valuesJson) as Json)
          : outcome.values !== undefined
            ? outcome.values
            : ((await storage.threads.get(run.thread_id))?.values ?? null),
      );
    },
    // Executor threads start in the background (start-up time is redeploy time); runs execute on this thread
    // until one is ready.
    ...(config.executorThreads > 0
      ? {
          executor: (inline: RunExecutor) =>
            ThreadExecutor.start(
              config.executorThreads,
              {
                configPath: config.configPath,
                source: storage.checkpointerSource,
                poolSize: postgresPoolSizes(config.postgresPoolMaxSize, config.executorThreads).executor,
                platform: () => platform.workerEnv(),
                youngMb: config.executorYoungMb,
                idleReleaseMs: config.executorIdleSecs * 1000,
              },
              logger,
              inline,
            ),
        }
      : {}),
    concurrency: config.jobsPerWorker,
    runTimeoutMs: config.jobTimeoutSecs * 1000,
    leaseMs: config.leaseSecs * 1000,
    sweepMs: Math.min(5_000, (config.leaseSecs * 1000) / 2),
  });
  const apiKeys = config.authKeysFile
    ? withAccessTokens(watchKeyHashFile(config.authKeysFile, logger), config.deploymentToken)
    : undefined;
  if (!apiKeys && !extensions.auth) {
    logger.warn('no --auth-keys-file: every request is accepted without an API key (a local development server)');
  }
  const app = await buildApp({
    storage,
    graphs,
    engine,
    logger,
    apiKeys,
    extensions,
    ui,
    webhookPolicy: webhookConfig.policy,
    streamStallMs: config.streamStallSecs * 1000,
    ...(config.publicUrl ? { publicUrl: config.publicUrl } : {}),
    ...(config.testTruncate ? { testTruncate: true } : {}),
    // Read through connections of its own, as the platform reads a stopped server's store (pending-work.ts).
    // Loaded when first asked: pg and the reader cost a start nothing on a server no idle policy asks.
    pendingWork: async () => {
      const { embeddedPendingWork, postgresPendingWork } = await import('./storage/pending-work.ts');
      return config.databaseUrl ? postgresPendingWork(config.databaseUrl) : embeddedPendingWork(config.dataDir);
    },
    ...(config.activityTokenFile ? { activityCredential: activityCredential(config.activityTokenFile) } : {}),
  });
  if (config.testTruncate) logger.warn('--test-truncate: POST /internal/truncate deletes every thread and store item');
  platform.bindApp(app);
  mark('app');
  // An inherited socket (--listen-fd) is already bound and listening: the supervisor held the port since it chose it.
  // fastify hands its options to Node's server.listen(), which takes {fd}; fastify's types do not name it.
  const url = await app.listen(
    config.listenFd !== undefined
      ? ({ fd: config.listenFd, host: config.host } as FastifyListenOptions)
      : { host: config.host, port: config.port },
  );
  // Runs start once the URL is known: executor threads reach this server over loopback from graph code.
  const address = app.server.address();
  if (address && typeof address === 'object') platform.setListeningUrl(loopbackUrl(address));
  await engine.start();
  mark('listen');
  const cronService = createAgentService({ storage, graphs, engine, webhookPolicy: webhookConfig.policy });
  const crons = new CronScheduler({
    storage,
    buildRun: cronService.runs.build,
    afterCreate: cronService.runs.deleteThreadWhenDone,
    logger: logger.child({ component: 'crons' }),
    pollMs: config.cronPollMs,
  });
  crons.start();
  // Data from before a key rotation (or from before encryption) is sealed under the current key in the background.
  const stopResealing = new AbortController();
  const resealing = storage.reseal
    ? storage.reseal(stopResealing.signal).then(
        (counts) => {
          const fields = { data_key: config.dataKeyring?.currentId, ...counts };
          if (counts.failed) logger.error(fields, 'stored agent data that no configured data key opens was left as is');
          else logger.info(fields, 'stored agent data is sealed under the current data key');
        },
        (err: unknown) => {
          if (!stopResealing.signal.aborted) logger.error({ err }, 'resealing stored agent data failed');
        },
      )
    : Promise.resolve();
  const failed = Object.keys(graphs.failures);
  logger.info(
    {
      url,
      store: storage.kind,
      graphs: graphs.specs.map((s) => s.graphId),
      worker: engine.workerId,
      executor_threads: config.executorThreads,
      ...(failed.length ? { failed_graphs: failed } : {}),
      start_ms: mark.done(),
    },
    'agent server listening',
  );
  if (extensions.auth)
    logger.info('custom auth from langgraph.json decides who may call (it replaces the platform API key)');
  else if (apiKeys)
    logger.info({ file: config.authKeysFile }, 'requests need an X-Api-Key listed in the key file (except /ok)');
  let closing: Promise<void> | null = null;
  return {
    app,
    url,
    storage,
    engine,
    close() {
      closing ??= (async () => {
        stopResealing.abort();
        await resealing;
        await crons.stop();
        await engine.stop(config.shutdownGraceSecs * 1000);
        await webhooks.close();
        await app.close();
        await storage.close();
      })();
      return closing;
    },
  };
}

/**
 * Milliseconds of a start by step: `process` is from the process's start to the first step (Node, the platform's
 * own modules), each named step the time since the one before.
 */
function startMarks(): ((step: string) => void) & { done(): Record<string, number> } {
  const steps: Record<string, number> = { process: Math.round(process.uptime() * 1000) };
  let last = performance.now();
  return Object.assign(
    (step: string) => {
      const now = performance.now();
      steps[step] = Math.round(now - last);
      last = now;
    },
    { done: () => steps },
  );
}

// Agent server configuration: flags win over environment variables, which win over defaults. Parsed once.
import { closeSync, readFileSync, readSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import v8 from 'node:v8';
import { z } from 'zod';
import { langSmithFromEnv } from './streams/feedback.ts';
import { langgraphJsonEnv } from './graphs/config.ts';
import { DataKeyError, DataKeyring, keyringFromEnv } from './storage/data-cipher.ts';
import {
  fromEnv,
  optionPicker,
  parseCommandArgs,
  portSchema,
  positiveIntSchema,
  UsageError,
  type CommandSpec,
} from '../lib/cli-args.ts';

export const agentServerCommand: CommandSpec = {
  name: 'agent-server',
  summary: 'Serve the graphs of a langgraph.json over the thread/run API (LangGraph SDK compatible)',
  usage: 'agentplane agent-server --config path/to/langgraph.json [options]',
  options: {
    config: {
      type: 'string',
      description: 'Path of langgraph.json (LANGGRAPH_CONFIG holding a path instead of JSON is still read, deprecated)',
      default: './langgraph.json',
      env: ['AGENTPLANE_GRAPH_CONFIG'],
    },
    'graph-defaults': {
      type: 'string',
      description:
        'JSON of per-graph defaults for the system assistants, as on the LangGraph platform: ' +
        '{"<graph id>": {"configurable": {...}, "context": {...}, ...}} ("context" becomes the assistant\'s context, ' +
        'the rest its config)',
      env: ['LANGGRAPH_CONFIG'],
    },
    strict: {
      type: 'boolean',
      description:
        'Refuse to start when any graph fails to load (for CI); by default a failing graph is reported ' +
        '(log, /info, 422 on its assistant) and the others keep serving',
      env: ['AGENTPLANE_STRICT'],
    },
    'check-report': {
      type: 'string',
      description:
        'Import the graphs as a start would, write the first problem (one line, or nothing) to this file and exit ' +
        "without serving; the graphs' own output is not shown (the local runtime's build check, run with the " +
        "revision's secrets)",
    },
    watch: {
      type: 'boolean',
      description:
        'Start the server again when a code, JSON/YAML or .env file of the project (the folder of langgraph.json) ' +
        'changes, as langgraph dev does; threads stay (they live in --data-dir or the database); the watcher outlives ' +
        'a graph that fails to load. node_modules, .git and the data folder are not watched',
    },
    host: {
      type: 'string',
      description: 'Address to listen on (0.0.0.0 for every interface)',
      default: '127.0.0.1',
      env: ['HOST'],
    },
    port: { type: 'string', short: 'p', description: 'TCP port (0 picks a free one)', default: '8000', env: ['PORT'] },
    'listen-fd': {
      type: 'string',
      description:
        'Serve on the listening socket inherited as this file descriptor instead of binding --port (for a supervisor ' +
        'that holds the port from the moment it picks it, so no other process can take it in between)',
    },
    'database-url': {
      type: 'string',
      description: 'PostgreSQL URL; without one the embedded SQLite store is used',
      env: ['DATABASE_URI', 'POSTGRES_URI', 'DATABASE_URL'],
    },
    'data-dir': {
      type: 'string',
      description: 'Folder of the embedded store',
      default: './.agentplane/agent-server',
      env: ['AGENTPLANE_DATA_DIR'],
    },
    'jobs-per-worker': {
      type: 'string',
      description: 'Runs executed concurrently by this process',
      default: '10',
      env: ['N_JOBS_PER_WORKER'],
    },
    'postgres-pool-max-size': {
      type: 'string',
      description:
        'Postgres connections this process opens at most for its queries, shared out evenly between the HTTP thread ' +
        'and the executor threads (at least one each; the LISTEN connections and the memory store come on top); ' +
        'default twice the usable cores, at least 4 and at most 20: more connections than the database has cores ' +
        'to serve mostly add switching between its backends',
      env: ['LANGGRAPH_POSTGRES_POOL_MAX_SIZE'],
    },
    'job-timeout': {
      type: 'string',
      description: 'Seconds a background run may take before it ends as timeout',
      default: '3600',
      env: ['BG_JOB_TIMEOUT_SECS'],
    },
    'shutdown-grace': {
      type: 'string',
      description: 'Seconds to let running runs finish on SIGTERM before they are returned to the queue',
      default: '20',
      env: ['SHUTDOWN_GRACE_SECS'],
    },
    'database-wait': {
      type: 'string',
      description:
        'Seconds to keep retrying the first Postgres connection (with backoff) while the database is not reachable yet',
      default: '60',
      env: ['AGENTPLANE_DATABASE_WAIT_SECS'],
    },
    'lease-secs': {
      type: 'string',
      description: 'Seconds a run stays owned by a silent worker before another process retries it',
      default: '30',
      env: ['AGENTPLANE_LEASE_SECS'],
    },
    'executor-threads': {
      type: 'string',
      description:
        "Worker threads that execute graphs (0: on the main thread); default 1 when 2+ cores are usable (the cgroup CPU quota counts, not the node's cores)",
      env: ['AGENTPLANE_EXECUTOR_THREADS'],
    },
    'executor-young-mb': {
      type: 'string',
      description:
        "V8 young generation of each executor thread, in MiB (0: V8's own, 48): a larger one lets a run's short-lived objects die before a scavenge copies them, for more memory; default 192 when the memory budget (the V8 heap limit, or 3/4 of the cgroup's memory limit if lower) is 3 GiB or more, 96 from 1.5 GiB, else V8's own",
      env: ['AGENTPLANE_EXECUTOR_YOUNG_MB'],
    },
    'executor-idle-secs': {
      type: 'string',
      description:
        'Seconds without a run after which the executor threads end, giving their memory back (the next run starts them again and runs inline meanwhile); 0: they stay',
      default: '30',
      env: ['AGENTPLANE_EXECUTOR_IDLE_SECS'],
    },
    'stream-retention': {
      type: 'string',
      description:
        "Seconds a run's stream events stay readable (joinStream, Last-Event-ID resumes) after its last event",
      default: '600',
      env: ['AGENTPLANE_STREAM_RETENTION_SECS'],
    },
    'redis-url': {
      type: 'string',
      description:
        "Redis URL (redis:// or rediss://) for runs' stream events (Redis Streams) instead of the Postgres " +
        'table or, without --database-url, process memory; every replica must use the same one',
      env: ['REDIS_URI'],
    },
    'stream-stall-timeout': {
      type: 'string',
      description:
        'Seconds a stream client may go without reading before it is disconnected (it can resume with Last-Event-ID)',
      default: '60',
      env: ['AGENTPLANE_STREAM_STALL_SECS'],
    },
    'auth-keys-file': {
      type: 'string',
      description:
        'JSON file {"hashes": [sha256 hex of each accepted key]}: requests need one of those keys in X-Api-Key (re-read when it changes); without it the server is open',
    },
    'deployment-token': {
      type: 'string',
      description:
        "This deployment's token, set by the platform: with --auth-keys-file, X-Api-Key also accepts the short-lived access tokens the control plane makes for this deployment",
      env: ['AGENTPLANE_DEPLOYMENT_TOKEN'],
    },
    'secrets-fd': {
      type: 'string',
      description:
        'Read settings that are secrets (a JSON object of environment variable names to strings: LANGGRAPH_AES_KEY, ' +
        'DATABASE_URI, AGENTPLANE_DEPLOYMENT_TOKEN...) from this inherited descriptor at start, for a supervisor ' +
        "that keeps them out of the process's environment (where graph code and /proc/self/environ would show them)",
    },
    'webhook-allow': {
      type: 'string',
      description:
        'Comma-separated hosts run webhooks and A2A push notifications may reach, whatever address they resolve to ' +
        '(*.example.com: its subdomains; *: every host and address); without it only hosts that resolve to public ' +
        'addresses are reached',
      env: ['AGENTPLANE_WEBHOOK_ALLOW'],
    },
    'public-url': {
      type: 'string',
      description:
        "The deployment's URL as its clients reach it (https://host[/prefix]), named by the A2A agent cards; without " +
        'it the cards name the host each request came to (X-Forwarded-Proto/-Host of a proxy first)',
      env: ['AGENTPLANE_PUBLIC_AGENT_URL'],
    },
    'cron-poll-ms': {
      type: 'string',
      description: 'Milliseconds between two looks for due cron ticks (each tick runs once across all replicas)',
      default: '1000',
      env: ['AGENTPLANE_CRON_POLL_MS'],
    },
    'test-truncate': {
      type: 'boolean',
      description:
        'Serve POST /internal/truncate, which deletes every thread (with its runs and checkpoints), every assistant ' +
        "made through the API and every store item: for running an API test suite (the reference servers' own) " +
        'against this server, never for a deployment',
      env: ['AGENTPLANE_TEST_TRUNCATE'],
    },
    'log-level': {
      type: 'string',
      description: 'fatal, error, warn, info, debug, trace or silent',
      default: 'info',
      env: ['LOG_LEVEL'],
    },
  },
};

const Config = z.object({
  configPath: z.string().min(1),
  host: z.string().min(1),
  port: portSchema,
  listenFd: z.coerce.number().int().min(3).optional(),
  databaseUrl: z
    .string()
    .regex(/^postgres(ql)?:\/\//, 'must start with postgres:// or postgresql://')
    .optional(),
  dataDir: z.string().min(1),
  jobsPerWorker: positiveIntSchema,
  postgresPoolMaxSize: z.coerce.number().int().min(2).max(10_000),
  jobTimeoutSecs: positiveIntSchema,
  shutdownGraceSecs: z.coerce.number().min(0),
  leaseSecs: z.coerce.number().min(1),
  databaseWaitSecs: z.coerce.number().min(0).max(3600),
  executorThreads: z.coerce.number().int().min(0).max(64),
  executorYoungMb: z.coerce.number().int().min(0).max(1024),
  executorIdleSecs: z.coerce.number().min(0).max(86_400),
  streamRetentionSecs: z.coerce
    .number()
    .min(1)
    .max(7 * 24 * 3600),
  streamStallSecs: z.coerce.number().min(1).max(3600),
  redisUrl: z
    .string()
    .regex(/^rediss?:\/\//, 'must start with redis:// or rediss://')
    .optional(),
  logLevel: z.enum(['fatal', 'error', 'warn', 'info', 'debug', 'trace', 'silent']),
  authKeysFile: z.string().min(1).optional(),
  deploymentToken: z.string().min(1).optional(),
  /** Hosts webhooks may reach whatever they resolve to; '*' for any. Empty: public addresses only. */
  webhookAllow: z.array(
    z
      .string()
      .min(1)
      .regex(/^(\*|(\*\.)?[A-Za-z0-9.:[\]-]+)$/, 'a host name, *.domain or *'),
  ),
  cronPollMs: z.coerce.number().int().min(50).max(3_600_000),
  publicUrl: z
    .string()
    .regex(/^https?:\/\/[^\s/?#]+(\/[^\s?#]*)?$/, 'must be an http(s) URL without query or fragment')
    .optional(),
  /** LangSmith (LANGSMITH_API_KEY, LANGSMITH_ENDPOINT): feedback URLs for runs with feedback_keys. */
  langsmith: z
    .object({ apiKey: z.string().min(1), endpoint: z.string().regex(/^https?:\/\/[^\s]+$/, 'must be an http(s) URL') })
    .nullable(),
  /** Per-graph {config..., context} for the system assistants (LANGGRAPH_CONFIG). */
  graphDefaults: z.record(z.string(), z.record(z.string(), z.unknown())).optional(),
  strict: z.literal(true).optional(),
  /** Only import the graphs and write the first problem here (check.ts). */
  checkReport: z.string().optional(),
  /** Run the server as a child process started again on each change of the project (watch.ts). */
  watch: z.literal(true).optional(),
  /** POST /internal/truncate is served (API test suites only). */
  testTruncate: z.literal(true).optional(),
  /**
   * The keys agent data is encrypted with at rest (LANGGRAPH_AES_KEY, AGENTPLANE_AES_PREVIOUS_KEYS): thread values,
   * checkpoints, store items, run inputs. Logged or serialised, it shows only its key id.
   */
  dataKeyring: z.custom<DataKeyring>((v) => v instanceof DataKeyring).optional(),
  /** Things worth a warning once a logger exists (deprecated settings). */
  notes: z.array(z.string()).optional(),
});
export type AgentServerConfig = z.infer<typeof Config>;

/** Returns null when --help was asked for. */
export function parseAgentServerConfig(
  argv: string[],
  env: NodeJS.ProcessEnv,
  cwd = process.cwd(),
): AgentServerConfig | null {
  const flags = parseCommandArgs(agentServerCommand, argv);
  if (flags.help) return null;
  // A watched server is started again and again: a file descriptor can be read or inherited only once.
  for (const once of ['secrets-fd', 'listen-fd'] as const) {
    if (flags.watch === true && typeof flags[once] === 'string') {
      throw new UsageError(`--watch cannot be combined with --${once} (a descriptor serves one start only)`);
    }
  }
  // Read into this copy only: process.env (and what graph code and its programs inherit) never holds them.
  if (typeof flags['secrets-fd'] === 'string') env = { ...env, ...readSecretsFd(flags['secrets-fd']) };
  const first = resolveConfig(flags, env, cwd);
  // langgraph.json "env" is the deployment's environment on the platform, so the server reads it too (LANGGRAPH_CONFIG,
  // REDIS_URI, N_JOBS_PER_WORKER, ...); the process's own variables and flags still win. The graph config's own path
  // cannot come from there.
  const fileEnv = langgraphJsonEnv(first.configPath);
  if (!Object.keys(fileEnv).length) return first;
  // Nor can --test-truncate: a project's langgraph.json must not switch on a route that deletes everything.
  const merged = resolveConfig(flags, { ...fileEnv, ...env }, cwd);
  return { ...merged, configPath: first.configPath, testTruncate: first.testTruncate };
}

function resolveConfig(
  flags: ReturnType<typeof parseCommandArgs>,
  env: NodeJS.ProcessEnv,
  cwd: string,
): AgentServerConfig {
  const pick = optionPicker(agentServerCommand, flags, env);
  // LANGGRAPH_CONFIG holds per-graph defaults (JSON), as on the LangGraph platform. Older agentplane deployments
  // set it to the path of langgraph.json, so a value that is not a JSON object is read as that path, with a note.
  const notes: string[] = [];
  let graphDefaults: unknown;
  let legacyPath: string | undefined;
  const defaultsText = pick('graph-defaults');
  if (defaultsText !== undefined) {
    if (defaultsText.trim().startsWith('{')) {
      try {
        graphDefaults = JSON.parse(defaultsText);
      } catch (err) {
        throw new UsageError(`--graph-defaults (LANGGRAPH_CONFIG): not valid JSON: ${(err as Error).message}`);
      }
    } else if (typeof flags['graph-defaults'] !== 'string') {
      legacyPath = defaultsText;
      notes.push(
        'LANGGRAPH_CONFIG holds a path: read as the path of langgraph.json; use AGENTPLANE_GRAPH_CONFIG for ' +
          'that (LANGGRAPH_CONFIG is JSON of per-graph assistant defaults, as on the LangGraph platform)',
      );
    }
  }
  const configFlag = typeof flags.config === 'string' ? flags.config : undefined;
  const raw = {
    configPath: path.resolve(
      cwd,
      configFlag ?? fromEnv(env, ['AGENTPLANE_GRAPH_CONFIG']) ?? legacyPath ?? './langgraph.json',
    ),
    host: pick('host'),
    port: pick('port'),
    listenFd: pick('listen-fd'),
    databaseUrl: pick('database-url'),
    dataDir: path.resolve(cwd, pick('data-dir')!),
    jobsPerWorker: pick('jobs-per-worker'),
    postgresPoolMaxSize:
      pick('postgres-pool-max-size') ??
      defaultPostgresPoolMaxSize(usableCpus(os.availableParallelism(), readCgroupFile)),
    jobTimeoutSecs: pick('job-timeout'),
    shutdownGraceSecs: pick('shutdown-grace'),
    leaseSecs: pick('lease-secs'),
    databaseWaitSecs: pick('database-wait'),
    executorThreads: pick('executor-threads') ?? (usableCpus(os.availableParallelism(), readCgroupFile) >= 2 ? 1 : 0),
    executorIdleSecs: pick('executor-idle-secs'),
    executorYoungMb:
      pick('executor-young-mb') ??
      executorYoungMb(v8.getHeapStatistics().heap_size_limit, process.constrainedMemory() ?? 0, os.totalmem()),
    streamRetentionSecs: pick('stream-retention'),
    streamStallSecs: pick('stream-stall-timeout'),
    redisUrl: pick('redis-url'),
    logLevel: pick('log-level')?.toLowerCase(),
    webhookAllow: (pick('webhook-allow') ?? '')
      .split(',')
      .map((h) => h.trim())
      .filter(Boolean),
    cronPollMs: pick('cron-poll-ms'),
    publicUrl: pick('public-url') || undefined,
    authKeysFile: pick('auth-keys-file') === undefined ? undefined : path.resolve(cwd, pick('auth-keys-file')!),
    deploymentToken: pick('deployment-token') || undefined,
    langsmith: langSmithFromEnv(env),
    graphDefaults,
    strict: flags.strict === true || /^(1|true)$/i.test(env.AGENTPLANE_STRICT ?? '') ? true : undefined,
    watch: flags.watch === true ? true : undefined,
    checkReport: pick('check-report') === undefined ? undefined : path.resolve(cwd, pick('check-report')!),
    testTruncate:
      flags['test-truncate'] === true || /^(1|true)$/i.test(env.AGENTPLANE_TEST_TRUNCATE ?? '') ? true : undefined,
    dataKeyring: dataKeyringOf(env),
    notes: notes.length ? notes : undefined,
  };
  const parsed = Config.safeParse(raw);
  if (!parsed.success) {
    const names: Record<string, string> = {
      configPath: '--config',
      host: '--host',
      port: '--port',
      listenFd: '--listen-fd',
      databaseUrl: '--database-url',
      dataDir: '--data-dir',
      jobsPerWorker: '--jobs-per-worker',
      postgresPoolMaxSize: '--postgres-pool-max-size (LANGGRAPH_POSTGRES_POOL_MAX_SIZE)',
      jobTimeoutSecs: '--job-timeout',
      shutdownGraceSecs: '--shutdown-grace',
      leaseSecs: '--lease-secs',
      databaseWaitSecs: '--database-wait',
      executorThreads: '--executor-threads',
      executorYoungMb: '--executor-young-mb',
      executorIdleSecs: '--executor-idle-secs',
      streamRetentionSecs: '--stream-retention',
      streamStallSecs: '--stream-stall-timeout',
      redisUrl: '--redis-url',
      logLevel: '--log-level',
      authKeysFile: '--auth-keys-file',
      deploymentToken: '--deployment-token (AGENTPLANE_DEPLOYMENT_TOKEN)',
      webhookAllow: '--webhook-allow',
      cronPollMs: '--cron-poll-ms',
      publicUrl: '--public-url (AGENTPLANE_PUBLIC_AGENT_URL)',
      graphDefaults: '--graph-defaults (LANGGRAPH_CONFIG)',
      langsmith: 'LANGSMITH_ENDPOINT',
    };
    const msg = parsed.error.issues
      .map((i) => `${names[String(i.path[0])] ?? i.path.join('.')}: ${i.message}`)
      .join('; ');
    throw new UsageError(msg);
  }
  return parsed.data;
}

function dataKeyringOf(env: NodeJS.ProcessEnv): DataKeyring | undefined {
  try {
    return keyringFromEnv(env);
  } catch (err) {
    if (err instanceof DataKeyError) throw new UsageError(err.message);
    throw err;
  }
}

const SecretVars = z.record(z.string().regex(/^[A-Za-z_][A-Za-z0-9_]*$/), z.string());

/** The variables a supervisor wrote to `fdText` (read to its end, then closed). */
function readSecretsFd(fdText: string): Record<string, string> {
  const fd = Number(fdText);
  if (!Number.isInteger(fd) || fd < 3)
    throw new UsageError(`--secrets-fd: ${fdText} is not a descriptor number above 2`);
  const chunks: Buffer[] = [];
  const buf = Buffer.alloc(64 * 1024);
  let total = 0;
  try {
    for (;;) {
      let n: number;
      try {
        n = readSync(fd, buf);
      } catch (err) {
        // A non-blocking descriptor with nothing yet: wait a little (this runs once, before anything else).
        if ((err as NodeJS.ErrnoException).code !== 'EAGAIN') throw err;
        Atomics.wait(new Int32Array(new SharedArrayBuffer(4)), 0, 0, 10);
        continue;
      }
      if (n === 0) break;
      total += n;
      if (total > 4 * 1024 * 1024) throw new UsageError('--secrets-fd: more than 4 MiB');
      chunks.push(Buffer.from(buf.subarray(0, n)));
    }
  } catch (err) {
    if (err instanceof UsageError) throw err;
    throw new UsageError(`--secrets-fd ${fd}: ${(err as Error).message}`);
  } finally {
    try {
      closeSync(fd);
    } catch {
      // already closed
    }
  }
  let parsed: unknown;
  try {
    parsed = JSON.parse(Buffer.concat(chunks).toString('utf8'));
  } catch {
    throw new UsageError('--secrets-fd: not a JSON object');
  }
  const vars = SecretVars.safeParse(parsed);
  if (!vars.success) throw new UsageError('--secrets-fd: not a JSON object of variable names to strings');
  return vars.data;
}

/**
 * Removes the data keys from the process's environment once the configuration holds them: graph code runs in this
 * process and every program it starts inherits the environment, neither has a use for them.
 */
export function forgetDataKeys(env: NodeJS.ProcessEnv): void {
  delete env.LANGGRAPH_AES_KEY;
  delete env.AGENTPLANE_AES_PREVIOUS_KEYS;
}

function readCgroupFile(file: string): string | undefined {
  try {
    return readFileSync(file, 'utf8');
  } catch {
    return undefined;
  }
}

const MIB = 2 ** 20;

/**
 * The default young generation of an executor thread, in MiB (0: V8's own, 48): executor threads allocate fast and
 * hold a run's objects for the run's few milliseconds, so a young generation that outlasts them saves the copying
 * (bench/results/issue-30.md, ninth session). The budget is the V8 heap limit (--max-old-space-size, which the
 * local runtime sets from a deployment's memory limit), or 3/4 of the cgroup's memory limit when that is lower (a
 * pod's limit: `constrained` at or above the machine's memory means none); a sixteenth of it, in V8's steps.
 */
export function executorYoungMb(heapLimitBytes: number, constrainedBytes: number, totalBytes: number): number {
  const limited = constrainedBytes > 0 && constrainedBytes < totalBytes ? (constrainedBytes * 3) / 4 : Infinity;
  const budget = Math.min(heapLimitBytes, limited) / MIB;
  if (budget >= 3 * 1024) return 192;
  if (budget >= 1.5 * 1024) return 96;
  return 0;
}

/**
 * CPUs this process may use: the cores it sees, bounded by the container's CPU quota (cgroup v2 `cpu.max`, else v1
 * `cpu.cfs_quota_us`/`cpu.cfs_period_us`). In a pod with a 1-CPU limit on a 16-core node this is 1, not 16.
 */
export function usableCpus(cores: number, read: (file: string) => string | undefined): number {
  const v2 = read('/sys/fs/cgroup/cpu.max')?.trim().split(/\s+/);
  let quota: number | undefined;
  if (v2 && v2[0] !== 'max' && v2.length === 2) quota = Number(v2[0]) / Number(v2[1]);
  if (quota === undefined && !v2) {
    const q = Number(read('/sys/fs/cgroup/cpu/cpu.cfs_quota_us')?.trim());
    const p = Number(read('/sys/fs/cgroup/cpu/cpu.cfs_period_us')?.trim());
    if (q > 0 && p > 0) quota = q / p;
  }
  return quota !== undefined && Number.isFinite(quota) && quota > 0 ? Math.min(cores, quota) : cores;
}

/**
 * The process's Postgres connections by default: twice its usable cores (a CPU quota rounded up), at least 4 and at
 * most 20. More connections than there are cores to serve them mostly add switching between their backends: on a
 * 2-core machine running the server and its database, 4 in place of 40 took Postgres' CPU per run cycle down by a
 * quarter to a third and the cycles per second up (bench/results/issue-30.md, thirteenth session).
 */
export function defaultPostgresPoolMaxSize(usableCores: number): number {
  return Math.min(20, Math.max(4, 2 * Math.ceil(usableCores)));
}

/**
 * The Postgres pools' sizes: the HTTP thread's (`main`, which also serves the checkpoints of graphs run inline) and
 * each executor thread's (`executor`), from the process's budget (--postgres-pool-max-size) shared out evenly, the
 * HTTP thread taking what does not divide; at least one connection each.
 */
export function postgresPoolSizes(maxSize: number, executorThreads: number): { main: number; executor: number } {
  const executor = Math.max(1, Math.floor(maxSize / (executorThreads + 1)));
  return { main: Math.max(1, maxSize - executor * executorThreads), executor };
}

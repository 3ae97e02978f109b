// The agent server's command line: every flag with its environment variables, default and help text (the help and
// docs/cli.md are generated from it). config.ts turns what it parses into the validated configuration.
import { z } from 'zod';
import { defineCommand, portSchema, positiveIntSchema } from '../lib/cli-args.ts';
import { list, lower } from '../lib/option-readers.ts';

export const agentServerCommand = defineCommand({
  name: 'agent-server',
  summary: 'Serve the graphs of a langgraph.json over the thread/run API (LangGraph SDK compatible)',
  usage: 'agentplane agent-server --config path/to/langgraph.json [options]',
  // LANGSMITH_API_KEY goes with it; langSmithFromEnv reads both.
  envOnly: { langsmith: 'LANGSMITH_ENDPOINT' },
  options: {
    config: {
      type: 'string',
      description: 'Path of langgraph.json (LANGGRAPH_CONFIG holding a path instead of JSON is still read, deprecated)',
      default: './langgraph.json',
      env: ['AGENTPLANE_GRAPH_CONFIG'],
      path: 'configPath',
      schema: z.string().min(1),
    },
    'graph-defaults': {
      type: 'string',
      description:
        'JSON of per-graph defaults for the system assistants, as on the LangGraph platform: ' +
        '{"<graph id>": {"configurable": {...}, "context": {...}, ...}} ("context" becomes the assistant\'s context, ' +
        'the rest its config)',
      env: ['LANGGRAPH_CONFIG'],
      path: 'graphDefaults',
      schema: z.record(z.string(), z.record(z.string(), z.unknown())).optional(),
    },
    strict: {
      type: 'boolean',
      description:
        'Refuse to start when any graph fails to load (for CI); by default a failing graph is reported ' +
        '(log, /info, 422 on its assistant) and the others keep serving',
      env: ['AGENTPLANE_STRICT'],
      path: 'strict',
      schema: z.literal(true).optional(),
    },
    'check-report': {
      type: 'string',
      description:
        'Import the graphs as a start would, write the first problem (one line, or nothing) to this file and exit ' +
        "without serving; the graphs' own output is not shown (the local runtime's build check, run with the " +
        "revision's secrets)",
      path: 'checkReport',
      schema: z.string().optional(),
    },
    watch: {
      type: 'boolean',
      description:
        'Start the server again when a code, JSON/YAML or .env file of the project (the folder of langgraph.json) ' +
        'changes, as langgraph dev does; threads stay (they live in --data-dir or the database); the watcher outlives ' +
        'a graph that fails to load. node_modules, .git and the data folder are not watched',
      path: 'watch',
      schema: z.literal(true).optional(),
    },
    host: {
      type: 'string',
      description: 'Address to listen on (0.0.0.0 for every interface)',
      default: '127.0.0.1',
      env: ['HOST'],
      path: 'host',
      schema: z.string().min(1),
    },
    port: {
      type: 'string',
      short: 'p',
      description: 'TCP port (0 picks a free one)',
      default: '8000',
      env: ['PORT'],
      path: 'port',
      schema: portSchema,
    },
    'listen-fd': {
      type: 'string',
      description:
        'Serve on the listening socket inherited as this file descriptor instead of binding --port (for a supervisor ' +
        'that holds the port from the moment it picks it, so no other process can take it in between)',
      path: 'listenFd',
      schema: z.coerce.number().int().min(3).optional(),
    },
    'database-url': {
      type: 'string',
      description: 'PostgreSQL URL; without one the embedded SQLite store is used',
      env: ['DATABASE_URI', 'POSTGRES_URI', 'DATABASE_URL'],
      path: 'databaseUrl',
      schema: z
        .string()
        .regex(/^postgres(ql)?:\/\//, 'must start with postgres:// or postgresql://')
        .optional(),
    },
    'data-dir': {
      type: 'string',
      description: 'Folder of the embedded store',
      default: './.agentplane/agent-server',
      env: ['AGENTPLANE_DATA_DIR'],
      path: 'dataDir',
      schema: z.string().min(1),
    },
    'jobs-per-worker': {
      type: 'string',
      description: 'Runs executed concurrently by this process',
      default: '10',
      env: ['N_JOBS_PER_WORKER'],
      path: 'jobsPerWorker',
      schema: positiveIntSchema,
    },
    'postgres-pool-max-size': {
      type: 'string',
      description:
        'Postgres connections this process opens at most for its queries, shared out evenly between the HTTP thread ' +
        'and the executor threads (at least one each; the LISTEN connections and the memory store come on top); ' +
        'default twice the usable cores, at least 4 and at most 20: more connections than the database has cores ' +
        'to serve mostly add switching between its backends',
      env: ['LANGGRAPH_POSTGRES_POOL_MAX_SIZE'],
      path: 'postgresPoolMaxSize',
      schema: z.coerce.number().int().min(2).max(10_000),
    },
    'job-timeout': {
      type: 'string',
      description: 'Seconds a background run may take before it ends as timeout',
      default: '3600',
      env: ['BG_JOB_TIMEOUT_SECS'],
      path: 'jobTimeoutSecs',
      schema: positiveIntSchema,
    },
    'shutdown-grace': {
      type: 'string',
      description: 'Seconds to let running runs finish on SIGTERM before they are returned to the queue',
      default: '20',
      env: ['SHUTDOWN_GRACE_SECS'],
      path: 'shutdownGraceSecs',
      schema: z.coerce.number().min(0),
    },
    'database-wait': {
      type: 'string',
      description:
        'Seconds to keep retrying the first Postgres connection (with backoff) while the database is not reachable yet',
      default: '60',
      env: ['AGENTPLANE_DATABASE_WAIT_SECS'],
      path: 'databaseWaitSecs',
      schema: z.coerce.number().min(0).max(3600),
    },
    'lease-secs': {
      type: 'string',
      description: 'Seconds a run stays owned by a silent worker before another process retries it',
      default: '30',
      env: ['AGENTPLANE_LEASE_SECS'],
      path: 'leaseSecs',
      schema: z.coerce.number().min(1),
    },
    'executor-threads': {
      type: 'string',
      description:
        "Worker threads that execute graphs (0: on the main thread); default 1 when 2+ cores are usable (the cgroup CPU quota counts, not the node's cores)",
      env: ['AGENTPLANE_EXECUTOR_THREADS'],
      path: 'executorThreads',
      schema: z.coerce.number().int().min(0).max(64),
    },
    'executor-young-mb': {
      type: 'string',
      description:
        "V8 young generation of each executor thread, in MiB (0: V8's own, 48): a larger one lets a run's short-lived objects die before a scavenge copies them, for more memory; default 192 when the memory budget (the V8 heap limit, or 3/4 of the cgroup's memory limit if lower) is 3 GiB or more, 96 from 1.5 GiB, else V8's own",
      env: ['AGENTPLANE_EXECUTOR_YOUNG_MB'],
      path: 'executorYoungMb',
      schema: z.coerce.number().int().min(0).max(1024),
    },
    'executor-idle-secs': {
      type: 'string',
      description:
        'Seconds without a run after which the executor threads end, giving their memory back (the next run starts them again and runs inline meanwhile); 0: they stay',
      default: '30',
      env: ['AGENTPLANE_EXECUTOR_IDLE_SECS'],
      path: 'executorIdleSecs',
      schema: z.coerce.number().min(0).max(86_400),
    },
    'stream-retention': {
      type: 'string',
      description:
        "Seconds a run's stream events stay readable (joinStream, Last-Event-ID resumes) after its last event",
      default: '600',
      env: ['AGENTPLANE_STREAM_RETENTION_SECS'],
      path: 'streamRetentionSecs',
      schema: z.coerce
        .number()
        .min(1)
        .max(7 * 24 * 3600),
    },
    'redis-url': {
      type: 'string',
      description:
        "Redis URL (redis:// or rediss://) for runs' stream events (Redis Streams) instead of the Postgres " +
        'table or, without --database-url, process memory; every replica must use the same one',
      env: ['REDIS_URI'],
      path: 'redisUrl',
      schema: z
        .string()
        .regex(/^rediss?:\/\//, 'must start with redis:// or rediss://')
        .optional(),
    },
    'stream-stall-timeout': {
      type: 'string',
      description:
        'Seconds a stream client may go without reading before it is disconnected (it can resume with Last-Event-ID)',
      default: '60',
      env: ['AGENTPLANE_STREAM_STALL_SECS'],
      path: 'streamStallSecs',
      schema: z.coerce.number().min(1).max(3600),
    },
    'auth-keys-file': {
      type: 'string',
      description:
        'JSON file {"hashes": [sha256 hex of each accepted key]}: requests need one of those keys in X-Api-Key (re-read when it changes); without it the server is open',
      path: 'authKeysFile',
      schema: z.string().min(1).optional(),
    },
    'activity-token-file': {
      type: 'string',
      description:
        "File holding this deployment's activity token, set by the platform: GET /ok?activity=1 answers only with it in Authorization: Bearer (re-read on each ask); without it activity is not served",
      env: ['AGENTPLANE_ACTIVITY_TOKEN_FILE'],
      path: 'activityTokenFile',
      schema: z.string().min(1).optional(),
    },
    'deployment-token': {
      type: 'string',
      description:
        "This deployment's token, set by the platform: with --auth-keys-file, X-Api-Key also accepts the short-lived access tokens the control plane makes for this deployment",
      env: ['AGENTPLANE_DEPLOYMENT_TOKEN'],
      path: 'deploymentToken',
      schema: z.string().min(1).optional(),
      read: (v) => v || undefined,
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
      path: 'webhookAllow',
      schema: z.array(
        z
          .string()
          .min(1)
          .regex(/^(\*|(\*\.)?[A-Za-z0-9.:[\]-]+)$/, 'a host name, *.domain or *'),
      ),
      read: list,
    },
    'public-url': {
      type: 'string',
      description:
        "The deployment's URL as its clients reach it (https://host[/prefix]), named by the A2A agent cards; without " +
        'it the cards name the host each request came to (X-Forwarded-Proto/-Host of a proxy first)',
      env: ['AGENTPLANE_PUBLIC_AGENT_URL'],
      path: 'publicUrl',
      schema: z
        .string()
        .regex(/^https?:\/\/[^\s/?#]+(\/[^\s?#]*)?$/, 'must be an http(s) URL without query or fragment')
        .optional(),
      read: (v) => v || undefined,
    },
    'cron-poll-ms': {
      type: 'string',
      description: 'Milliseconds between two looks for due cron ticks (each tick runs once across all replicas)',
      default: '1000',
      env: ['AGENTPLANE_CRON_POLL_MS'],
      path: 'cronPollMs',
      schema: z.coerce.number().int().min(50).max(3_600_000),
    },
    'test-truncate': {
      type: 'boolean',
      description:
        'Serve POST /internal/truncate, which deletes every thread (with its runs and checkpoints), every assistant ' +
        "made through the API and every store item: for running an API test suite (the reference servers' own) " +
        'against this server, never for a deployment',
      env: ['AGENTPLANE_TEST_TRUNCATE'],
      path: 'testTruncate',
      schema: z.literal(true).optional(),
    },
    'log-level': {
      type: 'string',
      description: 'fatal, error, warn, info, debug, trace or silent',
      default: 'info',
      env: ['LOG_LEVEL'],
      path: 'logLevel',
      schema: z.enum(['fatal', 'error', 'warn', 'info', 'debug', 'trace', 'silent']),
      read: lower,
    },
  },
});

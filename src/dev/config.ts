// `agentplane dev` flags, parsed once with zod.
import { resolve } from 'node:path';
import { z } from 'zod';
import {
  configSchema,
  defineCommand,
  optionPicker,
  optionValues,
  parseCommandArgs,
  parseOptions,
  portSchema,
} from '../lib/cli-args.ts';
import { list } from '../lib/option-readers.ts';
import { githubAppOptions, githubAppSettingsFrom } from '../git/github-config.ts';
import type { GitHubAppSettings } from '../git/github-app.ts';
import { quotaLimitsFrom, quotaOptions } from '../control-plane/quota-options.ts';
import type { QuotaLimits } from '../control-plane/services/quotas.ts';
import { MIN_MEMORY_LIMIT_MB } from '../api/input-rules.ts';

const agentPortsSchema = z.union([
  z.literal('auto'),
  z
    .string()
    .regex(/^\d{1,5}-\d{1,5}$/, 'must be FROM-TO (two port numbers) or auto')
    .transform((v) => {
      const [from, to] = v.split('-').map(Number) as [number, number];
      return { from, to };
    })
    .refine((r) => r.from >= 1 && r.to <= 65535 && r.from <= r.to, 'must be a range of ports 1-65535, FROM <= TO'),
]);

const memoryLimitSchema = z.coerce
  .number()
  .int()
  .refine((mb) => mb === 0 || mb >= MIN_MEMORY_LIMIT_MB, {
    message: `must be 0 (none) or at least ${MIN_MEMORY_LIMIT_MB}: an agent server alone holds about 250 MB`,
  });

export const devCommand = defineCommand({
  name: 'dev',
  summary: 'Run the control plane, the operator and the local runtime in one process (no Kubernetes needed)',
  usage:
    'agentplane dev [--host 127.0.0.1] [--port 8080] [--agent-ports 8100-8999] [--data-dir DIR] [--database-url URL] [--sandbox auto|bwrap|none]\n' +
    '       (AGENTPLANE_BOOTSTRAP_API_KEY=<key> makes <key> an admin key for every tenant)',
  envOnly: { bootstrapKey: 'AGENTPLANE_BOOTSTRAP_API_KEY', idleMinuteMs: 'AGENTPLANE_IDLE_MINUTE_MS' },
  options: {
    host: {
      type: 'string',
      description: 'Address to listen on',
      default: '127.0.0.1',
      env: ['AGENTPLANE_HOST'],
      path: 'host',
      schema: z.string().min(1),
    },
    port: {
      type: 'string',
      short: 'p',
      description: 'TCP port of the API and the web console (0 picks a free one)',
      default: '8080',
      env: ['AGENTPLANE_PORT', 'PORT'],
      path: 'port',
      schema: portSchema,
    },
    'agent-ports': {
      type: 'string',
      description:
        "Ports deployments are served on, one each (never the console's origin): FROM-TO, or auto (free ports the system picks); a deployment keeps its port (its URL) for as long as it exists, never given to another",
      default: '8100-8999',
      env: ['AGENTPLANE_AGENT_PORTS'],
      path: 'agentPorts',
      schema: agentPortsSchema,
    },
    'data-dir': {
      type: 'string',
      description: "Where the control plane store, builds and deployments' embedded data live",
      default: './.agentplane',
      env: ['AGENTPLANE_DATA_DIR'],
      path: 'dataDir',
      schema: z.string().min(1),
    },
    'database-url': {
      type: 'string',
      description:
        "Postgres server for deployments' data (each deployment gets its own database and login role); embedded store otherwise",
      env: ['AGENTPLANE_DATABASE_URL'],
      path: 'databaseUrl',
      schema: z.string().url().optional(),
    },
    'health-timeout': {
      type: 'string',
      description: 'Seconds a new agent server may take to answer /ok',
      default: '60',
      path: 'healthTimeoutSecs',
      schema: z.coerce.number().positive(),
    },
    sandbox: {
      type: 'string',
      description:
        'Confine builds and agent servers: bwrap (bubblewrap, required), none (one trusted team), auto (bwrap when it works)',
      default: 'auto',
      env: ['AGENTPLANE_SANDBOX'],
      path: 'sandbox',
      schema: z.enum(['auto', 'bwrap', 'none']),
    },
    'sandbox-uid': {
      type: 'string',
      description:
        'When run as root: the uid (and gid) sandboxed builds and agent servers run as, never 0 (65534: nobody; give ' +
        'an id no other process uses to keep them apart from other daemons)',
      default: '65534',
      env: ['AGENTPLANE_SANDBOX_UID'],
      path: 'sandboxUid',
      schema: z.coerce.number().int().min(1).max(4294967294),
    },
    'allow-local-repos': {
      type: 'string',
      description:
        'Comma-separated folders a local path or file:// repo_url may come from (never the data dir); default: the current directory',
      env: ['AGENTPLANE_ALLOW_LOCAL_REPOS'],
      path: 'allowLocalRepos',
      schema: z.array(z.string().min(1)),
    },
    'build-timeout': {
      type: 'string',
      description: 'Seconds a build may take before it fails',
      default: '1800',
      path: 'buildTimeoutSecs',
      schema: z.coerce.number().positive(),
    },
    'keep-builds': {
      type: 'string',
      description: 'Build folders kept per deployment, newest first (the serving and the newest one always stay)',
      default: '5',
      path: 'keepBuilds',
      schema: z.coerce.number().int().min(0),
    },
    'install-cache-max-mb': {
      type: 'string',
      description: 'Size bound of the node_modules install cache (least recently used go first)',
      default: '2048',
      path: 'installCacheMaxMb',
      schema: z.coerce.number().int().min(0),
    },
    'max-concurrent-builds': {
      type: 'string',
      description: 'Builds running at once on this machine; waiting builds start in turn across workspaces',
      default: '2',
      env: ['AGENTPLANE_MAX_CONCURRENT_BUILDS'],
      path: 'maxConcurrentBuilds',
      schema: z.coerce.number().int().min(1),
    },
    'max-builds-per-workspace': {
      type: 'string',
      description:
        'Builds one workspace may run at once (default: half of --max-concurrent-builds, at least 1), so its slow builds never hold every slot',
      env: ['AGENTPLANE_MAX_BUILDS_PER_WORKSPACE'],
      path: 'maxBuildsPerWorkspace',
      schema: z.coerce.number().int().min(1).optional(),
    },
    'max-source-upload-mb-per-workspace': {
      type: 'string',
      description:
        'Bytes of uploaded source tarballs (langgraph deploy) one workspace may store; tarballs no revision builds any more do not count',
      default: '2048',
      env: ['AGENTPLANE_MAX_SOURCE_UPLOAD_MB_PER_WORKSPACE'],
      path: 'maxSourceUploadMbPerWorkspace',
      schema: z.coerce.number().int().min(1),
    },
    'max-source-uploads-per-workspace': {
      type: 'string',
      description: 'Uploaded source tarballs one workspace may store (same counting)',
      default: '100',
      env: ['AGENTPLANE_MAX_SOURCE_UPLOADS_PER_WORKSPACE'],
      path: 'maxSourceUploadsPerWorkspace',
      schema: z.coerce.number().int().min(1),
    },
    'max-concurrent-uploads': {
      type: 'string',
      description:
        'Source uploads received and checked at once on this machine; past it a PUT gets 429 with Retry-After',
      default: '4',
      env: ['AGENTPLANE_MAX_CONCURRENT_UPLOADS'],
      path: 'maxConcurrentUploads',
      schema: z.coerce.number().int().min(1),
    },
    'max-uploads-per-workspace': {
      type: 'string',
      description: 'Source uploads one workspace may have received and checked at once (429 past it)',
      default: '2',
      env: ['AGENTPLANE_MAX_UPLOADS_PER_WORKSPACE'],
      path: 'maxUploadsPerWorkspace',
      schema: z.coerce.number().int().min(1),
    },
    'default-memory-limit-mb': {
      type: 'string',
      description:
        'Memory limit of agent servers whose resource_spec names no memory_limit_mb (0 = none); see docs/local-runtime.md',
      default: '2048',
      env: ['AGENTPLANE_DEFAULT_MEMORY_LIMIT_MB'],
      path: 'defaultMemoryLimitMb',
      schema: memoryLimitSchema,
    },
    'max-processes': {
      type: 'string',
      description:
        "Processes one agent server's tree may hold at once (0 = no cap): the cgroup's pids.max when it has the pids controller, else a watchdog kills the tree",
      default: '512',
      env: ['AGENTPLANE_MAX_PROCESSES'],
      path: 'maxProcesses',
      schema: z.coerce.number().int().min(0),
    },
    'disk-limit-mb': {
      type: 'string',
      description:
        "Disk a deployment's writable folders (home, data, checkout) may hold while its server runs (0 = no bound); a watchdog kills the server past it",
      default: '4096',
      env: ['AGENTPLANE_DISK_LIMIT_MB'],
      path: 'diskLimitMb',
      schema: z.coerce.number().int().min(0),
    },
    'cgroup-parent': {
      type: 'string',
      description:
        "A delegated, writable cgroup v2 directory with memory (and cpu) in its cgroup.subtree_control: each agent server gets a cgroup below it with memory.max and cpu.max. Default: the process's own cgroup when usable, else rlimits and a memory watchdog",
      env: ['AGENTPLANE_CGROUP_PARENT'],
      path: 'cgroupParent',
      schema: z.string().min(1).optional(),
    },
    'agent-executor-threads': {
      type: 'string',
      description:
        "Executor threads of every agent server this process runs (their --executor-threads, winning over a deployment's own AGENTPLANE_EXECUTOR_THREADS); 0 runs graphs on each server's main thread, saving each server a thread's memory and start-up. Default: each server's own, 1 when it may use 2 or more CPUs",
      env: ['AGENTPLANE_AGENT_EXECUTOR_THREADS'],
      path: 'agentExecutorThreads',
      schema: z.coerce.number().int().min(0).max(64).optional(),
    },
    ...quotaOptions,
    'log-level': {
      type: 'string',
      description: 'fatal, error, warn, info, debug, trace or silent',
      default: 'info',
      env: ['LOG_LEVEL'],
      path: 'logLevel',
      schema: z.string(),
    },
    ...githubAppOptions,
  },
});

const schema = configSchema(devCommand.options).extend({
  // Environment only (devCommand.envOnly).
  /** Tests only (AGENTPLANE_IDLE_MINUTE_MS): how long one minute of an idle policy lasts, for idle windows of seconds. */
  idleMinuteMs: z.coerce.number().int().positive().optional(),
  bootstrapKey: z.string().min(16, 'must be at least 16 characters').optional(),
});
export type DevConfig = z.infer<typeof schema> & { github?: GitHubAppSettings; quotas?: QuotaLimits };

/** Flags win over environment variables, which win over defaults. Returns null for --help. */
export function parseDevConfig(argv: string[], env: NodeJS.ProcessEnv): DevConfig | null {
  const v = parseCommandArgs(devCommand, argv);
  if (v.help) return null;
  const pick = optionPicker(devCommand, v, env);
  const raw = {
    ...optionValues(devCommand, pick),
    dataDir: resolve(pick('data-dir')!),
    allowLocalRepos: list(pick('allow-local-repos') ?? process.cwd()).map((d) => resolve(d)),
    bootstrapKey: env.AGENTPLANE_BOOTSTRAP_API_KEY || undefined,
    idleMinuteMs: env.AGENTPLANE_IDLE_MINUTE_MS || undefined,
  };
  const parsed = parseOptions(devCommand, schema, raw, pick);
  const quotas = quotaLimitsFrom(pick);
  const github = githubAppSettingsFrom(pick, env);
  return github ? { ...parsed, quotas, github } : { ...parsed, quotas };
}

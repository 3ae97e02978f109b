// Agent server configuration: flags win over environment variables, which win over defaults. Parsed once.
import os from 'node:os';
import path from 'node:path';
import { z } from 'zod';
import { fromEnv, parseCommandArgs, portSchema, positiveIntSchema, UsageError, type CommandSpec } from '../lib/cli-args.ts';

export const agentServerCommand: CommandSpec = {
  name: 'agent-server',
  summary: 'Serve the graphs of a langgraph.json over the thread/run API (LangGraph SDK compatible)',
  usage: 'agentplane agent-server --config path/to/langgraph.json [options]',
  options: {
    config: { type: 'string', description: 'Path of langgraph.json', default: './langgraph.json', env: ['LANGGRAPH_CONFIG'] },
    host: { type: 'string', description: 'Address to listen on (0.0.0.0 for every interface)', default: '127.0.0.1', env: ['HOST'] },
    port: { type: 'string', short: 'p', description: 'TCP port (0 picks a free one)', default: '8000', env: ['PORT'] },
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
    'jobs-per-worker': { type: 'string', description: 'Runs executed concurrently by this process', default: '10', env: ['N_JOBS_PER_WORKER'] },
    'job-timeout': { type: 'string', description: 'Seconds a background run may take before it ends as timeout', default: '3600', env: ['BG_JOB_TIMEOUT_SECS'] },
    'shutdown-grace': {
      type: 'string',
      description: 'Seconds to let running runs finish on SIGTERM before they are returned to the queue',
      default: '20',
      env: ['SHUTDOWN_GRACE_SECS'],
    },
    'lease-secs': {
      type: 'string',
      description: 'Seconds a run stays owned by a silent worker before another process retries it',
      default: '30',
      env: ['AGENTPLANE_LEASE_SECS'],
    },
    'executor-threads': {
      type: 'string',
      description: 'Worker threads that execute graphs (0: on the main thread); default 1 when the machine has 2+ cores',
      env: ['AGENTPLANE_EXECUTOR_THREADS'],
    },
    'log-level': { type: 'string', description: 'fatal, error, warn, info, debug, trace or silent', default: 'info', env: ['LOG_LEVEL'] },
  },
};

const Config = z.object({
  configPath: z.string().min(1),
  host: z.string().min(1),
  port: portSchema,
  databaseUrl: z.string().regex(/^postgres(ql)?:\/\//, 'must start with postgres:// or postgresql://').optional(),
  dataDir: z.string().min(1),
  jobsPerWorker: positiveIntSchema,
  jobTimeoutSecs: positiveIntSchema,
  shutdownGraceSecs: z.coerce.number().min(0),
  leaseSecs: z.coerce.number().min(1),
  executorThreads: z.coerce.number().int().min(0).max(64),
  logLevel: z.enum(['fatal', 'error', 'warn', 'info', 'debug', 'trace', 'silent']),
});
export type AgentServerConfig = z.infer<typeof Config>;

/** Returns null when --help was asked for. */
export function parseAgentServerConfig(argv: string[], env: NodeJS.ProcessEnv, cwd = process.cwd()): AgentServerConfig | null {
  const flags = parseCommandArgs(agentServerCommand, argv);
  if (flags.help) return null;
  const pick = (name: string): string | undefined => {
    const o = agentServerCommand.options[name]!;
    const v = flags[name];
    return (typeof v === 'string' ? v : undefined) ?? fromEnv(env, o.env) ?? o.default;
  };
  const raw = {
    configPath: path.resolve(cwd, pick('config')!),
    host: pick('host'),
    port: pick('port'),
    databaseUrl: pick('database-url'),
    dataDir: path.resolve(cwd, pick('data-dir')!),
    jobsPerWorker: pick('jobs-per-worker'),
    jobTimeoutSecs: pick('job-timeout'),
    shutdownGraceSecs: pick('shutdown-grace'),
    leaseSecs: pick('lease-secs'),
    executorThreads: pick('executor-threads') ?? (os.availableParallelism() > 1 ? 1 : 0),
    logLevel: pick('log-level')?.toLowerCase(),
  };
  const parsed = Config.safeParse(raw);
  if (!parsed.success) {
    const names: Record<string, string> = {
      configPath: '--config', host: '--host', port: '--port', databaseUrl: '--database-url', dataDir: '--data-dir',
      jobsPerWorker: '--jobs-per-worker', jobTimeoutSecs: '--job-timeout', shutdownGraceSecs: '--shutdown-grace',
      leaseSecs: '--lease-secs', executorThreads: '--executor-threads',
      logLevel: '--log-level',
    };
    const msg = parsed.error.issues.map((i) => `${names[String(i.path[0])] ?? i.path.join('.')}: ${i.message}`).join('; ');
    throw new UsageError(msg);
  }
  return parsed.data;
}

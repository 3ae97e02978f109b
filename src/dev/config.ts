// `agentplane dev` flags, parsed once with zod.
import { resolve } from 'node:path';
import { z } from 'zod';
import { fromEnv, parseCommandArgs, portSchema, UsageError, type CommandSpec } from '../lib/cli-args.ts';

export const devCommand: CommandSpec = {
  name: 'dev',
  summary: 'Run the control plane, the operator and the local runtime in one process (no Kubernetes needed)',
  usage:
    'agentplane dev [--host 127.0.0.1] [--port 8080] [--data-dir DIR] [--database-url URL]\n' +
    '       (AGENTPLANE_BOOTSTRAP_API_KEY=<key> makes <key> an admin key for every tenant)',
  options: {
    host: { type: 'string', description: 'Address to listen on', default: '127.0.0.1', env: ['AGENTPLANE_HOST'] },
    port: { type: 'string', short: 'p', description: 'TCP port of the API and the deployment URLs (0 picks a free one)', default: '8080', env: ['AGENTPLANE_PORT'] },
    'data-dir': {
      type: 'string',
      description: 'Where the control plane store, builds and deployments\' embedded data live',
      default: './.agentplane',
      env: ['AGENTPLANE_DATA_DIR'],
    },
    'database-url': {
      type: 'string',
      description: 'Postgres server for deployments\' data (each deployment gets its own database); embedded store otherwise',
      env: ['AGENTPLANE_DATABASE_URL'],
    },
    'health-timeout': { type: 'string', description: 'Seconds a new agent server may take to answer /ok', default: '60' },
    'log-level': { type: 'string', description: 'fatal, error, warn, info, debug, trace or silent', default: 'info', env: ['LOG_LEVEL'] },
  },
};

const schema = z.object({
  host: z.string().min(1),
  port: portSchema,
  dataDir: z.string().min(1),
  databaseUrl: z.string().url().optional(),
  healthTimeoutSecs: z.coerce.number().positive(),
  logLevel: z.string(),
  bootstrapKey: z.string().min(16, 'must be at least 16 characters').optional(),
});
const FLAG_OF: Record<string, string> = {
  dataDir: 'data-dir',
  databaseUrl: 'database-url',
  healthTimeoutSecs: 'health-timeout',
  bootstrapKey: 'AGENTPLANE_BOOTSTRAP_API_KEY (environment)',
  logLevel: 'log-level',
};
export type DevConfig = z.infer<typeof schema>;

/** Flags win over environment variables, which win over defaults. Returns null for --help. */
export function parseDevConfig(argv: string[], env: NodeJS.ProcessEnv): DevConfig | null {
  const v = parseCommandArgs(devCommand, argv);
  if (v.help) return null;
  const pick = (name: string) => (v[name] as string | undefined) ?? fromEnv(env, devCommand.options[name]!.env) ?? devCommand.options[name]!.default;
  const parsed = schema.safeParse({
    host: pick('host'),
    port: pick('port'),
    dataDir: resolve(pick('data-dir')!),
    databaseUrl: pick('database-url'),
    healthTimeoutSecs: pick('health-timeout'),
    logLevel: pick('log-level'),
    bootstrapKey: env.AGENTPLANE_BOOTSTRAP_API_KEY || undefined,
  });
  if (!parsed.success) {
    const issue = parsed.error.issues[0]!;
    const flag = FLAG_OF[String(issue.path[0])] ?? String(issue.path[0]);
    throw new UsageError(`invalid ${flag.includes(' ') ? flag : `--${flag}`}: ${issue.message}`);
  }
  return parsed.data;
}

// Control plane configuration: flags win over environment variables, which win over defaults. Parsed once.
import path from 'node:path';
import { z } from 'zod';
import { fromEnv, parseCommandArgs, portSchema, UsageError, type CommandSpec, type OptionSpec } from '../lib/cli-args.ts';
import type { BootstrapKey } from './auth/keys.ts';

/** Store flags shared by `control-plane` and `api-key create`. */
export const storeOptions: Record<string, OptionSpec> = {
  store: {
    type: 'string',
    description: 'embedded (SQLite file under --data-dir) or kubernetes (AgentDeployment/AgentRevision custom resources)',
    default: 'embedded',
    env: ['AGENTPLANE_STORE'],
  },
  'data-dir': {
    type: 'string',
    description: 'Folder of the embedded store',
    default: './.agentplane/control-plane',
    env: ['AGENTPLANE_DATA_DIR'],
  },
  namespace: {
    type: 'string',
    description:
      'Namespace of every deployment (kubernetes store; tenants are told apart by the agentplane.dev/tenant label). ' +
      'Defaults to the pod namespace in a cluster',
    default: 'default',
    env: ['AGENTPLANE_NAMESPACE', 'POD_NAMESPACE'],
  },
  kubeconfig: {
    type: 'string',
    description: 'Kubeconfig file (kubernetes store); without it: in-cluster config, else the default kubeconfig',
    env: ['KUBECONFIG'],
  },
};

export const controlPlaneCommand: CommandSpec = {
  name: 'control-plane',
  summary: 'Serve the Deployments v2 API (also under /api-host) over the embedded or the kubernetes store',
  usage: 'agentplane control-plane [--host H] [--port 8080] [--store embedded|kubernetes] [--data-dir DIR] [--namespace NS]',
  options: {
    host: { type: 'string', description: 'Address to listen on (0.0.0.0 for every interface)', default: '127.0.0.1', env: ['HOST'] },
    port: { type: 'string', short: 'p', description: 'TCP port (0 picks a free one)', default: '8080', env: ['PORT'] },
    ...storeOptions,
    'bootstrap-api-key': {
      type: 'string',
      description: 'An admin API key (16+ characters) accepted without being stored (e.g. from a Kubernetes Secret); prefer the env var',
      env: ['AGENTPLANE_BOOTSTRAP_API_KEY'],
    },
    'bootstrap-tenants': {
      type: 'string',
      description: 'Comma-separated tenants the bootstrap key may act for; * = every tenant',
      default: '*',
      env: ['AGENTPLANE_BOOTSTRAP_TENANTS'],
    },
    'log-level': { type: 'string', description: 'fatal, error, warn, info, debug, trace or silent', default: 'info', env: ['LOG_LEVEL'] },
  },
};

const StoreConfig = z.object({
  store: z.enum(['embedded', 'kubernetes']),
  dataDir: z.string().min(1),
  namespace: z.string().regex(/^[a-z0-9]([-a-z0-9]*[a-z0-9])?$/, 'must be a Kubernetes namespace name'),
  kubeconfig: z.string().optional(),
});
export type StoreConfig = z.infer<typeof StoreConfig>;

const Config = StoreConfig.extend({
  host: z.string().min(1),
  port: portSchema,
  bootstrapKeys: z.array(z.object({ key: z.string().min(16, 'must be at least 16 characters'), tenants: z.array(z.string()).min(1) })),
  logLevel: z.enum(['fatal', 'error', 'warn', 'info', 'debug', 'trace', 'silent']),
});
export type ControlPlaneConfig = z.infer<typeof Config>;

const FLAG: Record<string, string> = {
  store: '--store', dataDir: '--data-dir', namespace: '--namespace', kubeconfig: '--kubeconfig', host: '--host',
  port: '--port', bootstrapKeys: '--bootstrap-api-key', logLevel: '--log-level',
};

export function picker(spec: CommandSpec, flags: Record<string, string | boolean | undefined>, env: NodeJS.ProcessEnv) {
  return (name: string): string | undefined => {
    const o = spec.options[name]!;
    const v = flags[name];
    return (typeof v === 'string' ? v : undefined) ?? fromEnv(env, o.env) ?? o.default;
  };
}

export function parseOrUsage<T>(schema: z.ZodType<T>, raw: unknown): T {
  const parsed = schema.safeParse(raw);
  if (parsed.success) return parsed.data;
  const i = parsed.error.issues[0]!;
  const key = String(i.path[0] ?? '');
  throw new UsageError(`${FLAG[key] ?? key}: ${i.message}`);
}

export function storeConfigFrom(pick: (n: string) => string | undefined, cwd: string) {
  return {
    store: pick('store'),
    dataDir: path.resolve(cwd, pick('data-dir')!),
    namespace: pick('namespace'),
    kubeconfig: pick('kubeconfig'),
  };
}

/** Returns null when --help was asked for. */
export function parseControlPlaneConfig(argv: string[], env: NodeJS.ProcessEnv, cwd = process.cwd()): ControlPlaneConfig | null {
  const flags = parseCommandArgs(controlPlaneCommand, argv);
  if (flags.help) return null;
  const pick = picker(controlPlaneCommand, flags, env);
  const key = pick('bootstrap-api-key');
  const tenants = (pick('bootstrap-tenants') ?? '*').split(',').map((t) => t.trim()).filter(Boolean);
  const bootstrapKeys: BootstrapKey[] = key ? [{ key, tenants }] : [];
  return parseOrUsage(Config, {
    ...storeConfigFrom(pick, cwd),
    host: pick('host'),
    port: pick('port'),
    bootstrapKeys,
    logLevel: pick('log-level')?.toLowerCase(),
  });
}

export { StoreConfig };

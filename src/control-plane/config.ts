// Control plane configuration: flags win over environment variables, which win over defaults. Parsed once.
import path from 'node:path';
import { z } from 'zod';
import {
  optionPicker,
  parseCommandArgs,
  portSchema,
  UsageError,
  type CommandSpec,
  type OptionSpec,
} from '../lib/cli-args.ts';
import type { BootstrapKey } from './auth/keys.ts';
import { parseAuthKeyring } from '../lib/auth-crypto.ts';
import { isDnsSubdomain } from '../resources/index.ts';
import { githubAppOptions, githubAppSettingsFrom } from '../git/github-config.ts';
import { quotaLimitsFrom, quotaOptions } from './quota-options.ts';
import { registryTokenOptions, registryTokensFrom } from './registry-token-options.ts';
import type { RegistryTokenOptions } from './services/registry-tokens/index.ts';
import type { QuotaLimits } from './services/quotas.ts';
import type { GitHubAppSettings } from '../git/github-app.ts';

/** Store flags shared by `control-plane` and `api-key create`. */
export const storeOptions: Record<string, OptionSpec> = {
  store: {
    type: 'string',
    description:
      'embedded (SQLite file under --data-dir) or kubernetes (AgentDeployment/AgentRevision custom resources)',
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
  'secret-key': {
    type: 'string',
    description:
      'Base64 of 32 bytes: the AES-256-GCM key of secret values in the embedded store (without it: <data dir>/secret.key, ' +
      'created on first use); every process sharing the data dir needs the same key. Prefer the env var',
    env: ['AGENTPLANE_SECRET_KEY'],
  },
};

export const controlPlaneCommand: CommandSpec = {
  name: 'control-plane',
  summary: 'Serve the Deployments v2 API (also under /api-host) over the embedded or the kubernetes store',
  usage:
    'agentplane control-plane [--host H] [--port 8080] [--store embedded|kubernetes] [--data-dir DIR] [--namespace NS]',
  options: {
    host: {
      type: 'string',
      description: 'Address to listen on (0.0.0.0 for every interface)',
      default: '127.0.0.1',
      env: ['HOST'],
    },
    port: { type: 'string', short: 'p', description: 'TCP port (0 picks a free one)', default: '8080', env: ['PORT'] },
    ...storeOptions,
    ...githubAppOptions,
    'bootstrap-api-key': {
      type: 'string',
      description:
        'An admin API key (16+ characters) accepted without being stored (e.g. from a Kubernetes Secret); prefer the env var',
      env: ['AGENTPLANE_BOOTSTRAP_API_KEY'],
    },
    'bootstrap-tenants': {
      type: 'string',
      description: 'Comma-separated tenants the bootstrap key may act for; * = every tenant',
      default: '*',
      env: ['AGENTPLANE_BOOTSTRAP_TENANTS'],
    },
    'max-scale': {
      type: 'string',
      description: 'Largest resource_spec.min_scale / max_scale a deployment may ask for',
      default: '10',
      env: ['AGENTPLANE_MAX_SCALE'],
    },
    'max-cpu': {
      type: 'string',
      description: 'Largest resource_spec.cpu / cpu_limit (cores) a deployment may ask for',
      default: '4',
      env: ['AGENTPLANE_MAX_CPU'],
    },
    'max-memory-mb': {
      type: 'string',
      description: 'Largest resource_spec.memory_mb / memory_limit_mb a deployment may ask for',
      default: '8192',
      env: ['AGENTPLANE_MAX_MEMORY_MB'],
    },
    ...quotaOptions,
    ...registryTokenOptions,
    'allowed-custom-domains': {
      type: 'string',
      description:
        'Comma-separated domains whose subdomains deployments may use as custom_url (e.g. agents.example.com); ' +
        '* = any host (one-team installs); empty = custom_url refused',
      env: ['AGENTPLANE_ALLOWED_CUSTOM_DOMAINS'],
    },
    'public-host': {
      type: 'string',
      description: "The control plane's own public host name, which no deployment may claim as custom_url",
      env: ['AGENTPLANE_PUBLIC_HOST'],
    },
    'namespace-per-tenant': {
      type: 'string',
      description:
        "true when the operator runs each tenant's agents in a namespace of its own (kubernetes store): tenants' API key Secrets go there",
      default: 'false',
      env: ['AGENTPLANE_NAMESPACE_PER_TENANT'],
    },
    'tenant-namespace-prefix': {
      type: 'string',
      description: 'Prefix of tenant namespaces (<prefix><tenant>), as the operator names them',
      default: 'agentplane-t-',
      env: ['AGENTPLANE_TENANT_NAMESPACE_PREFIX'],
    },
    'auth-encryption-keys': {
      type: 'string',
      description:
        'Keys of OAuth client secrets and tokens at rest (AES-256-GCM): id=base64-of-32-bytes[,older-id=...], the first ' +
        "encrypts, the others only decrypt (rotation). Without it: derived from the embedded store's secret key; the " +
        'kubernetes store needs it for the auth service. Prefer the env var',
      env: ['AGENTPLANE_AUTH_ENCRYPTION_KEYS'],
    },
    'deployment-token-key': {
      type: 'string',
      description:
        "Base64 of 32 bytes, the same as the operator's: checks the deployment tokens agents call the auth service with. Prefer the env var",
      env: ['AGENTPLANE_DEPLOYMENT_TOKEN_KEY'],
    },
    'public-url': {
      type: 'string',
      description:
        "The control plane's public base URL (e.g. https://agentplane.example.com): OAuth redirect URIs and sign-in links start with it. The auth service is off without it (required with --auth-encryption-keys)",
      env: ['AGENTPLANE_PUBLIC_URL'],
    },
    'auth-allow-private-providers': {
      type: 'string',
      description:
        'true: OAuth providers may be reached over http and at private, loopback or link-local addresses (one-machine installs only)',
      default: 'false',
      env: ['AGENTPLANE_AUTH_ALLOW_PRIVATE_PROVIDERS'],
    },
    'source-uploads-database-url': {
      type: 'string',
      description:
        'PostgreSQL URL where source tarballs `langgraph deploy` uploads are kept (every replica the same); without it ' +
        'upload URLs are refused with a 503. Prefer the env var',
      env: ['AGENTPLANE_SOURCE_UPLOADS_DATABASE_URL'],
    },
    'source-uploads-key': {
      type: 'string',
      description:
        "Base64 of 32 bytes, the same as the operator's: signs upload URLs and checks the fetch tokens cluster builds " +
        'download their tarball with. Required with --source-uploads-database-url. Prefer the env var',
      env: ['AGENTPLANE_SOURCE_UPLOADS_KEY'],
    },
    'log-level': {
      type: 'string',
      description: 'fatal, error, warn, info, debug, trace or silent',
      default: 'info',
      env: ['LOG_LEVEL'],
    },
  },
};

const secretKeySchema = z
  .string()
  .transform((s) => Buffer.from(s.trim(), 'base64'))
  .refine((b) => b.length === 32, 'must be the base64 of exactly 32 bytes (e.g. openssl rand -base64 32)');

const StoreConfig = z.object({
  store: z.enum(['embedded', 'kubernetes']),
  dataDir: z.string().min(1),
  namespace: z.string().regex(/^[a-z0-9]([-a-z0-9]*[a-z0-9])?$/, 'must be a Kubernetes namespace name'),
  kubeconfig: z.string().optional(),
  secretKey: secretKeySchema.optional(),
});

const domainSchema = z
  .string()
  .transform((d) =>
    d
      .toLowerCase()
      .replace(/^\*?\./, '')
      .replace(/\.$/, ''),
  )
  .refine((d) => d === '*' || isDnsSubdomain(d), 'each entry must be a domain name (like agents.example.com) or *');

const PolicyConfig = z.object({
  maxScale: z.coerce.number().int().min(1),
  maxCpu: z.coerce.number().positive(),
  maxMemoryMb: z.coerce.number().int().positive(),
  allowedCustomDomains: z.array(domainSchema),
  publicHost: z
    .string()
    .transform((h) => {
      const host = h.includes('://') ? (URL.canParse(h) ? new URL(h).hostname : h) : h.split(':')[0]!;
      return host.toLowerCase().replace(/\.$/, '');
    })
    .refine(isDnsSubdomain, 'must be a host name')
    .optional(),
});
export type StoreConfig = z.infer<typeof StoreConfig>;

const Config = StoreConfig.extend({
  host: z.string().min(1),
  port: portSchema,
  bootstrapKeys: z.array(
    z.object({ key: z.string().min(16, 'must be at least 16 characters'), tenants: z.array(z.string()).min(1) }),
  ),
  logLevel: z.enum(['fatal', 'error', 'warn', 'info', 'debug', 'trace', 'silent']),
  policy: PolicyConfig,
  auth: z.object({
    keyring: z
      .string()
      .transform((s, ctx) => {
        try {
          return parseAuthKeyring(s);
        } catch (err) {
          ctx.addIssue({ code: 'custom', message: (err as Error).message });
          return z.NEVER;
        }
      })
      .optional(),
    deploymentTokenKey: secretKeySchema.optional(),
    publicUrl: z
      .string()
      .url()
      .refine(
        (u) => /^https?:$/.test(new URL(u).protocol) && !new URL(u).search,
        'must be an http(s) URL without a query',
      )
      .transform((u) => u.replace(/\/+$/, ''))
      .optional(),
    allowPrivateProviders: z.enum(['true', 'false']).transform((v) => v === 'true'),
  }),
  /** Where uploaded source tarballs are kept and the key of their URLs and fetch tokens; none: uploads refused. */
  sourceUploads: z
    .object({ databaseUrl: z.string().regex(/^postgres(ql)?:\/\//, 'must be a postgres:// URL'), key: secretKeySchema })
    .optional(),
  /** Namespaces of tenants' agents (where their API key Secrets go) when each tenant has its own. */
  tenantNamespaces: z.object({
    enabled: z.enum(['true', 'false']).transform((v) => v === 'true'),
    prefix: z
      .string()
      .regex(/^[a-z0-9]([-a-z0-9]*)?$/, 'must start a Kubernetes namespace name')
      .max(40),
  }),
});
export type ControlPlaneConfig = z.infer<typeof Config> & {
  github?: GitHubAppSettings;
  quotas?: QuotaLimits;
  /** The build registry prefix (the operator's --registry), when given. */
  registry?: string;
  registryTokens?: RegistryTokenOptions;
};

const FLAG: Record<string, string> = {
  store: '--store',
  dataDir: '--data-dir',
  namespace: '--namespace',
  kubeconfig: '--kubeconfig',
  host: '--host',
  port: '--port',
  bootstrapKeys: '--bootstrap-api-key',
  logLevel: '--log-level',
  secretKey: '--secret-key (AGENTPLANE_SECRET_KEY)',
  maxScale: '--max-scale',
  maxCpu: '--max-cpu',
  maxMemoryMb: '--max-memory-mb',
  allowedCustomDomains: '--allowed-custom-domains',
  publicHost: '--public-host',
  enabled: '--namespace-per-tenant',
  prefix: '--tenant-namespace-prefix',
  keyring: '--auth-encryption-keys (AGENTPLANE_AUTH_ENCRYPTION_KEYS)',
  deploymentTokenKey: '--deployment-token-key (AGENTPLANE_DEPLOYMENT_TOKEN_KEY)',
  publicUrl: '--public-url',
  allowPrivateProviders: '--auth-allow-private-providers',
  databaseUrl: '--source-uploads-database-url (AGENTPLANE_SOURCE_UPLOADS_DATABASE_URL)',
  key: '--source-uploads-key (AGENTPLANE_SOURCE_UPLOADS_KEY)',
};

export function parseOrUsage<T>(schema: z.ZodType<T>, raw: unknown): T {
  const parsed = schema.safeParse(raw);
  if (parsed.success) return parsed.data;
  const i = parsed.error.issues[0]!;
  // Nested settings (policy.maxScale) are named by their own flag.
  const key = String(i.path.find((p) => typeof p === 'string' && FLAG[p]) ?? i.path[0] ?? '');
  throw new UsageError(`${FLAG[key] ?? key}: ${i.message}`);
}

export function storeConfigFrom(pick: (n: string) => string | undefined, cwd: string) {
  return {
    store: pick('store'),
    dataDir: path.resolve(cwd, pick('data-dir')!),
    namespace: pick('namespace'),
    kubeconfig: pick('kubeconfig'),
    secretKey: pick('secret-key'),
  };
}

/** Returns null when --help was asked for. */
export function parseControlPlaneConfig(
  argv: string[],
  env: NodeJS.ProcessEnv,
  cwd = process.cwd(),
): ControlPlaneConfig | null {
  const flags = parseCommandArgs(controlPlaneCommand, argv);
  if (flags.help) return null;
  const pick = optionPicker(controlPlaneCommand, flags, env);
  const key = pick('bootstrap-api-key');
  const tenants = (pick('bootstrap-tenants') ?? '*')
    .split(',')
    .map((t) => t.trim())
    .filter(Boolean);
  const bootstrapKeys: BootstrapKey[] = key ? [{ key, tenants }] : [];
  const github = githubAppSettingsFrom(pick, env);
  const quotas = quotaLimitsFrom(pick);
  const registry = registryTokensFrom(pick, cwd);
  const parsed = parseOrUsage(Config, {
    ...storeConfigFrom(pick, cwd),
    host: pick('host'),
    port: pick('port'),
    bootstrapKeys,
    logLevel: pick('log-level')?.toLowerCase(),
    policy: {
      maxScale: pick('max-scale'),
      maxCpu: pick('max-cpu'),
      maxMemoryMb: pick('max-memory-mb'),
      allowedCustomDomains: (pick('allowed-custom-domains') ?? '')
        .split(',')
        .map((d) => d.trim())
        .filter(Boolean),
      publicHost: pick('public-host'),
    },
    tenantNamespaces: { enabled: pick('namespace-per-tenant')?.toLowerCase(), prefix: pick('tenant-namespace-prefix') },
    ...(pick('source-uploads-database-url') || pick('source-uploads-key')
      ? { sourceUploads: { databaseUrl: pick('source-uploads-database-url'), key: pick('source-uploads-key') ?? '' } }
      : {}),
    auth: {
      keyring: pick('auth-encryption-keys'),
      deploymentTokenKey: pick('deployment-token-key'),
      publicUrl: pick('public-url'),
      allowPrivateProviders: pick('auth-allow-private-providers')?.toLowerCase(),
    },
  });
  // The auth service is on with explicit keys; its redirect URIs come only from --public-url, never a request's Host.
  if (parsed.auth.keyring && !parsed.auth.publicUrl)
    throw new UsageError(
      '--public-url is required with --auth-encryption-keys: OAuth redirect URIs are built from it (never from the Host header)',
    );
  return github ? { ...parsed, quotas, ...registry, github } : { ...parsed, quotas, ...registry };
}

export { StoreConfig };

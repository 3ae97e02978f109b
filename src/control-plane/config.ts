// Control plane configuration: flags win over environment variables, which win over defaults. Parsed once.
import path from 'node:path';
import { z } from 'zod';
import {
  configSchema,
  defineCommand,
  defineOptions,
  optionPicker,
  optionValues,
  parseCommandArgs,
  parseOptions,
  portSchema,
  UsageError,
  type CommandSpec,
  type OptionPicker,
} from '../lib/cli-args.ts';
import { list, lower } from '../lib/option-readers.ts';
import type { BootstrapKey } from './api-keys/keys.ts';
import { parseAuthKeyring } from '../lib/auth-crypto.ts';
import { isDnsSubdomain } from '../resources/index.ts';
import { githubAppOptions, githubAppSettingsFrom } from '../git/github-config.ts';
import { quotaLimitsFrom, quotaOptions } from './quota-options.ts';
import { registryTokenOptions, registryTokensFrom } from './registry-token-options.ts';
import type { RegistryTokenOptions } from './services/registry-tokens/index.ts';
import type { QuotaLimits } from './services/quotas.ts';
import type { GitHubAppSettings } from '../git/github-app.ts';

const secretKeySchema = z
  .string()
  .transform((s) => Buffer.from(s.trim(), 'base64'))
  .refine((b) => b.length === 32, 'must be the base64 of exactly 32 bytes (e.g. openssl rand -base64 32)');

const domainSchema = z
  .string()
  .transform((d) =>
    d
      .toLowerCase()
      .replace(/^\*?\./, '')
      .replace(/\.$/, ''),
  )
  .refine((d) => d === '*' || isDnsSubdomain(d), 'each entry must be a domain name (like agents.example.com) or *');

const hostSchema = z
  .string()
  .transform((h) => {
    const host = h.includes('://') ? (URL.canParse(h) ? new URL(h).hostname : h) : h.split(':')[0]!;
    return host.toLowerCase().replace(/\.$/, '');
  })
  .refine(isDnsSubdomain, 'must be a host name');

const authKeyringSchema = z.string().transform((s, ctx) => {
  try {
    return parseAuthKeyring(s);
  } catch (err) {
    ctx.addIssue({ code: 'custom', message: (err as Error).message });
    return z.NEVER;
  }
});

const publicUrlSchema = z
  .string()
  .url()
  .refine((u) => /^https?:$/.test(new URL(u).protocol) && !new URL(u).search, 'must be an http(s) URL without a query')
  .transform((u) => u.replace(/\/+$/, ''));

/** true or false (any case: the option's `read` lowers it). */
const booleanText = z.enum(['true', 'false']).transform((v) => v === 'true');

/** Store flags shared by `control-plane` and `api-key create`. */
export const storeOptions = defineOptions({
  store: {
    type: 'string',
    description:
      'embedded (SQLite file under --data-dir) or kubernetes (AgentDeployment/AgentRevision custom resources)',
    default: 'embedded',
    env: ['AGENTPLANE_STORE'],
    path: 'store',
    schema: z.enum(['embedded', 'kubernetes']),
  },
  'data-dir': {
    type: 'string',
    description: 'Folder of the embedded store',
    default: './.agentplane/control-plane',
    env: ['AGENTPLANE_DATA_DIR'],
    path: 'dataDir',
    schema: z.string().min(1),
  },
  namespace: {
    type: 'string',
    description:
      'Namespace of every deployment (kubernetes store; workspaces are told apart by the agentplane.dev/tenant label). ' +
      'Defaults to the pod namespace in a cluster',
    default: 'default',
    env: ['AGENTPLANE_NAMESPACE', 'POD_NAMESPACE'],
    path: 'namespace',
    schema: z.string().regex(/^[a-z0-9]([-a-z0-9]*[a-z0-9])?$/, 'must be a Kubernetes namespace name'),
  },
  kubeconfig: {
    type: 'string',
    description: 'Kubeconfig file (kubernetes store); without it: in-cluster config, else the default kubeconfig',
    env: ['KUBECONFIG'],
    path: 'kubeconfig',
    schema: z.string().optional(),
  },
  'secret-key': {
    type: 'string',
    description:
      'Base64 of 32 bytes: the AES-256-GCM key of secret values in the embedded store (without it: <data dir>/secret.key, ' +
      'created on first use); every process sharing the data dir needs the same key. Prefer the env var',
    env: ['AGENTPLANE_SECRET_KEY'],
    path: 'secretKey',
    schema: secretKeySchema.optional(),
  },
});

export const controlPlaneCommand = defineCommand({
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
      path: 'host',
      schema: z.string().min(1),
    },
    port: {
      type: 'string',
      short: 'p',
      description: 'TCP port (0 picks a free one)',
      default: '8080',
      env: ['PORT'],
      path: 'port',
      schema: portSchema,
    },
    ...storeOptions,
    ...githubAppOptions,
    'bootstrap-api-key': {
      type: 'string',
      description:
        'An admin API key (16+ characters) accepted without being stored (e.g. from a Kubernetes Secret); prefer the env var',
      env: ['AGENTPLANE_BOOTSTRAP_API_KEY'],
      path: 'bootstrapKeys',
      schema: z.array(
        z.object({ key: z.string().min(16, 'must be at least 16 characters'), tenants: z.array(z.string()).min(1) }),
      ),
    },
    'bootstrap-tenants': {
      type: 'string',
      description: 'Comma-separated workspaces the bootstrap key may act for; * = every workspace',
      default: '*',
      env: ['AGENTPLANE_BOOTSTRAP_TENANTS'],
    },
    'max-scale': {
      type: 'string',
      description: 'Largest resource_spec.min_scale / max_scale a deployment may ask for',
      default: '10',
      env: ['AGENTPLANE_MAX_SCALE'],
      path: 'policy.maxScale',
      schema: z.coerce.number().int().min(1),
    },
    'max-cpu': {
      type: 'string',
      description: 'Largest resource_spec.cpu / cpu_limit (cores) a deployment may ask for',
      default: '4',
      env: ['AGENTPLANE_MAX_CPU'],
      path: 'policy.maxCpu',
      schema: z.coerce.number().positive(),
    },
    'max-memory-mb': {
      type: 'string',
      description: 'Largest resource_spec.memory_mb / memory_limit_mb a deployment may ask for',
      default: '8192',
      env: ['AGENTPLANE_MAX_MEMORY_MB'],
      path: 'policy.maxMemoryMb',
      schema: z.coerce.number().int().positive(),
    },
    ...quotaOptions,
    ...registryTokenOptions,
    'allowed-custom-domains': {
      type: 'string',
      description:
        'Comma-separated domains whose subdomains deployments may use as custom_url (e.g. agents.example.com); ' +
        '* = any host (one-team installs); empty = custom_url refused',
      env: ['AGENTPLANE_ALLOWED_CUSTOM_DOMAINS'],
      path: 'policy.allowedCustomDomains',
      schema: z.array(domainSchema),
      read: list,
    },
    'public-host': {
      type: 'string',
      description: "The control plane's own public host name, which no deployment may claim as custom_url",
      env: ['AGENTPLANE_PUBLIC_HOST'],
      path: 'policy.publicHost',
      schema: hostSchema.optional(),
    },
    'namespace-per-tenant': {
      type: 'string',
      description:
        "true when the operator runs each workspace's agents in a namespace of its own (kubernetes store): workspaces' API key Secrets go there",
      default: 'false',
      env: ['AGENTPLANE_NAMESPACE_PER_TENANT'],
      path: 'tenantNamespaces.enabled',
      schema: booleanText,
      read: lower,
    },
    'tenant-namespace-prefix': {
      type: 'string',
      description: 'Prefix of workspace namespaces (<prefix><workspace id>), as the operator names them',
      default: 'agentplane-t-',
      env: ['AGENTPLANE_TENANT_NAMESPACE_PREFIX'],
      path: 'tenantNamespaces.prefix',
      schema: z
        .string()
        .regex(/^[a-z0-9]([-a-z0-9]*)?$/, 'must start a Kubernetes namespace name')
        .max(40),
    },
    'auth-encryption-keys': {
      type: 'string',
      description:
        'Keys of OAuth client secrets and tokens at rest (AES-256-GCM): id=base64-of-32-bytes[,older-id=...], the first ' +
        "encrypts, the others only decrypt (rotation). Without it: derived from the embedded store's secret key; the " +
        'kubernetes store needs it for the auth service. Prefer the env var',
      env: ['AGENTPLANE_AUTH_ENCRYPTION_KEYS'],
      path: 'auth.keyring',
      schema: authKeyringSchema.optional(),
    },
    'deployment-token-key': {
      type: 'string',
      description:
        "Base64 of 32 bytes, the same as the operator's: checks the deployment tokens agents call the auth service with. Prefer the env var",
      env: ['AGENTPLANE_DEPLOYMENT_TOKEN_KEY'],
      path: 'auth.deploymentTokenKey',
      schema: secretKeySchema.optional(),
    },
    'public-url': {
      type: 'string',
      description:
        "The control plane's public base URL (e.g. https://agentplane.example.com): OAuth redirect URIs and sign-in links start with it. The auth service is off without it (required with --auth-encryption-keys)",
      env: ['AGENTPLANE_PUBLIC_URL'],
      path: 'auth.publicUrl',
      schema: publicUrlSchema.optional(),
    },
    'auth-allow-private-providers': {
      type: 'string',
      description:
        'true: OAuth providers may be reached over http and at private, loopback or link-local addresses (one-machine installs only)',
      default: 'false',
      env: ['AGENTPLANE_AUTH_ALLOW_PRIVATE_PROVIDERS'],
      path: 'auth.allowPrivateProviders',
      schema: booleanText,
      read: lower,
    },
    'source-uploads-database-url': {
      type: 'string',
      description:
        'PostgreSQL URL where source tarballs `langgraph deploy` uploads are kept (every replica the same); without it ' +
        'upload URLs are refused with a 503. Prefer the env var',
      env: ['AGENTPLANE_SOURCE_UPLOADS_DATABASE_URL'],
      path: 'sourceUploads.databaseUrl',
      schema: z.string().regex(/^postgres(ql)?:\/\//, 'must be a postgres:// URL'),
    },
    'source-uploads-key': {
      type: 'string',
      description:
        "Base64 of 32 bytes, the same as the operator's: signs upload URLs and checks the fetch tokens cluster builds " +
        'download their tarball with. Required with --source-uploads-database-url. Prefer the env var',
      env: ['AGENTPLANE_SOURCE_UPLOADS_KEY'],
      path: 'sourceUploads.key',
      schema: secretKeySchema,
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

const StoreConfig = configSchema(storeOptions);
export type StoreConfig = z.infer<typeof StoreConfig>;

const optionsSchema = configSchema(controlPlaneCommand.options);
const Config = optionsSchema.extend({
  /** Where uploaded source tarballs are kept and the key of their URLs and fetch tokens; none: uploads refused. */
  sourceUploads: optionsSchema.shape.sourceUploads.optional(),
});
export type ControlPlaneConfig = z.infer<typeof Config> & {
  github?: GitHubAppSettings;
  quotas?: QuotaLimits;
  /** The build registry prefix (the operator's --registry), when given. */
  registry?: string;
  registryTokens?: RegistryTokenOptions;
};

/** The store settings of a command with storeOptions, checked; a problem names its flag. */
export function parseStoreConfig(spec: CommandSpec, pick: OptionPicker, cwd: string): StoreConfig {
  const raw = { ...optionValues(spec, pick), dataDir: path.resolve(cwd, pick('data-dir')!) };
  return parseOptions(spec, StoreConfig, raw, pick, '');
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
  const raw = optionValues(controlPlaneCommand, pick);
  // What no single flag decides: the bootstrap key with its tenants, the upload settings only together.
  const key = pick('bootstrap-api-key');
  const bootstrapKeys: BootstrapKey[] = key ? [{ key, tenants: list(pick('bootstrap-tenants') ?? '*') }] : [];
  const uploads = raw.sourceUploads as { databaseUrl?: string; key?: string };
  const github = githubAppSettingsFrom(pick, env);
  const quotas = quotaLimitsFrom(pick);
  const registry = registryTokensFrom(pick, cwd);
  const parsed = parseOptions(
    controlPlaneCommand,
    Config,
    {
      ...raw,
      dataDir: path.resolve(cwd, pick('data-dir')!),
      bootstrapKeys,
      sourceUploads: uploads.databaseUrl || uploads.key ? { ...uploads, key: uploads.key ?? '' } : undefined,
    },
    pick,
    '',
  );
  // The auth service is on with explicit keys; its redirect URIs come only from --public-url, never a request's Host.
  if (parsed.auth.keyring && !parsed.auth.publicUrl)
    throw new UsageError(
      '--public-url is required with --auth-encryption-keys: OAuth redirect URIs are built from it (never from the Host header)',
    );
  return github ? { ...parsed, quotas, ...registry, github } : { ...parsed, quotas, ...registry };
}

// `agentplane operator` configuration: the flags of flags.ts (each with the env var the Helm chart sets), parsed once
// with zod.
import { hostname } from 'node:os';
import { z } from 'zod';
import { optionPicker, parseCommandArgs, UsageError } from '../lib/cli-args.ts';
import { sourceFetchKey } from '../lib/source-fetch-token.ts';
import { kubernetesRuntimeConfigSchema } from './runtimes/kubernetes/config.ts';
import { githubAppSettingsFrom } from '../git/github-config.ts';
import { operatorCommand } from './flags.ts';
import type { GitHubAppSettings } from '../git/github-app.ts';
import { listenerConnectionFields } from '../api/listener-connection.ts';

const name = z.string().regex(/^[a-z0-9]([-a-z0-9]*[a-z0-9])?$/, 'must be a Kubernetes name');
const schema = z.object({
  namespace: name,
  kubeconfig: z.string().optional(),
  runtime: kubernetesRuntimeConfigSchema,
  leaderElect: z.enum(['true', 'false']).transform((v) => v === 'true'),
  leaseName: name,
  leaseNamespace: name,
  leaseDurationMs: z.coerce
    .number()
    .int()
    .min(2)
    .transform((s) => s * 1000),
  identity: z.string().min(1),
  logLevel: z.enum(['fatal', 'error', 'warn', 'info', 'debug', 'trace', 'silent']),
  /** undefined: no probe endpoint. */
  healthPort: z.coerce.number().int().min(0).max(65535).optional(),
});
/** Where a data-plane-only operator asks for clone tokens: the listener's control plane, with its key. */
export type OperatorListenerSettings = { controlPlaneUrl: string; tenant: string; listenerId: string; apiKey: string };

/**
 * `github`: the control plane's GitHub App, to mint a token for each build of a GitHub integration. `listener`: in a
 * data-plane-only install, the listener's control plane mints them instead (the cluster holds no integrations).
 */
export type OperatorConfig = z.infer<typeof schema> & {
  github?: GitHubAppSettings;
  listener?: OperatorListenerSettings;
};

const FLAG: Record<string, string> = {
  leaderElect: '--leader-elect',
  leaseName: '--lease-name',
  leaseNamespace: '--lease-namespace',
  leaseDurationMs: '--lease-duration',
  logLevel: '--log-level',
  healthPort: '--health-port',
  registry: '--registry',
  buildNamespace: '--build-namespace',
  buildTimeoutSeconds: '--build-timeout',
  buildJobTtlSeconds: '--build-job-ttl',
  progressDeadlineSeconds: '--progress-deadline',
  crashLoopRestarts: '--crash-loop-restarts',
  clusterDomain: '--cluster-domain',
  imagePullSecrets: '--image-pull-secrets',
  cpu: '--default-cpu',
  memoryMb: '--default-memory-mb',
  baseDomain: '--base-domain',
  storageSize: '--postgres-storage',
  mode: '--postgres-mode',
  allowedCustomDomains: '--allowed-custom-domains',
  tlsSecretPerIngress: '--ingress-tls-per-ingress',
  annotations: '--ingress-annotations',
  'runtime.gateway.annotations': '--gateway-annotations',
  parentRefs: '--gateway-parent-refs',
  'runtime.gateway.https': '--gateway-https',
  maxScale: '--max-scale',
  maxCpu: '--max-cpu',
  maxMemoryMb: '--max-memory-mb',
  enabled: '--network-policy',
  ingressNamespaceSelector: '--ingress-namespace-selector',
  agentEgressExceptCidrs: '--agent-egress-except',
  buildEgressExceptCidrs: '--build-egress-except',
  dnsPeers: '--dns-peers',
  dnsPorts: '--dns-ports',
  agentIngressFrom: '--agent-ingress-from',
  buildWorkspaceSize: '--build-workspace-size',
  buildCacheSize: '--build-cache-size',
  prefix: '--tenant-namespace-prefix',
  'runtime.tenantNamespaces.enabled': '--namespace-per-tenant',
  keysWriter: '--tenant-keys-writer',
  activator: '--activator-service',
  checkSeconds: '--idle-check-interval',
  podUrl: '--agent-activity-url',
  keysRole: '--tenant-keys-role',
  operatorAccount: '--tenant-operator-account',
  operatorRole: '--tenant-operator-role',
  podSecurity: '--tenant-pod-security',
  resourceQuota: '--tenant-resource-quota',
  limitRange: '--tenant-limit-range',
  'runtime.networkPolicy.enabled': '--network-policy',
  controlPlaneUrl: '--control-plane-url',
  tokenKey: '--deployment-token-key',
  'runtime.sourceFetch.url': '--source-fetch-url',
  'runtime.sourceFetch.tokenKey': '--source-uploads-key',
  'runtime.sourceFetch.peer': '--source-fetch-peer',
  'runtime.buildResources.requests.cpu': '--build-cpu-request',
  'runtime.buildResources.requests.memory': '--build-memory-request',
  'runtime.buildResources.limits.cpu': '--build-cpu-limit',
  'runtime.buildResources.limits.memory': '--build-memory-limit',
};

const list = (v: string | undefined): string[] =>
  (v ?? '')
    .split(',')
    .map((x) => x.trim())
    .filter(Boolean);

/** `k=v,k2=v2` to a label map; a malformed entry is kept as a key zod then refuses. */
function labelMap(v: string | undefined): Record<string, string> | string {
  const out: Record<string, string> = {};
  for (const term of list(v)) {
    const eq = term.indexOf('=');
    if (eq <= 0) return `"${term}" is not key=value`;
    out[term.slice(0, eq)] = term.slice(eq + 1);
  }
  return out;
}

/** `namespace/name` to an object reference; anything else stays a string for zod to refuse. */
function objectRef(v: string | undefined): { namespace: string; name: string } | string | undefined {
  const m = v === undefined ? null : /^([a-z0-9][-a-z0-9]*)\/([a-z0-9][-a-z0-9.]*)$/.exec(v);
  return v === undefined ? undefined : m ? { namespace: m[1]!, name: m[2]! } : v;
}

/** A JSON flag (Helm's toJson of a values map or list): parsed here, its shape checked by zod. */
/** The Gateway API settings: present only when parent Gateways are named (the others alone change nothing). */
function gatewayOf(pick: (flag: string) => string | undefined) {
  const parentRefs = jsonFlag('gateway-parent-refs', pick('gateway-parent-refs'));
  if (parentRefs === undefined) return undefined;
  return {
    parentRefs,
    annotations: jsonFlag('gateway-annotations', pick('gateway-annotations')),
    https: boolFlag(pick('gateway-https')),
  };
}

function jsonFlag(flag: string, v: string | undefined): unknown {
  if (v === undefined || v.trim() === '') return undefined;
  try {
    return JSON.parse(v);
  } catch (err) {
    throw new UsageError(`invalid --${flag}: not JSON (${(err as Error).message})`);
  }
}

/** "true"/"false" to a boolean; anything else stays a string for zod to refuse. */
function boolFlag(v: string | undefined): boolean | string | undefined {
  return v === 'true' ? true : v === 'false' ? false : v;
}

/** Both settings or neither: one without the other is a usage error. */
function agentAuthOf(url: string | undefined, key: string | undefined) {
  if (!url && !key) return {};
  if (!url || !key) throw new UsageError('--control-plane-url and --deployment-token-key go together');
  return { agentAuth: { controlPlaneUrl: url, tokenKey: Buffer.from(key.trim(), 'base64') } };
}

/** --source-fetch-url and --source-uploads-key together (or neither): the fetch tokens' key is derived here. */
function sourceFetchOf(url: string | undefined, key: string | undefined, peer: unknown) {
  if (!url && !key) return {};
  if (!url || !key) throw new UsageError('--source-fetch-url and --source-uploads-key go together');
  const raw = Buffer.from(key.trim(), 'base64');
  if (raw.length !== 32) throw new UsageError('--source-uploads-key: must be the base64 of exactly 32 bytes');
  return { sourceFetch: { url: url.replace(/\/+$/, ''), tokenKey: sourceFetchKey(raw), ...(peer ? { peer } : {}) } };
}

/** All four --listener-* settings or none, checked as `agentplane listener` checks its own. */
function listenerOf(pick: (name: string) => string | undefined): { listener?: OperatorListenerSettings } {
  const flags = {
    controlPlaneUrl: 'listener-control-plane-url',
    tenant: 'listener-tenant',
    listenerId: 'listener-id',
    apiKey: 'listener-api-key',
  } as const;
  const given = Object.fromEntries(Object.entries(flags).map(([k, flag]) => [k, pick(flag)?.trim() || undefined]));
  const missing = Object.entries(flags).filter(([k]) => given[k] === undefined);
  if (missing.length === Object.keys(flags).length) return {};
  const names = Object.values(flags).map((n) => `--${n}`);
  if (missing.length)
    throw new UsageError(`${names.join(', ')} go together (missing: ${missing.map(([, n]) => `--${n}`).join(', ')})`);
  const parsed = z.object(listenerConnectionFields).safeParse(given);
  if (!parsed.success) {
    const issue = parsed.error.issues[0]!;
    throw new UsageError(`invalid --${flags[issue.path[0] as keyof typeof flags]}: ${issue.message}`);
  }
  return { listener: parsed.data };
}

/** Returns null for --help. */
export function parseOperatorConfig(argv: string[], env: NodeJS.ProcessEnv): OperatorConfig | null {
  const flags = parseCommandArgs(operatorCommand, argv);
  if (flags.help) return null;
  const pick = optionPicker(operatorCommand, flags, env);
  const num = (n: string) => (pick(n) === undefined ? undefined : Number(pick(n)));
  const namespace = pick('namespace');
  const baseImage = pick('base-image');
  const parsed = schema.safeParse({
    namespace,
    kubeconfig: pick('kubeconfig'),
    runtime: {
      registry: pick('registry') ?? '',
      buildNamespace: pick('build-namespace') || undefined,
      pushSecretName: pick('push-secret'),
      buildPullSecretName: pick('build-pull-secret'),
      gitCredentialsSecretPrefix: pick('git-credentials-prefix'),
      buildImage: pick('build-image'),
      pushImage: pick('push-image'),
      buildResources: {
        requests: { cpu: pick('build-cpu-request'), memory: pick('build-memory-request') },
        limits: { cpu: pick('build-cpu-limit'), memory: pick('build-memory-limit') },
      },
      buildWorkspaceSize: pick('build-workspace-size'),
      buildCacheSize: pick('build-cache-size'),
      tenantNamespaces: {
        enabled: boolFlag(pick('namespace-per-tenant')),
        prefix: pick('tenant-namespace-prefix'),
        keysWriter: objectRef(pick('tenant-keys-writer')),
        keysRole: pick('tenant-keys-role'),
        operatorAccount: objectRef(pick('tenant-operator-account')),
        operatorRole: pick('tenant-operator-role'),
        podSecurity: pick('tenant-pod-security'),
        resourceQuota: jsonFlag('tenant-resource-quota', pick('tenant-resource-quota')),
        limitRange: jsonFlag('tenant-limit-range', pick('tenant-limit-range')),
      },
      limits: { maxScale: num('max-scale'), maxCpu: num('max-cpu'), maxMemoryMb: num('max-memory-mb') },
      networkPolicy: {
        enabled: boolFlag(pick('network-policy')),
        ingressNamespaceSelector: labelMap(pick('ingress-namespace-selector')),
        agentEgressExceptCidrs: pick('agent-egress-except') === 'none' ? [] : list(pick('agent-egress-except')),
        buildEgressExceptCidrs: pick('build-egress-except') === 'none' ? [] : list(pick('build-egress-except')),
        dnsPeers: jsonFlag('dns-peers', pick('dns-peers')),
        dnsPorts: pick('dns-ports') === undefined ? undefined : list(pick('dns-ports')).map(Number),
        agentIngressFrom: jsonFlag('agent-ingress-from', pick('agent-ingress-from')),
      },
      baseImage,
      gitImage: pick('git-image') ?? baseImage,
      buildTimeoutSeconds: num('build-timeout'),
      buildJobTtlSeconds: num('build-job-ttl'),
      progressDeadlineSeconds: num('progress-deadline'),
      crashLoopRestarts: num('crash-loop-restarts'),
      clusterDomain: pick('cluster-domain') ?? '',
      imagePullSecrets: list(pick('image-pull-secrets')),
      ingress: {
        className: pick('ingress-class'),
        baseDomain: pick('base-domain'),
        tlsSecretName: pick('ingress-tls-secret'),
        tlsSecretPerIngress: boolFlag(pick('ingress-tls-per-ingress')),
        annotations: jsonFlag('ingress-annotations', pick('ingress-annotations')),
        allowedCustomDomains: list(pick('allowed-custom-domains')).map((d) => d.replace(/^\*?\.+/, '').toLowerCase()),
      },
      gateway: gatewayOf(pick),
      postgres: {
        mode: pick('postgres-mode'),
        image: pick('postgres-image'),
        storageSize: pick('postgres-storage'),
        storageClassName: pick('postgres-storage-class'),
      },
      defaults: { cpu: num('default-cpu'), memoryMb: num('default-memory-mb') },
      idle: {
        activator: objectRef(pick('activator-service')),
        checkSeconds: num('idle-check-interval'),
        podUrl: pick('agent-activity-url'),
      },
      ...agentAuthOf(pick('control-plane-url'), pick('deployment-token-key')),
      ...sourceFetchOf(
        pick('source-fetch-url'),
        pick('source-uploads-key'),
        jsonFlag('source-fetch-peer', pick('source-fetch-peer')),
      ),
    },
    leaderElect: pick('leader-elect'),
    leaseName: pick('lease-name'),
    leaseNamespace: pick('lease-namespace') ?? namespace,
    leaseDurationMs: pick('lease-duration'),
    identity: pick('identity') ?? `${hostname()}-${process.pid}`,
    logLevel: pick('log-level')?.toLowerCase(),
    healthPort: pick('health-port') === 'off' ? undefined : pick('health-port'),
  });
  if (!parsed.success) {
    const issue = parsed.error.issues[0]!;
    const key = String(issue.path.at(-1));
    const path = issue.path.map(String);
    // Array items (CIDRs, domains, peers) report their index and inner fields last: name the deepest known flag.
    const named =
      FLAG[path.join('.')] ??
      path
        .toReversed()
        .map((p) => FLAG[p])
        .find(Boolean);
    throw new UsageError(`invalid ${named ?? `--${key}`}: ${issue.message}`);
  }
  const github = githubAppSettingsFrom(pick, env);
  return { ...parsed.data, ...(github ? { github } : {}), ...listenerOf(pick) };
}

// `agentplane operator` flags (each with the env var the Helm chart sets), parsed once with zod.
import { hostname } from 'node:os';
import { z } from 'zod';
import { fromEnv, parseCommandArgs, UsageError, type CommandSpec } from '../lib/cli-args.ts';
import { kubernetesRuntimeConfigSchema, type KubernetesRuntimeConfig } from './runtimes/kubernetes/config.ts';

export const operatorCommand: CommandSpec = {
  name: 'operator',
  summary: 'Reconcile AgentDeployment/AgentRevision custom resources into build Jobs and agent-server Deployments',
  usage: 'agentplane operator [--namespace NS] [--kubeconfig FILE] [--registry REPO] [--push-secret NAME] [options]',
  options: {
    namespace: { type: 'string', description: 'Namespace of the AgentDeployments and of everything built for them', default: 'default', env: ['AGENTPLANE_NAMESPACE', 'POD_NAMESPACE'] },
    kubeconfig: { type: 'string', description: 'Kubeconfig file; without it: in-cluster config, else the default kubeconfig', env: ['KUBECONFIG'] },
    registry: { type: 'string', description: 'Repository prefix source builds push to (e.g. registry.example.com/agents); empty: only external_docker', env: ['AGENTPLANE_REGISTRY'] },
    'push-secret': { type: 'string', description: 'dockerconfigjson Secret BuildKit pushes with', env: ['AGENTPLANE_PUSH_SECRET'] },
    'build-image': { type: 'string', description: 'BuildKit rootless image', default: 'moby/buildkit:v0.16.0-rootless', env: ['AGENTPLANE_BUILD_IMAGE'] },
    'base-image': { type: 'string', description: 'Image generated agent Dockerfiles build FROM (the agentplane image)', default: 'ghcr.io/agentplane/agentplane:0.1.0', env: ['AGENTPLANE_BASE_IMAGE'] },
    'git-image': { type: 'string', description: 'Image with git for the clone step (default: the base image)', env: ['AGENTPLANE_GIT_IMAGE'] },
    'build-timeout': { type: 'string', description: 'Seconds a build may take', default: '1800', env: ['AGENTPLANE_BUILD_TIMEOUT'] },
    'ingress-class': { type: 'string', description: 'IngressClass of agent Ingresses', env: ['AGENTPLANE_INGRESS_CLASS'] },
    'base-domain': { type: 'string', description: 'Serve deployments without custom_url at <name>.<base-domain>', env: ['AGENTPLANE_BASE_DOMAIN'] },
    'ingress-tls-secret': { type: 'string', description: 'TLS Secret for agent Ingresses', env: ['AGENTPLANE_INGRESS_TLS_SECRET'] },
    'default-cpu': { type: 'string', description: 'CPU request (cores) when resource_spec has none', default: '0.5', env: ['AGENTPLANE_DEFAULT_CPU'] },
    'default-memory-mb': { type: 'string', description: 'Memory request (MiB) when resource_spec has none', default: '512', env: ['AGENTPLANE_DEFAULT_MEMORY_MB'] },
    'progress-deadline': { type: 'string', description: 'Seconds a rollout may stall before DEPLOY_FAILED', default: '600', env: ['AGENTPLANE_PROGRESS_DEADLINE'] },
    'postgres-mode': { type: 'string', description: 'auto: own Postgres StatefulSet for deployments without DATABASE_URI; external: require DATABASE_URI', default: 'auto', env: ['AGENTPLANE_POSTGRES_MODE'] },
    'postgres-image': { type: 'string', description: 'Image of per-deployment Postgres', default: 'postgres:16-alpine', env: ['AGENTPLANE_POSTGRES_IMAGE'] },
    'postgres-storage': { type: 'string', description: 'PVC size of per-deployment Postgres', default: '1Gi', env: ['AGENTPLANE_POSTGRES_STORAGE'] },
    'postgres-storage-class': { type: 'string', description: 'StorageClass of per-deployment Postgres', env: ['AGENTPLANE_POSTGRES_STORAGE_CLASS'] },
    'leader-elect': { type: 'string', description: 'true: act only while holding the Lease (needed with more than one replica)', default: 'false', env: ['AGENTPLANE_LEADER_ELECT'] },
    'lease-name': { type: 'string', description: 'Lease used for leader election', default: 'agentplane-operator', env: ['AGENTPLANE_LEASE_NAME'] },
    'lease-namespace': { type: 'string', description: 'Namespace of the Lease (default: the pod namespace, else --namespace)', env: ['POD_NAMESPACE'] },
    'lease-duration': { type: 'string', description: 'Seconds a silent leader keeps the Lease', default: '15', env: ['AGENTPLANE_LEASE_DURATION'] },
    identity: { type: 'string', description: 'Name of this replica in the Lease', env: ['POD_NAME'] },
    'log-level': { type: 'string', description: 'fatal, error, warn, info, debug, trace or silent', default: 'info', env: ['LOG_LEVEL'] },
  },
};

const name = z.string().regex(/^[a-z0-9]([-a-z0-9]*[a-z0-9])?$/, 'must be a Kubernetes name');
const schema = z.object({
  namespace: name,
  kubeconfig: z.string().optional(),
  runtime: kubernetesRuntimeConfigSchema,
  leaderElect: z.enum(['true', 'false']).transform((v) => v === 'true'),
  leaseName: name,
  leaseNamespace: name,
  leaseDurationMs: z.coerce.number().int().min(2).transform((s) => s * 1000),
  identity: z.string().min(1),
  logLevel: z.enum(['fatal', 'error', 'warn', 'info', 'debug', 'trace', 'silent']),
});
export type OperatorConfig = z.infer<typeof schema>;

const FLAG: Record<string, string> = {
  leaderElect: '--leader-elect', leaseName: '--lease-name', leaseNamespace: '--lease-namespace', leaseDurationMs: '--lease-duration',
  logLevel: '--log-level', registry: '--registry', buildTimeoutSeconds: '--build-timeout', progressDeadlineSeconds: '--progress-deadline',
  cpu: '--default-cpu', memoryMb: '--default-memory-mb', baseDomain: '--base-domain', storageSize: '--postgres-storage', mode: '--postgres-mode',
};

/** Returns null for --help. */
export function parseOperatorConfig(argv: string[], env: NodeJS.ProcessEnv): OperatorConfig | null {
  const flags = parseCommandArgs(operatorCommand, argv);
  if (flags.help) return null;
  const pick = (n: string): string | undefined => {
    const v = flags[n];
    return (typeof v === 'string' && v !== '' ? v : undefined) ?? fromEnv(env, operatorCommand.options[n]!.env) ?? operatorCommand.options[n]!.default;
  };
  const num = (n: string) => (pick(n) === undefined ? undefined : Number(pick(n)));
  const namespace = pick('namespace');
  const baseImage = pick('base-image');
  const parsed = schema.safeParse({
    namespace,
    kubeconfig: pick('kubeconfig'),
    runtime: {
      registry: pick('registry') ?? '',
      pushSecretName: pick('push-secret'),
      buildImage: pick('build-image'),
      baseImage,
      gitImage: pick('git-image') ?? baseImage,
      buildTimeoutSeconds: num('build-timeout'),
      progressDeadlineSeconds: num('progress-deadline'),
      ingress: { className: pick('ingress-class'), baseDomain: pick('base-domain'), tlsSecretName: pick('ingress-tls-secret') },
      postgres: { mode: pick('postgres-mode'), image: pick('postgres-image'), storageSize: pick('postgres-storage'), storageClassName: pick('postgres-storage-class') },
      defaults: { cpu: num('default-cpu'), memoryMb: num('default-memory-mb') },
    },
    leaderElect: pick('leader-elect'),
    leaseName: pick('lease-name'),
    leaseNamespace: pick('lease-namespace') ?? namespace,
    leaseDurationMs: pick('lease-duration'),
    identity: pick('identity') ?? `${hostname()}-${process.pid}`,
    logLevel: pick('log-level')?.toLowerCase(),
  });
  if (!parsed.success) {
    const issue = parsed.error.issues[0]!;
    const key = String(issue.path.at(-1));
    throw new UsageError(`invalid ${FLAG[key] ?? `--${key}`}: ${issue.message}`);
  }
  return parsed.data;
}

// `agentplane listener` flags, parsed once with zod.
import { resolve } from 'node:path';
import { z } from 'zod';
import { optionPicker, parseCommandArgs, portSchema, UsageError, type CommandSpec } from '../lib/cli-args.ts';
import { listenerConnectionFields } from '../api/listener-connection.ts';

export const listenerCommand: CommandSpec = {
  name: 'listener',
  summary:
    'A data plane that dials out to a control plane: runs the deployments assigned to one listener and reports back',
  usage:
    'agentplane listener --control-plane-url URL --api-key KEY --tenant T --listener-id ID\n' +
    '       [--runtime local [--data-dir DIR] [--host 127.0.0.1] [--port 8090]] | [--runtime kubernetes --namespace NS]',
  options: {
    'control-plane-url': {
      type: 'string',
      description: 'Base URL of the control plane API (the listener only ever connects out to it)',
      env: ['AGENTPLANE_CONTROL_PLANE_URL'],
    },
    'api-key': {
      type: 'string',
      description: 'Listener key (POST /v2/listeners/{id}/keys) or a workspace key',
      env: ['AGENTPLANE_LISTENER_API_KEY', 'AGENTPLANE_API_KEY'],
    },
    tenant: { type: 'string', description: 'Workspace (tenant) id of the listener', env: ['AGENTPLANE_TENANT'] },
    'listener-id': { type: 'string', description: 'Id of the listener record', env: ['AGENTPLANE_LISTENER_ID'] },
    runtime: {
      type: 'string',
      description:
        'local: build and run here (embedded store); kubernetes: write AgentDeployment/AgentRevision resources for the operator of this cluster',
      default: 'local',
      env: ['AGENTPLANE_LISTENER_RUNTIME'],
    },
    'data-dir': {
      type: 'string',
      description: "Local runtime: where the listener's store, builds and deployments' data live",
      default: './.agentplane-listener',
      env: ['AGENTPLANE_DATA_DIR'],
    },
    host: {
      type: 'string',
      description: 'Local runtime: address the deployment URLs listen on',
      default: '127.0.0.1',
      env: ['AGENTPLANE_HOST'],
    },
    port: {
      type: 'string',
      description: 'Local runtime: port of the deployment URLs (0 picks a free one)',
      default: '8090',
      env: ['AGENTPLANE_PORT'],
    },
    'public-url': {
      type: 'string',
      description: 'Local runtime: base URL users reach the deployments at (default: http://host:port)',
      env: ['AGENTPLANE_PUBLIC_URL'],
    },
    sandbox: {
      type: 'string',
      description: 'Local runtime: confine builds and agent servers (auto, bwrap or none)',
      default: 'auto',
      env: ['AGENTPLANE_SANDBOX'],
    },
    'sandbox-uid': {
      type: 'string',
      description:
        'When run as root: the uid (and gid) sandboxed builds and agent servers run as, never 0 (65534: nobody; give ' +
        'an id no other process uses to keep them apart from other daemons)',
      default: '65534',
      env: ['AGENTPLANE_SANDBOX_UID'],
    },
    'allow-local-repos': {
      type: 'string',
      description: 'Local runtime: comma-separated folders a local repo_url may come from; default: none',
      env: ['AGENTPLANE_ALLOW_LOCAL_REPOS'],
    },
    'database-url': {
      type: 'string',
      description: "Local runtime: Postgres server for deployments' data; embedded store otherwise",
      env: ['AGENTPLANE_DATABASE_URL'],
    },
    namespace: {
      type: 'string',
      description: 'Kubernetes runtime: namespace the resources go to when a deployment names none',
      default: 'agentplane',
      env: ['AGENTPLANE_NAMESPACE', 'POD_NAMESPACE'],
    },
    kubeconfig: {
      type: 'string',
      description: 'Kubernetes runtime: kubeconfig file (default: in-cluster or ~/.kube/config)',
      env: ['KUBECONFIG'],
    },
    'tenant-namespace-prefix': {
      type: 'string',
      description: "Kubernetes runtime: the operator's per-tenant namespace prefix, where agent key hashes go",
      env: ['AGENTPLANE_TENANT_NAMESPACE_PREFIX'],
    },
    'poll-timeout': {
      type: 'string',
      description: 'Seconds one watch request waits for a change before asking again',
      default: '25',
    },
    'max-retry-delay': {
      type: 'string',
      description:
        'Longest wait, in seconds, between attempts to reach an unreachable control plane (the first is 0.5 s, each next one twice as long)',
      default: '30',
    },
    'log-level': {
      type: 'string',
      description: 'fatal, error, warn, info, debug, trace or silent',
      default: 'info',
      env: ['LOG_LEVEL'],
    },
  },
};

const schema = z.object({
  ...listenerConnectionFields,
  runtime: z.enum(['local', 'kubernetes']),
  dataDir: z.string().min(1),
  host: z.string().min(1),
  port: portSchema,
  publicUrl: z.string().url().optional(),
  sandbox: z.enum(['auto', 'bwrap', 'none']),
  sandboxUid: z.coerce.number().int().min(1).max(4294967294),
  allowLocalRepos: z.array(z.string().min(1)),
  databaseUrl: z.string().url().optional(),
  namespace: z.string().min(1),
  kubeconfig: z.string().optional(),
  tenantNamespacePrefix: z.string().optional(),
  pollTimeoutSecs: z.coerce.number().int().min(1).max(60),
  maxRetryDelaySecs: z.coerce.number().min(0.5).max(300),
  logLevel: z.string(),
});
const FLAG_OF: Record<string, string> = {
  controlPlaneUrl: 'control-plane-url',
  apiKey: 'api-key',
  listenerId: 'listener-id',
  dataDir: 'data-dir',
  publicUrl: 'public-url',
  sandboxUid: 'sandbox-uid',
  allowLocalRepos: 'allow-local-repos',
  databaseUrl: 'database-url',
  tenantNamespacePrefix: 'tenant-namespace-prefix',
  pollTimeoutSecs: 'poll-timeout',
  maxRetryDelaySecs: 'max-retry-delay',
  logLevel: 'log-level',
};
export type ListenerConfig = z.infer<typeof schema>;

/** Flags win over environment variables, which win over defaults. Returns null for --help. */
export function parseListenerConfig(argv: string[], env: NodeJS.ProcessEnv): ListenerConfig | null {
  const v = parseCommandArgs(listenerCommand, argv);
  if (v.help) return null;
  const pick = optionPicker(listenerCommand, v, env);
  const parsed = schema.safeParse({
    controlPlaneUrl: pick('control-plane-url'),
    apiKey: pick('api-key'),
    tenant: pick('tenant'),
    listenerId: pick('listener-id'),
    runtime: pick('runtime'),
    dataDir: resolve(pick('data-dir')!),
    host: pick('host'),
    port: pick('port'),
    publicUrl: pick('public-url'),
    sandbox: pick('sandbox'),
    sandboxUid: pick('sandbox-uid'),
    allowLocalRepos: (pick('allow-local-repos') ?? '')
      .split(',')
      .map((d) => d.trim())
      .filter(Boolean)
      .map((d) => resolve(d)),
    databaseUrl: pick('database-url'),
    namespace: pick('namespace'),
    kubeconfig: pick('kubeconfig'),
    tenantNamespacePrefix: pick('tenant-namespace-prefix'),
    pollTimeoutSecs: pick('poll-timeout'),
    maxRetryDelaySecs: pick('max-retry-delay'),
    logLevel: pick('log-level'),
  });
  if (!parsed.success) {
    const issue = parsed.error.issues[0]!;
    const flag = FLAG_OF[String(issue.path[0])] ?? String(issue.path[0]);
    throw new UsageError(`invalid --${flag}: ${issue.message}`);
  }
  return parsed.data;
}

// `agentplane listener` flags, parsed once with zod.
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
import { listenerConnectionFields } from '../api/listener-connection.ts';

export const listenerCommand = defineCommand({
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
      path: 'controlPlaneUrl',
      schema: listenerConnectionFields.controlPlaneUrl,
    },
    'api-key': {
      type: 'string',
      description: 'Listener key (POST /v2/listeners/{id}/keys) or a workspace key',
      env: ['AGENTPLANE_LISTENER_API_KEY', 'AGENTPLANE_API_KEY'],
      path: 'apiKey',
      schema: listenerConnectionFields.apiKey,
    },
    tenant: {
      type: 'string',
      description: 'Workspace (tenant) id of the listener',
      env: ['AGENTPLANE_TENANT'],
      path: 'tenant',
      schema: listenerConnectionFields.tenant,
    },
    'listener-id': {
      type: 'string',
      description: 'Id of the listener record',
      env: ['AGENTPLANE_LISTENER_ID'],
      path: 'listenerId',
      schema: listenerConnectionFields.listenerId,
    },
    runtime: {
      type: 'string',
      description:
        'local: build and run here (embedded store); kubernetes: write AgentDeployment/AgentRevision resources for the operator of this cluster',
      default: 'local',
      env: ['AGENTPLANE_LISTENER_RUNTIME'],
      path: 'runtime',
      schema: z.enum(['local', 'kubernetes']),
    },
    'data-dir': {
      type: 'string',
      description: "Local runtime: where the listener's store, builds and deployments' data live",
      default: './.agentplane-listener',
      env: ['AGENTPLANE_DATA_DIR'],
      path: 'dataDir',
      schema: z.string().min(1),
    },
    host: {
      type: 'string',
      description: 'Local runtime: address the deployment URLs listen on',
      default: '127.0.0.1',
      env: ['AGENTPLANE_HOST'],
      path: 'host',
      schema: z.string().min(1),
    },
    port: {
      type: 'string',
      description: 'Local runtime: port of the deployment URLs (0 picks a free one)',
      default: '8090',
      env: ['AGENTPLANE_PORT'],
      path: 'port',
      schema: portSchema,
    },
    'public-url': {
      type: 'string',
      description: 'Local runtime: base URL users reach the deployments at (default: http://host:port)',
      env: ['AGENTPLANE_PUBLIC_URL'],
      path: 'publicUrl',
      schema: z.string().url().optional(),
    },
    sandbox: {
      type: 'string',
      description: 'Local runtime: confine builds and agent servers (auto, bwrap or none)',
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
      description: 'Local runtime: comma-separated folders a local repo_url may come from; default: none',
      env: ['AGENTPLANE_ALLOW_LOCAL_REPOS'],
      path: 'allowLocalRepos',
      schema: z.array(z.string().min(1)),
      read: (v) => list(v).map((d) => resolve(d)),
    },
    'database-url': {
      type: 'string',
      description: "Local runtime: Postgres server for deployments' data; embedded store otherwise",
      env: ['AGENTPLANE_DATABASE_URL'],
      path: 'databaseUrl',
      schema: z.string().url().optional(),
    },
    namespace: {
      type: 'string',
      description: 'Kubernetes runtime: namespace the resources go to when a deployment names none',
      default: 'agentplane',
      env: ['AGENTPLANE_NAMESPACE', 'POD_NAMESPACE'],
      path: 'namespace',
      schema: z.string().min(1),
    },
    kubeconfig: {
      type: 'string',
      description: 'Kubernetes runtime: kubeconfig file (default: in-cluster or ~/.kube/config)',
      env: ['KUBECONFIG'],
      path: 'kubeconfig',
      schema: z.string().optional(),
    },
    'tenant-namespace-prefix': {
      type: 'string',
      description: "Kubernetes runtime: the operator's per-workspace namespace prefix, where agent key hashes go",
      env: ['AGENTPLANE_TENANT_NAMESPACE_PREFIX'],
      path: 'tenantNamespacePrefix',
      schema: z.string().optional(),
    },
    'poll-timeout': {
      type: 'string',
      description: 'Seconds one watch request waits for a change before asking again',
      default: '25',
      path: 'pollTimeoutSecs',
      schema: z.coerce.number().int().min(1).max(60),
    },
    'max-retry-delay': {
      type: 'string',
      description:
        'Longest wait, in seconds, between attempts to reach an unreachable control plane (the first is 0.5 s, each next one twice as long)',
      default: '30',
      path: 'maxRetryDelaySecs',
      schema: z.coerce.number().min(0.5).max(300),
    },
    'log-level': {
      type: 'string',
      description: 'fatal, error, warn, info, debug, trace or silent',
      default: 'info',
      env: ['LOG_LEVEL'],
      path: 'logLevel',
      schema: z.string(),
    },
  },
});

const schema = configSchema(listenerCommand.options);
export type ListenerConfig = z.infer<typeof schema>;

/** Flags win over environment variables, which win over defaults. Returns null for --help. */
export function parseListenerConfig(argv: string[], env: NodeJS.ProcessEnv): ListenerConfig | null {
  const v = parseCommandArgs(listenerCommand, argv);
  if (v.help) return null;
  const pick = optionPicker(listenerCommand, v, env);
  const raw = { ...optionValues(listenerCommand, pick), dataDir: resolve(pick('data-dir')!) };
  return parseOptions(listenerCommand, schema, raw, pick);
}

// `agentplane activator`: the activator of idle deployments in a cluster (activator.ts), as the Helm chart runs it
// beside the operator (activator.enabled). It watches the agent Services, answers requests on --port until
// SIGTERM/SIGINT, then closes.
import { createServer } from 'node:http';
import { loadKubeConfig } from '../../lib/kube-config.ts';
import { z } from 'zod';
import {
  configSchema,
  defineCommand,
  formatHelp,
  optionPicker,
  optionValues,
  parseCommandArgs,
  parseOptions,
} from '../../lib/cli-args.ts';
import { lower } from '../../lib/option-readers.ts';
import { createLogger } from '../../lib/logger.ts';
import { closeOnSignals } from '../../lib/shutdown.ts';
import { Informer } from '../controller-kit/informer.ts';
import type { Obj } from '../runtimes/kubernetes/context.ts';
import { childListWatch } from '../runtimes/kubernetes/list-watch.ts';
import { createActivator } from './activator.ts';
import type { V1Service } from '@kubernetes/client-node';

const kubernetesName = z.string().regex(/^[a-z0-9]([-a-z0-9]*[a-z0-9])?$/, 'must be a Kubernetes name');

export const activatorCommand = defineCommand({
  name: 'activator',
  summary: 'Hold requests for sleeping deployments in a cluster, wake them and forward once a pod is ready',
  usage: 'agentplane activator [--namespace NS] [--agent-namespace NS] [--kubeconfig FILE] [--port PORT] [options]',
  options: {
    namespace: {
      type: 'string',
      description: 'Namespace of the AgentDeployments (the activator asks a wake there)',
      default: 'default',
      env: ['AGENTPLANE_NAMESPACE', 'POD_NAMESPACE'],
      path: 'namespace',
      schema: kubernetesName,
    },
    'agent-namespace': {
      type: 'string',
      description: "Namespace of the agents' Services; empty: every namespace (a namespace per workspace)",
      env: ['AGENTPLANE_AGENT_NAMESPACE'],
      path: 'agentNamespace',
      schema: kubernetesName.optional(),
    },
    kubeconfig: {
      type: 'string',
      description: 'Kubeconfig file; without it: in-cluster config, else the default kubeconfig',
      env: ['KUBECONFIG'],
      path: 'kubeconfig',
      schema: z.string().optional(),
    },
    host: {
      type: 'string',
      description: 'Address to listen on',
      default: '0.0.0.0',
      env: ['HOST'],
      path: 'host',
      schema: z.string().min(1),
    },
    port: {
      type: 'string',
      description: 'Port to listen on',
      default: '8080',
      env: ['PORT'],
      path: 'port',
      schema: z.coerce.number().int().min(0).max(65535),
    },
    'wake-timeout': {
      type: 'string',
      description: 'Seconds a request is held while its deployment wakes; past it: 503 with Retry-After',
      default: '60',
      env: ['AGENTPLANE_WAKE_TIMEOUT'],
      path: 'wakeTimeoutMs',
      schema: z.coerce
        .number()
        .positive()
        .transform((s) => s * 1000),
    },
    'max-body-mb': {
      type: 'string',
      description: 'Largest request body forwarded, in MiB (the agent server refuses more anyway); past it: 413',
      default: '10',
      env: ['AGENTPLANE_MAX_BODY_MB'],
      path: 'maxBodyBytes',
      schema: z.coerce
        .number()
        .positive()
        .max(1024)
        .transform((mb) => Math.floor(mb * 1024 * 1024)),
    },
    'upstream-url': {
      type: 'string',
      description:
        "Where a ready agent pod is reached ({ip} and {port}: the endpoint's); another address sends every forwarded request there",
      default: 'http://{ip}:{port}',
      env: ['AGENTPLANE_UPSTREAM_URL'],
      path: 'upstreamUrl',
      schema: z.string().refine((u) => URL.canParse(u.replace('{ip}', '127.0.0.1').replace('{port}', '1')), {
        message: 'must be a URL (with {ip} and {port} where the endpoint goes)',
      }),
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

const schema = configSchema(activatorCommand.options);

export async function run(argv: string[]): Promise<void> {
  const flags = parseCommandArgs(activatorCommand, argv);
  if (flags.help) {
    process.stdout.write(formatHelp(activatorCommand));
    return;
  }
  const pick = optionPicker(activatorCommand, flags, process.env);
  const config = parseOptions(activatorCommand, schema, optionValues(activatorCommand, pick), pick);
  const logger = createLogger({ level: config.logLevel, name: 'activator' });
  const kc = loadKubeConfig(config.kubeconfig);
  // The agents' Services only (the operator labels every child it makes).
  const services = new Informer<Obj<V1Service>>(
    childListWatch(
      kc,
      'services',
      config.agentNamespace,
      'app.kubernetes.io/managed-by=agentplane-operator,app.kubernetes.io/component=server',
    ),
    { name: 'services', logger, resyncMs: 0 },
  );
  await services.start();
  const activator = createActivator({
    kubeConfig: kc,
    namespace: config.namespace,
    services,
    wakeTimeoutMs: config.wakeTimeoutMs,
    upstreamUrl: config.upstreamUrl,
    maxBodyBytes: config.maxBodyBytes,
    logger,
  });
  const server = createServer();
  activator.attach(server);
  await new Promise<void>((resolve, reject) => {
    server.once('error', reject);
    server.listen(config.port, config.host, () => resolve());
  });
  const address = server.address();
  logger.info({ port: typeof address === 'object' ? address?.port : config.port }, 'activator listening');
  closeOnSignals(logger, async () => {
    services.stop();
    server.closeAllConnections();
    await new Promise((r) => server.close(r));
  });
}

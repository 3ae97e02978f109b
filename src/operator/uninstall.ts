// `agentplane uninstall`: the chart's pre-delete hook (`helm uninstall` runs it before it removes anything).
// Deletes every AgentDeployment of the namespace while the operator still runs, then waits until the operator has
// finalized them all: each carries the operator's finalizer (it cleans up what owner references cannot reach), and
// once `helm uninstall` has removed the operator nobody would take it off, so the AgentDeployments, and the
// namespace deleted after them, would stay Terminating for good.
import { CustomObjectsApi } from '@kubernetes/client-node';
import { loadKubeConfig } from '../lib/kube-config.ts';
import { formatHelp, optionPicker, parseCommandArgs, UsageError, type CommandSpec } from '../lib/cli-args.ts';
import { createLogger, type Logger } from '../lib/logger.ts';
import { GROUP, VERSION } from '../resources/meta.ts';

export const uninstallCommand: CommandSpec = {
  name: 'uninstall',
  summary:
    'Delete every AgentDeployment of a namespace and wait until the operator has finalized them (the Helm chart runs it before uninstalling)',
  usage: 'agentplane uninstall [--namespace NS] [--kubeconfig FILE] [--timeout SECONDS]',
  options: {
    namespace: {
      type: 'string',
      description: 'Namespace of the AgentDeployments',
      default: 'default',
      env: ['AGENTPLANE_NAMESPACE', 'POD_NAMESPACE'],
    },
    kubeconfig: {
      type: 'string',
      description: 'Kubeconfig file; without it: in-cluster config, else the default kubeconfig',
      env: ['KUBECONFIG'],
    },
    timeout: {
      type: 'string',
      description: 'Seconds to wait for the operator to finalize them; then exit 1 naming those left',
      default: '300',
      env: ['AGENTPLANE_UNINSTALL_TIMEOUT'],
    },
  },
};

type Item = { metadata: { name: string; deletionTimestamp?: string; finalizers?: string[] } };

const PLURAL = 'agentdeployments';

function isNotFound(err: unknown): boolean {
  return (err as { code?: number }).code === 404;
}

/**
 * Deletes the namespace's AgentDeployments (those already being deleted are left as they are) and polls until none
 * is left or `timeoutMs` has passed; returns the names still there.
 */
export async function deleteAndAwaitFinalized(
  api: CustomObjectsApi,
  namespace: string,
  timeoutMs: number,
  logger: Logger,
  pollMs = 1000,
): Promise<string[]> {
  const list = async () =>
    (
      (await api.listNamespacedCustomObject({ group: GROUP, version: VERSION, namespace, plural: PLURAL })) as {
        items: Item[];
      }
    ).items;
  const deadline = Date.now() + timeoutMs;
  let items = await list();
  for (const item of items) {
    if (item.metadata.deletionTimestamp) continue;
    try {
      await api.deleteNamespacedCustomObject({
        group: GROUP,
        version: VERSION,
        namespace,
        plural: PLURAL,
        name: item.metadata.name,
      });
    } catch (err) {
      if (!isNotFound(err)) throw err;
    }
  }
  logger.info(
    { namespace, count: items.length },
    'AgentDeployments deleted; waiting for the operator to finalize them',
  );
  while (items.length > 0 && Date.now() < deadline) {
    await new Promise((r) => setTimeout(r, pollMs));
    items = await list();
  }
  return items.map((i) => i.metadata.name);
}

export async function run(argv: string[]): Promise<void> {
  const flags = parseCommandArgs(uninstallCommand, argv);
  if (flags.help) {
    process.stdout.write(formatHelp(uninstallCommand));
    return;
  }
  const pick = optionPicker(uninstallCommand, flags, process.env);
  const namespace = pick('namespace')!;
  if (!/^[a-z0-9]([-a-z0-9]*[a-z0-9])?$/.test(namespace) || namespace.length > 63)
    throw new UsageError(`--namespace "${namespace}" is not a namespace name`);
  const timeout = Number(pick('timeout'));
  if (!Number.isInteger(timeout) || timeout <= 0)
    throw new UsageError(`--timeout must be a whole number of seconds above 0, not "${pick('timeout')}"`);
  const kc = loadKubeConfig(pick('kubeconfig') || undefined);
  const logger = createLogger({ level: process.env.LOG_LEVEL, name: 'uninstall' });
  const left = await deleteAndAwaitFinalized(kc.makeApiClient(CustomObjectsApi), namespace, timeout * 1000, logger);
  if (left.length === 0) {
    logger.info({ namespace }, 'every AgentDeployment finalized');
    return;
  }
  logger.error(
    { namespace, left },
    `${left.length} AgentDeployment(s) still there after ${timeout} s: is the operator running? (docs/kubernetes.md#uninstalling)`,
  );
  process.exitCode = 1;
}

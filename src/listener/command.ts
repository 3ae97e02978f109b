// `agentplane listener`: a data plane that connects out to a control plane. With the local runtime it is a small
// `agentplane dev` without the API: its own embedded store and data dir, the operator and local runtime, and one port
// serving the deployment URLs. With the kubernetes runtime it only writes AgentDeployment/AgentRevision resources;
// the operator of that cluster does the rest.
import { readFileSync } from 'node:fs';
import { join, resolve } from 'node:path';
import { formatHelp } from '../lib/cli-args.ts';
import { createFrontServer, listenOn } from '../lib/http.ts';
import { lockDataDir } from '../lib/data-dir-lock.ts';
import { createLogger, type Logger } from '../lib/logger.ts';
import { closeOnSignals } from '../lib/shutdown.ts';
import { openEmbeddedPlatformState } from '../state/embedded/index.ts';
import { createLocalDataPlane } from '../local/data-plane.ts';
import { PACKAGE_DIR } from '../operator/runtimes/local/index.ts';
import { DEPLOYMENTS_PREFIX } from '../operator/runtimes/local/proxy.ts';
import { listenerCommand, parseListenerConfig, type ListenerConfig } from './config.ts';
import { listenerCredentialResolver } from '../api/git-credential.ts';
import { ListenerSync } from './sync.ts';

function packageVersion(): string {
  try {
    return (JSON.parse(readFileSync(join(PACKAGE_DIR, 'package.json'), 'utf8')) as { version: string }).version;
  } catch {
    return 'unknown';
  }
}

export type RunningListener = { url?: string; close(): Promise<void> };

export async function startLocalListener(config: ListenerConfig, logger: Logger): Promise<RunningListener> {
  const owner = lockDataDir(config.dataDir, `agentplane listener ${config.listenerId}`);
  const store = openEmbeddedPlatformState({ dataDir: join(config.dataDir, 'store') });
  // Tenants' key files need no filling when made: the sync writes each tenant's set (from the control plane) before
  // any deployment of the tenant exists here.
  const dataPlane = await createLocalDataPlane({
    dataDir: config.dataDir,
    sandbox: config.sandbox,
    sandboxUid: config.sandboxUid,
    allowLocalRepos: config.allowLocalRepos,
    store,
    logger,
    runtime: {
      databaseUrl: config.databaseUrl,
      healthTimeoutMs: 60_000,
      // Private repositories: a fresh GitHub App token per build, asked of the control plane with the listener's key.
      gitCredential: listenerCredentialResolver({
        controlPlaneUrl: config.controlPlaneUrl,
        apiKey: config.apiKey,
        tenant: config.tenant,
        listenerId: config.listenerId,
        version: packageVersion(),
      }),
      buildTimeoutMs: 1_800_000,
      keepBuilds: 5,
      installCacheMaxBytes: 2048 * 1024 * 1024,
    },
  });
  const server = createFrontServer((req, res) => dataPlane.handle(req, res));
  server.on('upgrade', (req, socket, head) => dataPlane.upgrade(req, socket, head));
  const localUrl = await listenOn(server, config.port, config.host);
  const url = config.publicUrl?.replace(/\/+$/, '') ?? localUrl;
  await dataPlane.start(url);
  owner.describe({ url });

  const sync = new ListenerSync({
    controlPlaneUrl: config.controlPlaneUrl,
    apiKey: config.apiKey,
    tenant: config.tenant,
    listenerId: config.listenerId,
    store,
    namespace: store.namespace,
    keySink: dataPlane.keyFiles,
    logger,
    version: packageVersion(),
    pollTimeoutSecs: config.pollTimeoutSecs,
    maxRetryDelayMs: config.maxRetryDelaySecs * 1000,
  });
  sync.start();

  let closing: Promise<void> | undefined;
  return {
    url,
    close() {
      closing ??= (async () => {
        await sync.stop();
        await dataPlane.close();
        await new Promise<void>((res) => {
          server.close(() => res());
          server.closeAllConnections();
        });
        await store.close();
        owner.release();
      })();
      return closing;
    },
  };
}

export async function startKubernetesListener(config: ListenerConfig, logger: Logger): Promise<RunningListener> {
  // Loaded here so the local runtime never pays for the Kubernetes client.
  const { loadKubeConfig, openKubernetesPlatformState } = await import('../state/kubernetes/index.ts');
  const { tenantNamespaceName } = await import('../operator/runtimes/kubernetes/index.ts');
  const store = openKubernetesPlatformState({
    kubeConfig: loadKubeConfig(config.kubeconfig ? resolve(config.kubeconfig) : undefined),
    namespace: config.namespace,
    logger,
  });
  const prefix = config.tenantNamespacePrefix;
  const sync = new ListenerSync({
    controlPlaneUrl: config.controlPlaneUrl,
    apiKey: config.apiKey,
    tenant: config.tenant,
    listenerId: config.listenerId,
    store,
    namespace: config.namespace,
    keySink: store.tenantKeySink?.(prefix ? (tenant) => tenantNamespaceName(prefix, tenant) : undefined),
    logger,
    version: packageVersion(),
    pollTimeoutSecs: config.pollTimeoutSecs,
    maxRetryDelayMs: config.maxRetryDelaySecs * 1000,
  });
  sync.start();
  return {
    async close() {
      await sync.stop();
      await store.close();
    },
  };
}

export async function run(argv: string[]): Promise<void> {
  const config = parseListenerConfig(argv, process.env);
  if (!config) {
    process.stdout.write(formatHelp(listenerCommand));
    return;
  }
  const logger = createLogger({ level: config.logLevel, name: 'listener' });
  const running =
    config.runtime === 'local'
      ? await startLocalListener(config, logger)
      : await startKubernetesListener(config, logger);
  process.stdout.write(
    [
      '',
      `agentplane listener ${config.listenerId} is running (runtime ${config.runtime})`,
      `  control plane       ${config.controlPlaneUrl}`,
      ...(running.url ? [`  deployment URLs     ${running.url}${DEPLOYMENTS_PREFIX}/<deployment id>`] : []),
      ...(config.runtime === 'local'
        ? [`  data                ${config.dataDir}`]
        : [`  namespace           ${config.namespace}`]),
      '',
    ].join('\n'),
  );
  closeOnSignals(logger, () => running.close());
}

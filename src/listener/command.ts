// `agentplane listener`: a data plane that connects out to a control plane. With the local runtime it is a small
// `agentplane dev` without the API: its own embedded store and data dir, the operator and local runtime, and one port
// serving the deployment URLs. With the kubernetes runtime it only writes AgentDeployment/AgentRevision resources;
// the operator of that cluster does the rest.
import { mkdirSync, readFileSync, realpathSync, writeFileSync } from 'node:fs';
import { mkdir } from 'node:fs/promises';
import { dirname, join, resolve } from 'node:path';
import Fastify, { type FastifyBaseLogger } from 'fastify';
import { formatHelp } from '../lib/cli-args.ts';
import { createFrontServer } from '../lib/http.ts';
import { createLogger, type Logger } from '../lib/logger.ts';
import { closeOnSignals } from '../lib/shutdown.ts';
import { fileKeySink } from '../control-plane/auth/key-publisher.ts';
import { openEmbeddedStore } from '../control-plane/store/embedded/index.ts';
import { createOperator } from '../operator/operator.ts';
import { LocalRuntime, PACKAGE_DIR } from '../operator/runtimes/local/index.ts';
import { detectSandbox, sharedTrees } from '../operator/runtimes/local/sandbox.ts';
import { deploymentProxy, deploymentUpgrades, DEPLOYMENTS_PREFIX } from '../operator/runtimes/local/proxy.ts';
import { storeLogSink } from '../operator/sources.ts';
import { listenerCommand, parseListenerConfig, type ListenerConfig } from './config.ts';
import { listenerCredentialResolver } from './git-credential.ts';
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
  await mkdir(config.dataDir, { recursive: true });
  const dataDir = realpathSync(config.dataDir);
  const { sandbox, reason } = await detectSandbox(config.sandbox, {
    hidden: [dataDir],
    shared: sharedTrees(PACKAGE_DIR),
  });
  if (sandbox.kind === 'none') logger.warn({ sandbox: sandbox.kind }, `isolation: ${reason}`);
  else logger.info({ sandbox: sandbox.kind }, `isolation: ${reason}`);
  const store = openEmbeddedStore({ dataDir: join(dataDir, 'store') });
  const keyFiles = fileKeySink(join(dataDir, 'runtime', 'auth'));
  const runtime = new LocalRuntime({
    dataDir: join(dataDir, 'runtime'),
    logs: storeLogSink(store),
    logger: logger.child({ component: 'local-runtime' }),
    databaseUrl: config.databaseUrl,
    healthTimeoutMs: 60_000,
    sandbox,
    allowLocalRepos: config.allowLocalRepos.map((d) => {
      try {
        return realpathSync(d);
      } catch {
        return d;
      }
    }),
    protectedDirs: [dataDir],
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
    authKeysFile: (tenant) => {
      const file = keyFiles.pathFor(tenant);
      mkdirSync(dirname(file), { recursive: true });
      try {
        // The sync writes the real set (from the control plane) before any deployment of the tenant exists here.
        writeFileSync(file, '{"hashes":[]}\n', { flag: 'wx' });
      } catch {
        // already there
      }
      return file;
    },
  });
  const killChildren = () => runtime.killAllNow();
  process.once('exit', killChildren);

  const proxy = Fastify({
    loggerInstance: logger.child({ component: 'proxy' }, { level: 'warn' }) as FastifyBaseLogger,
  });
  proxy.get('/ok', async () => ({ ok: true }));
  await deploymentProxy(proxy, { resolve: (id) => runtime.backend(id) });
  await proxy.ready();
  const server = createFrontServer((req, res) => proxy.routing(req, res));
  server.on('upgrade', deploymentUpgrades({ resolve: (id) => runtime.backend(id) }));
  await new Promise<void>((res, rej) => {
    server.once('error', rej);
    server.listen(config.port, config.host, () => res());
  });
  const { port } = server.address() as { port: number };
  const host = config.host.includes(':') ? `[${config.host}]` : config.host;
  const url = config.publicUrl?.replace(/\/+$/, '') ?? `http://${host === '0.0.0.0' ? '127.0.0.1' : host}:${port}`;
  runtime.setBaseUrl(url);

  const operator = createOperator({ store, runtime, logger });
  await operator.start();
  const sync = new ListenerSync({
    controlPlaneUrl: config.controlPlaneUrl,
    apiKey: config.apiKey,
    tenant: config.tenant,
    listenerId: config.listenerId,
    store,
    namespace: store.namespace,
    keySink: keyFiles,
    logger,
    version: packageVersion(),
    pollTimeoutSecs: config.pollTimeoutSecs,
  });
  sync.start();

  let closing: Promise<void> | undefined;
  return {
    url,
    close() {
      closing ??= (async () => {
        await sync.stop();
        await operator.stop();
        await runtime.shutdown();
        await new Promise<void>((res) => {
          server.close(() => res());
          server.closeAllConnections();
        });
        await proxy.close();
        await store.close();
        process.removeListener('exit', killChildren);
      })();
      return closing;
    },
  };
}

export async function startKubernetesListener(config: ListenerConfig, logger: Logger): Promise<RunningListener> {
  // Loaded here so the local runtime never pays for the Kubernetes client.
  const { loadKubeConfig, openKubernetesStore } = await import('../control-plane/store/kubernetes/index.ts');
  const { tenantNamespaceName } = await import('../operator/runtimes/kubernetes/index.ts');
  const store = openKubernetesStore({
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

// One process, one port: the control plane API, and under /deployments/<id>/ each deployment's agent server.
// Two fastify apps behind one node:http server, dispatched by path, so the control plane's auth hooks never see
// agent traffic and the proxy never sees API keys.
import { mkdirSync, realpathSync, writeFileSync } from 'node:fs';
import { mkdir } from 'node:fs/promises';
import type { IncomingMessage, ServerResponse } from 'node:http';
import { dirname, join } from 'node:path';
import Fastify, { type FastifyBaseLogger, type FastifyInstance } from 'fastify';
import { createFrontServer } from '../lib/http.ts';
import type { Logger } from '../lib/logger.ts';
import { randomBytes } from 'node:crypto';
import { openEmbeddedStore } from '../control-plane/store/embedded/index.ts';
import { readKeyFile } from '../control-plane/store/embedded/secret-box.ts';
import { derivedAuthKeyring } from '../control-plane/services/auth-crypto.ts';
import type { ControlPlaneStore } from '../control-plane/store/types.ts';
import { createOperator, type Operator } from '../operator/operator.ts';
import { LocalRuntime, PACKAGE_DIR } from '../operator/runtimes/local/index.ts';
import { detectSandbox, sharedTrees } from '../operator/runtimes/local/sandbox.ts';
import { deploymentProxy, deploymentUpgrades, DEPLOYMENTS_PREFIX } from '../operator/runtimes/local/proxy.ts';
import { storeLogSink } from '../operator/sources.ts';
import { bootstrapKeysOf, buildControlPlane } from './control-plane.ts';
import { KeyPublisher, fileKeySink } from '../control-plane/auth/key-publisher.ts';
import type { DevConfig } from './config.ts';
import { buildCredentialResolver } from '../control-plane/services/integrations.ts';
import { createGitHubApp } from '../control-plane/services/integrations-github.ts';

export type DevServer = {
  /** http://host:port */
  url: string;
  store: ControlPlaneStore;
  runtime: LocalRuntime;
  /** Which confinement builds and agent servers get, in one line. */
  isolation: string;
  close(): Promise<void>;
};

export async function startDev(config: DevConfig, logger: Logger): Promise<DevServer> {
  // Real paths: the sandbox mounts and the local repo checks compare resolved paths.
  await mkdir(config.dataDir, { recursive: true });
  const dataDir = realpathSync(config.dataDir);
  const { sandbox, reason } = await detectSandbox(config.sandbox, {
    hidden: [dataDir],
    shared: sharedTrees(PACKAGE_DIR),
  });
  const isolation = { sandbox: sandbox.kind, allowLocalRepos: config.allowLocalRepos };
  if (sandbox.kind === 'none') logger.warn(isolation, `isolation: ${reason}`);
  else logger.info(isolation, `isolation: ${reason}`);
  const store = openEmbeddedStore({ dataDir: join(config.dataDir, 'control-plane') });
  const github = config.github && createGitHubApp(config.github, logger);
  // Auth service: its keys derive from the store's secret key; agents get tokens signed with a key of this process
  // (they are restarted with it), and one machine may use OAuth providers on private addresses.
  const deploymentTokenKey = randomBytes(32);
  const authOptions = {
    keyring: derivedAuthKeyring(readKeyFile(join(config.dataDir, 'control-plane'), true)!),
    deploymentTokenKey,
    allowPrivateProviders: true,
  };
  // Agents check callers against their tenant's key hashes, which this process keeps current in files (keys made
  // or revoked by the API or by `agentplane api-key` in another process reach them within a second).
  const keyFiles = fileKeySink(join(dataDir, 'runtime', 'auth'));
  const publisher = new KeyPublisher({
    store,
    sink: keyFiles,
    bootstrapKeys: bootstrapKeysOf(config.bootstrapKey),
    logger: logger.child({ component: 'key-publisher' }),
    intervalMs: 1000,
  });
  const authKeysFile = (tenant: string): string => {
    const file = keyFiles.pathFor(tenant);
    // The agent (and its sandbox mount) needs the file now; the publisher fills it within a second.
    mkdirSync(dirname(file), { recursive: true });
    try {
      writeFileSync(file, '{"hashes":[]}\n', { flag: 'wx' });
      publisher.forget(tenant);
      void publisher.sync([tenant]).catch(() => undefined);
    } catch {
      // already there
    }
    return file;
  };
  const runtime = new LocalRuntime({
    dataDir: join(dataDir, 'runtime'),
    logs: storeLogSink(store),
    logger: logger.child({ component: 'local-runtime' }),
    databaseUrl: config.databaseUrl,
    healthTimeoutMs: config.healthTimeoutSecs * 1000,
    sandbox,
    allowLocalRepos: config.allowLocalRepos.map((d) => {
      try {
        return realpathSync(d);
      } catch {
        return d;
      }
    }),
    protectedDirs: [dataDir],
    buildTimeoutMs: config.buildTimeoutSecs * 1000,
    keepBuilds: config.keepBuilds,
    gitCredential: buildCredentialResolver(store, github),
    installCacheMaxBytes: config.installCacheMaxMb * 1024 * 1024,
    authKeysFile,
    deploymentTokenKey,
  });
  // No child may outlive this process, whatever way it ends.
  const killChildren = () => runtime.killAllNow();
  process.once('exit', killChildren);

  const api: FastifyInstance = await buildControlPlane(
    store,
    logger,
    config.bootstrapKey,
    () => void publisher.sync().catch(() => undefined),
    github,
    authOptions,
  );
  // Agent traffic is logged by the agent servers; the proxy reports only its own problems.
  const proxy = Fastify({
    loggerInstance: logger.child({ component: 'proxy' }, { level: 'warn' }) as FastifyBaseLogger,
  });
  await deploymentProxy(proxy, { resolve: (id) => runtime.backend(id) });
  await Promise.all([api.ready(), proxy.ready()]);

  const server = createFrontServer((req: IncomingMessage, res: ServerResponse) => {
    const target = req.url?.startsWith(`${DEPLOYMENTS_PREFIX}/`) ? proxy : api;
    target.routing(req, res);
  });
  server.on('upgrade', deploymentUpgrades({ resolve: (id) => runtime.backend(id) }));
  await new Promise<void>((resolve, reject) => {
    server.once('error', reject);
    server.listen(config.port, config.host, () => resolve());
  });
  const { port } = server.address() as { port: number };
  const host = config.host.includes(':') ? `[${config.host}]` : config.host;
  const url = `http://${host === '0.0.0.0' ? '127.0.0.1' : host}:${port}`;
  runtime.setBaseUrl(url);

  await publisher.sync().catch(() => undefined);
  publisher.start();
  const operator: Operator = createOperator({ store, runtime, logger });
  await operator.start();

  let closing: Promise<void> | undefined;
  return {
    url,
    store,
    runtime,
    isolation: reason,
    close() {
      closing ??= (async () => {
        await operator.stop();
        await publisher.stop();
        await runtime.shutdown();
        await new Promise<void>((resolve) => {
          server.close(() => resolve());
          server.closeAllConnections();
        });
        await Promise.all([api.close(), proxy.close()]);
        await store.close();
        process.removeListener('exit', killChildren);
      })();
      return closing;
    },
  };
}

// One process: the control plane API and the web console on one port, and each deployment's agent server on a
// port of its own (agent-origins.ts), so tenant code never answers on the console's origin nor on another
// deployment's. The proxy in front of the agents refuses platform keys and sandboxes what they send back.
import { mkdirSync, realpathSync, writeFileSync } from 'node:fs';
import { mkdir } from 'node:fs/promises';
import type { IncomingMessage, ServerResponse } from 'node:http';
import { dirname, join } from 'node:path';
import Fastify, { type FastifyBaseLogger, type FastifyInstance } from 'fastify';
import { createFrontServer, credentialValues } from '../lib/http.ts';
import type { Logger } from '../lib/logger.ts';
import { randomBytes } from 'node:crypto';
import { openEmbeddedStore } from '../control-plane/store/embedded/index.ts';
import { readKeyFile } from '../control-plane/store/embedded/secret-box.ts';
import { derivedAuthKeyring } from '../control-plane/services/auth-crypto.ts';
import type { ControlPlaneStore } from '../control-plane/store/types.ts';
import { createOperator, type Operator } from '../operator/operator.ts';
import { LocalRuntime, PACKAGE_DIR } from '../operator/runtimes/local/index.ts';
import { detectSandbox, sharedTrees } from '../operator/runtimes/local/sandbox.ts';
import { detectCgroup } from '../operator/runtimes/local/limits.ts';
import {
  deploymentProxy,
  deploymentUpgrades,
  DEPLOYMENTS_PREFIX,
  type ProxyOptions,
} from '../operator/runtimes/local/proxy.ts';
import { AgentOrigins } from '../operator/runtimes/local/agent-origins.ts';
import { createForeignKeyCheck } from '../control-plane/auth/keys.ts';
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
  /** Where deployments are served, in words: "ports 8100-8999 of 127.0.0.1" or "free ports of 127.0.0.1". */
  agentPorts: string;
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
  const cgroup = await detectCgroup(config.cgroupParent);
  logger.info(
    { cgroup: cgroup.dir ?? null, defaultMemoryLimitMb: config.defaultMemoryLimitMb },
    `resource limits: ${cgroup.dir ? cgroup.reason : `${cgroup.reason}; memory by rlimit, heap limit and watchdog, cpu not limited`}`,
  );
  const store = openEmbeddedStore({ dataDir: join(config.dataDir, 'control-plane') });
  const github = config.github && createGitHubApp(config.github, logger);
  // Auth service: its keys derive from the store's secret key; agents get tokens signed with a key of this process
  // (they are restarted with it), and one machine may use OAuth providers on private addresses.
  const deploymentTokenKey = randomBytes(32);
  // OAuth redirect URIs and sign-in links start with the URL this process listens on (known once it listens).
  let listeningUrl = '';
  const authOptions = {
    keyring: derivedAuthKeyring(readKeyFile(join(config.dataDir, 'control-plane'), true)!),
    deploymentTokenKey,
    allowPrivateProviders: true,
    publicUrl: () => listeningUrl,
  };
  // Agents check callers against their tenant's key hashes, which this process keeps current in files (keys made
  // or revoked by the API or by `agentplane api-key` in another process reach them within a second).
  const keyFiles = fileKeySink(join(dataDir, 'runtime', 'auth'));
  const publisher = new KeyPublisher({
    store,
    sink: keyFiles,
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
  // Agent traffic is logged by the agent servers; the proxy reports only its own problems.
  const proxy = Fastify({
    loggerInstance: logger.child({ component: 'proxy' }, { level: 'warn' }) as FastifyBaseLogger,
  });
  // Set once the proxy options exist (they need the runtime, which needs the origins).
  let upgradeAgents: ReturnType<typeof deploymentUpgrades> = (_req, socket) => void socket.destroy();
  const origins = new AgentOrigins({
    host: config.host,
    ports: config.agentPorts,
    stateFile: join(dataDir, 'runtime', 'agent-ports.json'),
    handler: (req, res) => proxy.routing(req, res),
    // WebSockets (the thread streaming protocol) take the same way as requests, with the same checks.
    upgrade: (req, socket, head) => upgradeAgents(req, socket, head),
    logger: logger.child({ component: 'agent-origins' }),
  });
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
    origins,
    maxConcurrentBuilds: config.maxConcurrentBuilds,
    maxBuildsPerWorkspace: config.maxBuildsPerWorkspace,
    limits: { defaultMemoryLimitMb: config.defaultMemoryLimitMb, cgroupParent: cgroup.dir },
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
    config.quotas,
  );
  const isForeign = createForeignKeyCheck(store, bootstrapKeysOf(config.bootstrapKey));
  const agentTraffic: ProxyOptions = {
    resolve: (id) => runtime.backend(id),
    deploymentAt: (req) => origins.deploymentAt(req),
    refuse: async (tenant, req) => {
      for (const value of credentialValues(req.headers)) {
        if (await isForeign(value, tenant))
          return "This request carries a platform API key or another workspace's, which never reach agents: use a key of this deployment's workspace, or an access token (POST /v2/deployments/<id>/access-tokens).";
      }
      return undefined;
    },
  };
  await deploymentProxy(proxy, agentTraffic);
  upgradeAgents = deploymentUpgrades(agentTraffic);
  await Promise.all([api.ready(), proxy.ready()]);

  const server = createFrontServer((req: IncomingMessage, res: ServerResponse) => {
    // Deployments used to answer here; the console's origin never serves tenant content.
    if (req.url?.startsWith(`${DEPLOYMENTS_PREFIX}/`)) {
      res.writeHead(404, { 'content-type': 'application/json; charset=utf-8' });
      res.end(
        JSON.stringify({
          detail:
            "Deployments are not served on the console's origin: each has a URL of its own (the url field of GET /v2/deployments/<id>).",
        }),
      );
      return;
    }
    api.routing(req, res);
  });
  await new Promise<void>((resolve, reject) => {
    server.once('error', reject);
    server.listen(config.port, config.host, () => resolve());
  });
  const { port } = server.address() as { port: number };
  const host = config.host.includes(':') ? `[${config.host}]` : config.host;
  const agentHost = host === '0.0.0.0' || host === '[::]' ? '127.0.0.1' : host;
  const url = `http://${agentHost}:${port}`;
  listeningUrl = url;
  runtime.setBaseUrl(url);

  const deployments = await store.list('AgentDeployment', store.namespace);
  await origins.restore(deployments.items.map((d) => d.spec.deploymentId));
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
    agentPorts:
      config.agentPorts === 'auto'
        ? `free ports of ${agentHost}`
        : `ports ${config.agentPorts.from}-${config.agentPorts.to} of ${agentHost}`,
    close() {
      closing ??= (async () => {
        await operator.stop();
        await publisher.stop();
        await runtime.shutdown();
        await origins.close();
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

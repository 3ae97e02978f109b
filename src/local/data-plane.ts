// The data plane of one machine, as `agentplane dev` and `agentplane listener --runtime local` both run it: the
// operator reconciling an embedded store with the local runtime, the tenants' key files the agents read, and the
// proxy in front of the agent servers. The two commands pass only what differs (their store, runtime settings and
// whether each deployment gets a port of its own).
import { mkdirSync, realpathSync, writeFileSync } from 'node:fs';
import { privateDir } from '../lib/private-files.ts';
import type { IncomingMessage, ServerResponse } from 'node:http';
import type { Duplex } from 'node:stream';
import { dirname, join } from 'node:path';
import Fastify, { type FastifyBaseLogger } from 'fastify';
import type { Logger } from '../lib/logger.ts';
import { zodSchemaController } from '../lib/http.ts';
import { fileKeySink } from '../control-plane/api-keys/key-publisher.ts';
import type { PlatformState } from '../state/types.ts';
import { createOperator } from '../operator/operator.ts';
import type { LocalRuntimeOptions } from '../operator/runtimes/local/context.ts';
import { LocalRuntime, PACKAGE_DIR } from '../operator/runtimes/local/index.ts';
import { detectSandbox, sharedTrees, type SandboxMode } from '../operator/runtimes/local/sandbox.ts';
import { deploymentProxy } from '../operator/runtimes/local/proxy.ts';
import type { ProxyOptions } from '../operator/runtimes/local/proxy-target.ts';
import { deploymentUpgrades, type UpgradeRelay } from '../operator/runtimes/local/proxy-upgrades.ts';
import { AgentOrigins, type AgentPorts } from '../operator/runtimes/local/agent-origins.ts';
import { storeLogSink } from '../operator/sources.ts';
import { deploymentDataKeys } from './data-keys.ts';

export type LocalDataPlaneOptions = {
  /** Made if missing; used by its real path, as the sandbox mounts and the local repo checks compare real paths. */
  dataDir: string;
  sandbox: SandboxMode;
  /** As root: the uid sandboxed builds and servers run as (detectSandbox's default when not given). */
  sandboxUid?: number;
  /** Folders local repo_url values may come from. */
  allowLocalRepos: string[];
  /** What the operator reconciles; the caller opened it and closes it. */
  store: PlatformState;
  logger: Logger;
  /** The runtime settings dev and the listener choose differently. */
  runtime: Omit<
    LocalRuntimeOptions,
    'dataDir' | 'logs' | 'logger' | 'sandbox' | 'allowLocalRepos' | 'protectedDirs' | 'authKeysFile' | 'origins'
  >;
  /**
   * Each deployment on a port of its own, so tenant code never shares an origin (dev). Without it, deployments
   * answer under /deployments/<id> of the caller's port, through handle and upgrade, next to /ok.
   */
  agentPorts?: { host: string; ports: AgentPorts; refuse: NonNullable<ProxyOptions['refuse']> };
  /** Called when a tenant's key file is first made here, still empty (dev fills it from its store at once). */
  onKeysFileMade?: (tenant: string) => void;
};

export type LocalDataPlane = {
  runtime: LocalRuntime;
  /** Which confinement builds and agent servers get, in one line. */
  isolation: string;
  /** Where each tenant's key hashes are written for its agents. */
  keyFiles: ReturnType<typeof fileKeySink>;
  /** The rules the runtime clones local repos by, for an API to refuse a repo_url that could never build. */
  localRepos: { allowedRoots: string[]; forbiddenRoots: string[] };
  /** Deployments under /deployments/<id>, and /ok (without agentPorts). */
  handle(req: IncomingMessage, res: ServerResponse): void;
  upgrade(req: IncomingMessage, socket: Duplex, head: Buffer): void;
  /** Once the caller listens at baseUrl: deployments get their URLs from it and the operator starts. */
  start(baseUrl: string): Promise<void>;
  /** Stops the operator and every agent server; the store stays open. */
  close(): Promise<void>;
};

export async function createLocalDataPlane(opts: LocalDataPlaneOptions): Promise<LocalDataPlane> {
  const { logger, store } = opts;
  // Builds, agents' data and key files: the platform's user's alone.
  privateDir(opts.dataDir);
  const dataDir = realpathSync(opts.dataDir);
  const { sandbox, reason } = await detectSandbox(
    opts.sandbox,
    { hidden: [dataDir], shared: sharedTrees(PACKAGE_DIR) },
    opts.sandboxUid,
  );
  const isolation = { sandbox: sandbox.kind, allowLocalRepos: opts.allowLocalRepos };
  if (sandbox.kind === 'none') logger.warn(isolation, `isolation: ${reason}`);
  else logger.info(isolation, `isolation: ${reason}`);

  const localRepos = {
    allowedRoots: opts.allowLocalRepos.map((d) => {
      try {
        return realpathSync(d);
      } catch {
        return d;
      }
    }),
    forbiddenRoots: [dataDir],
  };
  const keyFiles = fileKeySink(join(dataDir, 'runtime', 'auth'));
  const authKeysFile = (tenant: string): string => {
    const file = keyFiles.pathFor(tenant);
    // The agent (and its sandbox mount) needs the file before the first key hashes are written to it.
    mkdirSync(dirname(file), { recursive: true });
    try {
      writeFileSync(file, '{"hashes":[]}\n', { flag: 'wx' });
      opts.onKeysFileMade?.(tenant);
    } catch {
      // already there
    }
    return file;
  };

  // Agent traffic is logged by the agent servers; the proxy reports only its own problems.
  const proxy = Fastify({
    loggerInstance: logger.child({ component: 'proxy' }, { level: 'warn' }) as FastifyBaseLogger,
    // Its routes have no schemas: this only spares the process loading fastify's ajv compiler for nothing.
    schemaController: zodSchemaController,
  });
  // Set once the proxy options exist (they need the runtime, which needs the origins).
  let upgrade: (req: IncomingMessage, socket: Duplex, head: Buffer) => void = (_req, socket) => void socket.destroy();
  const ports = opts.agentPorts;
  const origins =
    ports &&
    new AgentOrigins({
      host: ports.host,
      ports: ports.ports,
      stateFile: join(dataDir, 'runtime', 'agent-ports.json'),
      handler: (req, res) => proxy.routing(req, res),
      // WebSockets (the thread streaming protocol) take the same way as requests, with the same checks.
      upgrade: (req, socket, head) => upgrade(req, socket, head),
      logger: logger.child({ component: 'agent-origins' }),
    });
  const runtime = new LocalRuntime({
    dataKeys: deploymentDataKeys(store),
    ...opts.runtime,
    dataDir: join(dataDir, 'runtime'),
    logs: storeLogSink(store),
    logger: logger.child({ component: 'local-runtime' }),
    sandbox,
    allowLocalRepos: localRepos.allowedRoots,
    protectedDirs: localRepos.forbiddenRoots,
    authKeysFile,
    origins,
  });
  // No child may outlive this process, whatever way it ends.
  const killChildren = () => runtime.killAllNow();
  process.once('exit', killChildren);

  const traffic: ProxyOptions = origins
    ? { resolve: (id) => runtime.backend(id), deploymentAt: (req) => origins.deploymentAt(req), refuse: ports.refuse }
    : { resolve: (id) => runtime.backend(id) };
  if (!origins) proxy.get('/ok', async () => ({ ok: true }));
  await deploymentProxy(proxy, traffic);
  const relays: UpgradeRelay = deploymentUpgrades(traffic);
  upgrade = relays;
  await proxy.ready();

  const operator = createOperator({ store, runtime, logger });
  let closing: Promise<void> | undefined;
  return {
    runtime,
    isolation: reason,
    keyFiles,
    localRepos,
    handle: (req, res) => proxy.routing(req, res),
    upgrade: (req, socket, head) => upgrade(req, socket, head),
    async start(baseUrl) {
      runtime.setBaseUrl(baseUrl);
      if (origins) {
        const deployments = await store.list('AgentDeployment', store.namespace);
        await origins.restore(deployments.items.map((d) => d.spec.deploymentId));
      }
      await operator.start();
    },
    close() {
      closing ??= (async () => {
        // Open WebSockets would hold the agent servers' stop and the listeners' close: they end first.
        relays.close();
        await operator.stop();
        await runtime.shutdown();
        await origins?.close();
        await proxy.close();
        process.removeListener('exit', killChildren);
      })();
      return closing;
    },
  };
}

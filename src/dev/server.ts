// One process: the control plane API and the web console on one port, and each deployment's agent server on a
// port of its own (agent-origins.ts), so tenant code never answers on the console's origin nor on another
// deployment's. The proxy in front of the agents refuses platform keys and sandboxes what they send back.
import { join } from 'node:path';
import type { IncomingMessage, ServerResponse } from 'node:http';
import type { FastifyInstance } from 'fastify';
import { createFrontServer, credentialValues, listenOn } from '../lib/http.ts';
import { lockDataDir } from '../lib/data-dir-lock.ts';
import type { Logger } from '../lib/logger.ts';
import { randomBytes } from 'node:crypto';
import { openEmbeddedPlatformState } from '../state/embedded/index.ts';
import { readKeyFile } from '../state/embedded/secret-box.ts';
import { derivedAuthKeyring } from '../lib/auth-crypto.ts';
import type { PlatformState } from '../state/types.ts';
import type { LocalRuntime } from '../operator/runtimes/local/index.ts';
import { detectCgroup } from '../operator/runtimes/local/limits-cgroup.ts';
import { DEPLOYMENTS_PREFIX } from '../operator/runtimes/local/proxy-target.ts';
import { createForeignKeyCheck } from '../control-plane/api-keys/keys.ts';
import { createLocalDataPlane } from '../local/data-plane.ts';
import { bootstrapKeysOf, buildControlPlane } from './control-plane.ts';
import { KeyPublisher } from '../control-plane/api-keys/key-publisher.ts';
import type { DevConfig } from './config.ts';
import { buildCredentialResolver } from '../git/credentials.ts';
import { createGitHubApp } from '../git/github-app.ts';
import { openSourceArchives } from '../state/source-archives.ts';
import { uploadSigningKey } from '../control-plane/services/source-uploads/signing.ts';

export type DevServer = {
  /** http://host:port */
  url: string;
  store: PlatformState;
  runtime: LocalRuntime;
  /** Which confinement builds and agent servers get, in one line. */
  isolation: string;
  /** Where deployments are served, in words: "ports 8100-8999 of 127.0.0.1" or "free ports of 127.0.0.1". */
  agentPorts: string;
  close(): Promise<void>;
};

export async function startDev(config: DevConfig, logger: Logger): Promise<DevServer> {
  // One platform per data folder: a second one would start a second agent server on every deployment's data and
  // rewrite the ports file. The store's own folder is locked too, as `agentplane control-plane` on it would.
  const owner = lockDataDir(config.dataDir, 'agentplane dev');
  const storeOwner = lockDataDir(join(config.dataDir, 'control-plane'), 'agentplane dev');
  const store = openEmbeddedPlatformState({ dataDir: join(config.dataDir, 'control-plane') });
  const github = config.github && createGitHubApp(config.github, logger);
  const isForeign = createForeignKeyCheck(store, bootstrapKeysOf(config.bootstrapKey));
  // Agents check callers against their tenant's key hashes, which this process keeps current in files (keys made
  // or revoked by the API or by `agentplane api-key` in another process reach them within a second).
  const onKeysFileMade = (tenant: string) => {
    publisher.forget(tenant);
    void publisher.sync([tenant]).catch(() => undefined);
  };
  const cgroup = await detectCgroup(config.cgroupParent);
  // Auth service: its keys derive from the store's secret key; agents get tokens signed with a key of this process
  // (they are restarted with it), and one machine may use OAuth providers on private addresses.
  const deploymentTokenKey = randomBytes(32);
  // Source tarballs `langgraph deploy` uploads: stored beside the store (the control plane writes, builds read), and
  // upload URLs signed with a key derived from the store's secret key (so they survive a restart until they expire).
  const storeSecret = readKeyFile(join(config.dataDir, 'control-plane'), true)!;
  const sourceArchives = openSourceArchives(join(config.dataDir, 'control-plane', 'source-archives'));
  const dataPlane = await createLocalDataPlane({
    dataDir: config.dataDir,
    sandbox: config.sandbox,
    sandboxUid: config.sandboxUid,
    allowLocalRepos: config.allowLocalRepos,
    store,
    logger,
    runtime: {
      databaseUrl: config.databaseUrl,
      healthTimeoutMs: config.healthTimeoutSecs * 1000,
      buildTimeoutMs: config.buildTimeoutSecs * 1000,
      keepBuilds: config.keepBuilds,
      gitCredential: buildCredentialResolver(store, github),
      sourceArchives,
      installCacheMaxBytes: config.installCacheMaxMb * 1024 * 1024,
      deploymentTokenKey,
      maxConcurrentBuilds: config.maxConcurrentBuilds,
      maxBuildsPerWorkspace: config.maxBuildsPerWorkspace,
      agentExecutorThreads: config.agentExecutorThreads,
      // A shorter idle "minute" (tests) is looked at more often too.
      ...(config.idleMinuteMs
        ? { idle: { minuteMs: config.idleMinuteMs, checkMs: Math.min(15_000, Math.ceil(config.idleMinuteMs / 4)) } }
        : {}),
      limits: {
        defaultMemoryLimitMb: config.defaultMemoryLimitMb,
        cgroupParent: cgroup.dir,
        maxProcesses: config.maxProcesses,
        diskLimitMb: config.diskLimitMb,
      },
    },
    agentPorts: {
      host: config.host,
      ports: config.agentPorts,
      refuse: async (tenant, req) => {
        for (const value of credentialValues(req.headers)) {
          if (await isForeign(value, tenant))
            return "This request carries a platform API key or another workspace's, which never reach agents: use a key of this deployment's workspace, or an access token (POST /v2/deployments/<id>/access-tokens).";
        }
        return undefined;
      },
    },
    onKeysFileMade,
  });
  logger.info(
    { cgroup: cgroup.dir ?? null, defaultMemoryLimitMb: config.defaultMemoryLimitMb },
    `resource limits: ${cgroup.dir ? cgroup.reason : `${cgroup.reason}; memory by rlimit, heap limit and watchdog, cpu not limited`}`,
  );
  const publisher = new KeyPublisher({
    store,
    sink: dataPlane.keyFiles,
    logger: logger.child({ component: 'key-publisher' }),
    intervalMs: 1000,
  });

  // OAuth redirect URIs and sign-in links start with the URL this process listens on (known once it listens).
  let listeningUrl = '';
  const api: FastifyInstance = await buildControlPlane(store, logger, {
    bootstrapKey: config.bootstrapKey,
    onKeysChanged: () => void publisher.sync().catch(() => undefined),
    github,
    auth: {
      keyring: derivedAuthKeyring(storeSecret),
      deploymentTokenKey,
      allowPrivateProviders: true,
      publicUrl: () => listeningUrl,
    },
    quotas: config.quotas,
    localRepos: dataPlane.localRepos,
    sourceUploads: {
      archives: sourceArchives,
      signingKey: uploadSigningKey(storeSecret),
      quota: {
        maxBytes: config.maxSourceUploadMbPerWorkspace * 1024 * 1024,
        maxCount: config.maxSourceUploadsPerWorkspace,
      },
      concurrency: {
        perWorkspace: Math.min(config.maxUploadsPerWorkspace, config.maxConcurrentUploads),
        overall: config.maxConcurrentUploads,
      },
    },
  });
  await api.ready();

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
  const url = await listenOn(server, config.port, config.host);
  listeningUrl = url;
  owner.describe({ url });
  storeOwner.describe({ url });

  await publisher.sync().catch(() => undefined);
  publisher.start();
  await dataPlane.start(url);

  const agentHost = new URL(url).hostname;
  let closing: Promise<void> | undefined;
  return {
    url,
    store,
    runtime: dataPlane.runtime,
    isolation: dataPlane.isolation,
    agentPorts:
      config.agentPorts === 'auto'
        ? `free ports of ${agentHost}`
        : `ports ${config.agentPorts.from}-${config.agentPorts.to} of ${agentHost}`,
    close() {
      closing ??= (async () => {
        await dataPlane.close();
        await publisher.stop();
        await new Promise<void>((resolve) => {
          server.close(() => resolve());
          server.closeAllConnections();
        });
        await api.close();
        await store.close();
        storeOwner.release();
        owner.release();
      })();
      return closing;
    },
  };
}

// Wires store and API together, listens, and shuts down gracefully.
import type { FastifyInstance } from 'fastify';
import { describeError } from '../lib/errors.ts';
import type { Logger } from '../lib/logger.ts';
import { createControlPlane } from './app.ts';
import { KeyPublisher } from './api-keys/key-publisher.ts';
import { tenantNamespaceName } from '../resources/index.ts';
import type { ControlPlaneConfig } from './config.ts';
import { derivedAuthKeyring, type AuthKeyring } from '../lib/auth-crypto.ts';
import { DataDirInUseError, lockDataDir, type DataDirLock } from '../lib/data-dir-lock.ts';
import { readKeyFile } from '../state/embedded/secret-box.ts';
import { openPlatformState, StateUnavailableError } from '../state/index.ts';
import { createGitHubApp } from '../git/github-app.ts';
import type { PlatformState } from '../state/types.ts';
import { openPostgresSourceArchives } from '../state/source-archives-postgres.ts';
import type { SourceArchiveStore } from '../state/source-archives.ts';
import { sourceFetchKey } from '../lib/source-fetch-token.ts';
import { uploadSigningKey } from './services/source-uploads/signing.ts';

export interface RunningControlPlane {
  app: FastifyInstance;
  store: PlatformState;
  url: string;
  close(): Promise<void>;
}

/**
 * The configured keyring; without one, the embedded store's secret key (given or its key file) is the root, once
 * --public-url is set (without it the auth service stays off: it has nowhere to send providers back to).
 */
function authKeyring(config: ControlPlaneConfig): AuthKeyring | undefined {
  if (config.auth.keyring) return config.auth.keyring;
  if (config.store !== 'embedded' || !config.auth.publicUrl) return undefined;
  const secret = config.secretKey ?? readKeyFile(config.dataDir, true);
  return secret && derivedAuthKeyring(secret);
}

/**
 * The shared hold of the embedded store's folder. A folder that cannot be made (a file in its path, no permission) is
 * the same one-line problem the store's own open reports; another process's exclusive hold is its own error.
 */
function lockStoreFolder(dataDir: string): DataDirLock {
  try {
    return lockDataDir(dataDir, 'agentplane control-plane', { shared: true });
  } catch (err) {
    if (err instanceof DataDirInUseError) throw err;
    throw new StateUnavailableError(`cannot open the embedded store in --data-dir ${dataDir}: ${describeError(err)}`);
  }
}

export async function startControlPlane(config: ControlPlaneConfig, logger: Logger): Promise<RunningControlPlane> {
  // Replicas may share an embedded store, but not with a platform (`dev`) that owns it: a shared hold of its lock.
  const owner = config.store === 'embedded' ? lockStoreFolder(config.dataDir) : undefined;
  let store: Awaited<ReturnType<typeof openPlatformState>>;
  try {
    store = await openPlatformState(config, logger);
  } catch (err) {
    owner?.release();
    throw err;
  }
  let archives: SourceArchiveStore | undefined;
  if (config.sourceUploads) {
    try {
      archives = await openPostgresSourceArchives({ url: config.sourceUploads.databaseUrl });
    } catch (err) {
      await store.close();
      owner?.release();
      throw new StateUnavailableError(
        `cannot use the source uploads database (--source-uploads-database-url): ${describeError(err)}`,
      );
    }
  }
  // In a cluster the agents read their tenant's key hashes from Secrets this process keeps current.
  const { enabled, prefix } = config.tenantNamespaces;
  const sink = store.tenantKeySink?.(enabled ? (tenant) => tenantNamespaceName(prefix, tenant) : undefined);
  const publisher = sink
    ? new KeyPublisher({
        store,
        sink,
        logger: logger.child({ component: 'key-publisher' }),
        intervalMs: 5_000,
      })
    : undefined;
  const app = await createControlPlane({
    store,
    logger,
    bootstrapKeys: config.bootstrapKeys,
    policy: config.policy,
    ...(enabled ? { referenceNamespace: (tenant: string) => tenantNamespaceName(prefix, tenant) } : {}),
    quotas: config.quotas,
    ...(config.registry ? { buildRegistry: config.registry } : {}),
    ...(config.registryTokens ? { registryTokens: config.registryTokens } : {}),
    ...(config.github ? { github: createGitHubApp(config.github, logger) } : {}),
    onKeysChanged: () => void publisher?.sync().catch(() => undefined),
    // A tenant's first deployment: its pods read the key set from a Secret that need not wait for the next pass. Not
    // with a namespace per tenant: there the operator creates the namespace (and this process's right to write in it)
    // only after the deployment, so a write now would be refused; the next pass writes it.
    ...(enabled ? {} : { onDeploymentCreated: () => void publisher?.sync().catch(() => undefined) }),
    auth: { ...config.auth, keyring: authKeyring(config) },
    ...(archives && config.sourceUploads
      ? {
          sourceUploads: {
            archives,
            signingKey: uploadSigningKey(config.sourceUploads.key),
            fetchKey: sourceFetchKey(config.sourceUploads.key),
          },
        }
      : {}),
  });
  publisher?.start();
  const url = await app.listen({ host: config.host, port: config.port });
  owner?.describe({ url });
  logger.info({ url, store: config.store, namespace: store.namespace }, 'control plane listening');
  let closing: Promise<void> | null = null;
  return {
    app,
    store,
    url,
    close() {
      closing ??= (async () => {
        await app.close();
        await publisher?.stop();
        await archives?.close();
        await store.close();
        owner?.release();
      })();
      return closing;
    },
  };
}

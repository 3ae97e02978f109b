// What every deployment operation works over, and the guards they share: the per-tenant lock around name claims
// and the hourly revision quota.
import type { Logger } from '../../../lib/logger.ts';
import type { PlatformState } from '../../../state/types.ts';
import type { GitHubApp } from '../../../git/github-app.ts';
import type { Quotas } from '../quotas.ts';
import type { RepoPolicy } from '../../../git/repo-url.ts';
import type { createTenantChecks } from './tenant-checks.ts';

export const LABEL_NAME_HASH = 'agentplane.dev/name-hash';
/** Comma-separated environment variable names of the current secret set (values live in the set only). */
export const SECRET_NAMES_ANNOTATION = 'agentplane.dev/secret-names';
/** Comma-separated keys (delivery ids, pushed commits) of the last pushes that made a revision (build on push). */
export const PUSH_DELIVERIES_ANNOTATION = 'agentplane.dev/push-deliveries';

/** Which stored bytes a workspace's source_tarball_path names (services/source-uploads). */
export type TarballResolver = {
  resolve(tenant: string, deploymentId: string, objectPath: string): Promise<{ sha256: string }>;
  /** Deletes the workspace's tarballs nothing references any more (called after a deployment is deleted). */
  sweep?(tenant: string): Promise<unknown>;
};

export type DeploymentDeps = {
  store: PlatformState;
  /** The store's namespace, where deployments and revisions live. */
  ns: string;
  logger: Logger;
  quotas: Quotas;
  checks: ReturnType<typeof createTenantChecks>;
  github?: GitHubApp;
  localRepos?: RepoPolicy;
  sourceUploads?: TarballResolver;
  /** The build registry prefix: an image_uri under it must be in its deployment's own repository (own-images.ts). */
  buildRegistry?: string;
  /** The control plane hands out registry push tokens (internal_docker deployments can get images). */
  pushTokens?: boolean;
  /**
   * Name uniqueness per tenant: the store's name claims make it atomic across processes (replicas); these locks only
   * keep one process from racing itself (and from creating deployments that lose the claim and are removed again).
   */
  tenantLocks: Map<string, Promise<unknown>>;
};

export function withTenantLock<T>(deps: DeploymentDeps, tenant: string, fn: () => Promise<T>): Promise<T> {
  const locks = deps.tenantLocks;
  const prev = locks.get(tenant) ?? Promise.resolve();
  const next = prev.then(fn, fn);
  const tail = next.catch(() => undefined);
  locks.set(tenant, tail);
  void tail.then(() => {
    if (locks.get(tenant) === tail) locks.delete(tenant);
  });
  return next;
}

/** Runs `fn`, which makes one revision, within the hourly revision quota; a failed `fn` gives its place back. */
export async function withRevisionQuota<T>(deps: DeploymentDeps, tenant: string, fn: () => Promise<T>): Promise<T> {
  const giveBack = await deps.quotas.reserveRevision(tenant);
  try {
    return await fn();
  } catch (err) {
    await giveBack().catch((e: unknown) =>
      deps.logger.warn({ err: e, tenant }, 'giving a revision quota place back failed'),
    );
    throw err;
  }
}

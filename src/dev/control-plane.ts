// The control plane as the dev process embeds it: H3's app over the embedded store, plus an optional bootstrap
// admin key from the environment (any tenant), so a first call needs no separate key-creation step.
import type { FastifyInstance } from 'fastify';
import type { Logger } from '../lib/logger.ts';
import { createControlPlane } from '../control-plane/app.ts';
import type { BootstrapKey } from '../control-plane/api-keys/keys.ts';
import type { AuthServiceOptions } from '../control-plane/services/oauth/setup.ts';
import type { PlatformState } from '../state/types.ts';
import type { GitHubApp } from '../git/github-app.ts';
import type { QuotaLimits } from '../control-plane/services/quotas.ts';
import type { RepoPolicy } from '../git/repo-url.ts';
import type { SourceUploadOptions } from '../control-plane/services/source-uploads/index.ts';

export function bootstrapKeysOf(bootstrapKey?: string): BootstrapKey[] {
  return bootstrapKey ? [{ key: bootstrapKey, tenants: ['*'] }] : [];
}

/** What the dev process passes on to the control plane besides its store and logger. */
export type DevControlPlaneOptions = {
  /** AGENTPLANE_BOOTSTRAP_API_KEY: an admin key for every workspace. */
  bootstrapKey?: string;
  /** Called when a workspace's API keys change (the agents' key files follow). */
  onKeysChanged?: () => void;
  github?: GitHubApp;
  auth?: AuthServiceOptions;
  quotas?: QuotaLimits;
  localRepos?: RepoPolicy;
  sourceUploads?: SourceUploadOptions;
};

export async function buildControlPlane(
  store: PlatformState,
  logger: Logger,
  { bootstrapKey, ...rest }: DevControlPlaneOptions,
): Promise<FastifyInstance> {
  return createControlPlane({
    store,
    logger: logger.child({ component: 'control-plane' }),
    bootstrapKeys: bootstrapKeysOf(bootstrapKey),
    ...rest,
  });
}

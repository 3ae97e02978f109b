// The control plane as the dev process embeds it: H3's app over the embedded store, plus an optional bootstrap
// admin key from the environment (any tenant), so a first call needs no separate key-creation step.
import type { FastifyInstance } from 'fastify';
import type { Logger } from '../lib/logger.ts';
import { createControlPlane } from '../control-plane/app.ts';
import type { BootstrapKey } from '../control-plane/auth/keys.ts';
import type { AuthServiceOptions } from '../control-plane/services/auth-setup.ts';
import type { ControlPlaneStore } from '../control-plane/store/types.ts';
import type { GitHubApp } from '../control-plane/services/integrations-github.ts';
import type { QuotaLimits } from '../control-plane/services/quotas.ts';

export function bootstrapKeysOf(bootstrapKey?: string): BootstrapKey[] {
  return bootstrapKey ? [{ key: bootstrapKey, tenants: ['*'] }] : [];
}

export async function buildControlPlane(
  store: ControlPlaneStore,
  logger: Logger,
  bootstrapKey?: string,
  onKeysChanged?: () => void,
  github?: GitHubApp,
  auth?: AuthServiceOptions,
  quotas?: QuotaLimits,
): Promise<FastifyInstance> {
  return createControlPlane({
    store,
    logger: logger.child({ component: 'control-plane' }),
    bootstrapKeys: bootstrapKeysOf(bootstrapKey),
    onKeysChanged,
    github,
    auth,
    quotas,
  });
}

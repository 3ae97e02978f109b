// Wires the auth service from the control plane's settings: its keyring, its provider fetch policy and the
// authenticator that also accepts deployment tokens.
import type { Logger } from '../../lib/logger.ts';
import type { Principal } from '../auth/keys.ts';
import type { ControlPlaneStore } from '../store/types.ts';
import { createAuthService as createService } from './auth.ts';
import type { AuthKeyring } from './auth-crypto.ts';
import { createOAuth } from './auth-oauth.ts';
import { createAuthServiceAuthenticator } from './auth-principal.ts';
import type { Quotas } from './quotas.ts';

export type AuthServiceOptions = {
  /** Keys of client secrets and tokens at rest; without them the auth endpoints answer 503. */
  keyring?: AuthKeyring;
  /** Key of deployment tokens (AGENTPLANE_DEPLOYMENT_TOKEN_KEY); without it deployment tokens are refused. */
  deploymentTokenKey?: Buffer;
  /** Public base URL of the control plane, for redirect URIs (AGENTPLANE_PUBLIC_URL). */
  publicUrl?: string;
  /** Allow http and private/loopback provider addresses (one-machine installs, tests). Default false. */
  allowPrivateProviders?: boolean;
  /** Clock (tests). */
  now?: () => number;
  /** The control plane's per-workspace quotas (auth providers). */
  quotas?: Quotas;
};

export function createAuthService(
  store: ControlPlaneStore,
  logger: Logger,
  apiKeys: (key: string | undefined, tenant: string | undefined) => Promise<Principal>,
  opts: AuthServiceOptions = {},
) {
  const service = createService({
    store,
    oauth: createOAuth({ allowPrivate: opts.allowPrivateProviders ?? false }),
    logger: logger.child({ component: 'auth-service' }),
    ...(opts.keyring ? { keyring: opts.keyring } : {}),
    ...(opts.now ? { now: opts.now } : {}),
    ...(opts.quotas ? { quotas: opts.quotas } : {}),
  });
  const authenticate = createAuthServiceAuthenticator({ store, apiKeys, deploymentTokenKey: opts.deploymentTokenKey });
  return { service, authenticate };
}

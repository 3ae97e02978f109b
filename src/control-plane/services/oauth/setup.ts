// Wires the auth service from the control plane's settings: its keyring, its provider fetch policy and the
// authenticator that also accepts deployment tokens.
import type { Logger } from '../../../lib/logger.ts';
import type { Principal } from '../../api-keys/keys.ts';
import type { PlatformState } from '../../../state/types.ts';
import { createAuthService } from './index.ts';
import type { AuthKeyring } from '../../../lib/auth-crypto.ts';
import { createOAuth } from './oauth.ts';
import { createAuthServiceAuthenticator } from './principal.ts';
import type { Quotas } from '../quotas.ts';

export type AuthServiceOptions = {
  /** Keys of client secrets and tokens at rest; without them the auth endpoints answer 503. */
  keyring?: AuthKeyring;
  /** Key of deployment tokens (AGENTPLANE_DEPLOYMENT_TOKEN_KEY); without it deployment tokens are refused. */
  deploymentTokenKey?: Buffer;
  /**
   * Public base URL of the control plane (--public-url), the only source of redirect URIs and start links; required
   * with a keyring. A function when it is known only once the server listens (`agentplane dev`, tests on port 0).
   */
  publicUrl?: string | (() => string);
  /** Allow http and private/loopback provider addresses (one-machine installs, tests). Default false. */
  allowPrivateProviders?: boolean;
  /** Clock (tests). */
  now?: () => number;
  /** The control plane's per-workspace quotas (auth providers). */
  quotas?: Quotas;
};

export function wireAuthService(
  store: PlatformState,
  logger: Logger,
  apiKeys: (key: string | undefined, tenant: string | undefined) => Promise<Principal>,
  opts: AuthServiceOptions = {},
) {
  if (opts.keyring && !opts.publicUrl) {
    // Never the request's Host: a forged Host would send the provider's code to whoever names it.
    throw new Error(
      'The auth service needs the public URL (--public-url, AGENTPLANE_PUBLIC_URL): redirect URIs are built from it',
    );
  }
  const service = createAuthService({
    store,
    ...(opts.publicUrl ? { publicUrl: opts.publicUrl } : {}),
    oauth: createOAuth({ allowPrivate: opts.allowPrivateProviders ?? false }),
    logger: logger.child({ component: 'auth-service' }),
    ...(opts.keyring ? { keyring: opts.keyring } : {}),
    ...(opts.now ? { now: opts.now } : {}),
    ...(opts.quotas ? { quotas: opts.quotas } : {}),
  });
  const authenticate = createAuthServiceAuthenticator({ store, apiKeys, deploymentTokenKey: opts.deploymentTokenKey });
  return { service, authenticate };
}

// Who may call the auth service: an API key of the workspace (like every other group), or the deployment token the
// operator gave a deployed agent (lib/deployment-token.ts), which acts for its own workspace here and nowhere else.
import { ForbiddenError, NotFoundError, UnauthorizedError } from '../../../lib/errors.ts';
import { DEPLOYMENT_TOKEN_PREFIX, verifyDeploymentToken } from '../../../lib/deployment-token.ts';
import { deploymentName } from '../../../resources/index.ts';
import type { Principal } from '../../api-keys/keys.ts';
import type { ResourceStore } from '../../../state/resources.ts';

export function createAuthServiceAuthenticator(opts: {
  store: ResourceStore & { readonly namespace: string };
  /** The key deployment tokens are signed with; undefined: deployment tokens are refused. */
  deploymentTokenKey?: Buffer;
  /** The authenticator of API keys (createAuthenticator). */
  apiKeys: (key: string | undefined, tenant: string | undefined) => Promise<Principal>;
}) {
  return async function authenticate(key: string | undefined, tenant: string | undefined): Promise<Principal> {
    if (!key?.startsWith(DEPLOYMENT_TOKEN_PREFIX)) return opts.apiKeys(key, tenant);
    const claims = opts.deploymentTokenKey && verifyDeploymentToken(opts.deploymentTokenKey, key);
    if (!claims) throw new UnauthorizedError('Invalid deployment token.');
    if (tenant !== undefined && tenant !== claims.tenant) {
      throw new ForbiddenError(`This deployment token may not act for workspace ${tenant}.`);
    }
    // The token lives as long as its deployment: deleting the deployment revokes it.
    const dep = await opts.store
      .get('AgentDeployment', opts.store.namespace, deploymentName(claims.deploymentId))
      .catch((err: unknown) => {
        if (err instanceof NotFoundError) return undefined;
        throw err;
      });
    if (!dep || dep.spec.tenantId !== claims.tenant || dep.metadata.deletionTimestamp) {
      throw new UnauthorizedError('Invalid deployment token (its deployment no longer exists).');
    }
    return { keyId: `deployment:${claims.deploymentId}`, tenant: claims.tenant, admin: false };
  };
}

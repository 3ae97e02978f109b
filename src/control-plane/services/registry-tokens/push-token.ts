// Push tokens: what `langgraph deploy` logs in to the registry with (the password of HTTP Basic at the token
// endpoint). `apr_<claims, base64url JSON>.<HMAC-SHA256>`: the claims name one workspace's one deployment and an
// expiry, so a token opens that deployment's repository for a quarter of an hour and nothing else. Opaque to the
// client: only the control plane, which holds the key, reads it.
import { mintSignedToken, readSignedToken, type SignedTokenKind } from '../../../lib/signed-token.ts';

export const PUSH_TOKEN_PREFIX = 'apr_';

export type PushTokenClaims = {
  tenant: string;
  deploymentId: string;
  /** Seconds since the epoch. */
  expires: number;
};

const KIND: SignedTokenKind = { prefix: PUSH_TOKEN_PREFIX, label: 'agentplane registry push' };

export function mintPushToken(key: Buffer, claims: PushTokenClaims): string {
  return mintSignedToken(KIND, key, { t: claims.tenant, d: claims.deploymentId, e: claims.expires });
}

/** The claims of a token this key signed (expired or not: the caller compares `expires`), or undefined. */
export function verifyPushToken(key: Buffer, token: string): PushTokenClaims | undefined {
  const c = readSignedToken(KIND, key, token);
  if (!c || typeof c.t !== 'string' || typeof c.d !== 'string' || typeof c.e !== 'number') return undefined;
  return { tenant: c.t, deploymentId: c.d, expires: c.e };
}

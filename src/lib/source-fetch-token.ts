// Source fetch tokens: what a cluster build Job of an uploaded tarball (internal_source) shows the control plane to
// download exactly that tarball. `apf_<claims, base64url JSON>.<HMAC-SHA256>`: the claims name the workspace, the
// deployment, the revision, the tarball's SHA-256 and an expiry, so a token opens one workspace's one tarball for
// about as long as the build may run, and nothing else. The operator mints them and the control plane checks them,
// each with a key derived from the source uploads key they share (AGENTPLANE_SOURCE_UPLOADS_KEY); the key that signs
// upload URLs is derived from it too, under another label, so neither kind of signature passes for the other.
import { hkdfSync } from 'node:crypto';
import { mintSignedToken, readSignedToken, type SignedTokenKind } from './signed-token.ts';

export const SOURCE_FETCH_TOKEN_PREFIX = 'apf_';

export type SourceFetchClaims = {
  tenant: string;
  deploymentId: string;
  revision: string;
  sha256: string;
  /** Seconds since the epoch. */
  expires: number;
};

/** The key of fetch tokens, derived from the shared source uploads key. */
export function sourceFetchKey(sourceUploadsKey: Buffer): Buffer {
  return Buffer.from(hkdfSync('sha256', sourceUploadsKey, Buffer.alloc(0), 'agentplane source fetch tokens v1', 32));
}

const KIND: SignedTokenKind = { prefix: SOURCE_FETCH_TOKEN_PREFIX, label: 'agentplane source fetch' };

export function mintSourceFetchToken(key: Buffer, claims: SourceFetchClaims): string {
  const { tenant: t, deploymentId: d, revision: r, sha256: s, expires: e } = claims;
  return mintSignedToken(KIND, key, { t, d, r, s, e });
}

/** The claims of a token this key signed (expired or not: the caller compares `expires`), or undefined. */
export function verifySourceFetchToken(key: Buffer, token: string): SourceFetchClaims | undefined {
  const c = readSignedToken(KIND, key, token);
  if (
    !c ||
    typeof c.t !== 'string' ||
    typeof c.d !== 'string' ||
    typeof c.r !== 'string' ||
    typeof c.s !== 'string' ||
    typeof c.e !== 'number'
  ) {
    return undefined;
  }
  return { tenant: c.t, deploymentId: c.d, revision: c.r, sha256: c.s, expires: c.e };
}

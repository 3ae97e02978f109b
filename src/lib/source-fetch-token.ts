// Source fetch tokens: what a cluster build Job of an uploaded tarball (internal_source) shows the control plane to
// download exactly that tarball. `apf_<claims, base64url JSON>.<HMAC-SHA256>`: the claims name the workspace, the
// deployment, the revision, the tarball's SHA-256 and an expiry, so a token opens one workspace's one tarball for
// about as long as the build may run, and nothing else. The operator mints them and the control plane checks them,
// each with a key derived from the source uploads key they share (AGENTPLANE_SOURCE_UPLOADS_KEY); the key that signs
// upload URLs is derived from it too, under another label, so neither kind of signature passes for the other.
import { createHmac, hkdfSync, timingSafeEqual } from 'node:crypto';

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

function sign(key: Buffer, payload: string): Buffer {
  return createHmac('sha256', key).update(`agentplane source fetch\n${payload}`).digest();
}

export function mintSourceFetchToken(key: Buffer, claims: SourceFetchClaims): string {
  const payload = Buffer.from(
    JSON.stringify({
      t: claims.tenant,
      d: claims.deploymentId,
      r: claims.revision,
      s: claims.sha256,
      e: claims.expires,
    }),
  ).toString('base64url');
  return `${SOURCE_FETCH_TOKEN_PREFIX}${payload}.${sign(key, payload).toString('base64url')}`;
}

/** The claims of a token this key signed (expired or not: the caller compares `expires`), or undefined. */
export function verifySourceFetchToken(key: Buffer, token: string): SourceFetchClaims | undefined {
  if (!token.startsWith(SOURCE_FETCH_TOKEN_PREFIX)) return undefined;
  const [payload, sig, ...rest] = token.slice(SOURCE_FETCH_TOKEN_PREFIX.length).split('.');
  if (!payload || !sig || rest.length) return undefined;
  const given = Buffer.from(sig, 'base64url');
  const expected = sign(key, payload);
  if (given.length !== expected.length || !timingSafeEqual(given, expected)) return undefined;
  try {
    const c = JSON.parse(Buffer.from(payload, 'base64url').toString('utf8')) as Record<string, unknown>;
    if (
      typeof c.t !== 'string' ||
      typeof c.d !== 'string' ||
      typeof c.r !== 'string' ||
      typeof c.s !== 'string' ||
      typeof c.e !== 'number'
    ) {
      return undefined;
    }
    return { tenant: c.t, deploymentId: c.d, revision: c.r, sha256: c.s, expires: c.e };
  } catch {
    return undefined;
  }
}

// Push tokens: what `langgraph deploy` logs in to the registry with (the password of HTTP Basic at the token
// endpoint). `apr_<claims, base64url JSON>.<HMAC-SHA256>`: the claims name one workspace's one deployment and an
// expiry, so a token opens that deployment's repository for a quarter of an hour and nothing else. Opaque to the
// client: only the control plane, which holds the key, reads it.
import { createHmac, timingSafeEqual } from 'node:crypto';

export const PUSH_TOKEN_PREFIX = 'apr_';

export type PushTokenClaims = {
  tenant: string;
  deploymentId: string;
  /** Seconds since the epoch. */
  expires: number;
};

function sign(key: Buffer, payload: string): Buffer {
  return createHmac('sha256', key).update(`agentplane registry push\n${payload}`).digest();
}

export function mintPushToken(key: Buffer, claims: PushTokenClaims): string {
  const payload = Buffer.from(JSON.stringify({ t: claims.tenant, d: claims.deploymentId, e: claims.expires })).toString(
    'base64url',
  );
  return `${PUSH_TOKEN_PREFIX}${payload}.${sign(key, payload).toString('base64url')}`;
}

/** The claims of a token this key signed (expired or not: the caller compares `expires`), or undefined. */
export function verifyPushToken(key: Buffer, token: string): PushTokenClaims | undefined {
  if (!token.startsWith(PUSH_TOKEN_PREFIX)) return undefined;
  const [payload, sig, ...rest] = token.slice(PUSH_TOKEN_PREFIX.length).split('.');
  if (!payload || !sig || rest.length) return undefined;
  const given = Buffer.from(sig, 'base64url');
  const expected = sign(key, payload);
  if (given.length !== expected.length || !timingSafeEqual(given, expected)) return undefined;
  try {
    const c = JSON.parse(Buffer.from(payload, 'base64url').toString('utf8')) as Record<string, unknown>;
    if (typeof c.t !== 'string' || typeof c.d !== 'string' || typeof c.e !== 'number') return undefined;
    return { tenant: c.t, deploymentId: c.d, expires: c.e };
  } catch {
    return undefined;
  }
}

// Opaque tokens the platform signs for itself: `<prefix><claims, base64url JSON>.<HMAC-SHA256>`. The MAC covers a
// label naming the kind of token before the claims, so a token of one kind never passes for another even under the
// same key. Only a holder of the key can mint or read one; the claims are not secret, only unforgeable.
import { createHmac, timingSafeEqual } from 'node:crypto';

export type SignedTokenKind = {
  /** What every token of the kind starts with (e.g. "apf_"). */
  prefix: string;
  /** The label the MAC covers with the claims. */
  label: string;
};

function sign(kind: SignedTokenKind, key: Buffer, payload: string): Buffer {
  return createHmac('sha256', key).update(`${kind.label}\n${payload}`).digest();
}

export function mintSignedToken(kind: SignedTokenKind, key: Buffer, claims: Record<string, unknown>): string {
  const payload = Buffer.from(JSON.stringify(claims)).toString('base64url');
  return `${kind.prefix}${payload}.${sign(kind, key, payload).toString('base64url')}`;
}

/** The claims of a token of this kind that this key signed, or undefined (wrong kind, malformed or forged). */
export function readSignedToken(
  kind: SignedTokenKind,
  key: Buffer,
  token: string,
): Record<string, unknown> | undefined {
  if (!token.startsWith(kind.prefix)) return undefined;
  const [payload, sig, ...rest] = token.slice(kind.prefix.length).split('.');
  if (!payload || !sig || rest.length) return undefined;
  const given = Buffer.from(sig, 'base64url');
  const expected = sign(kind, key, payload);
  if (given.length !== expected.length || !timingSafeEqual(given, expected)) return undefined;
  try {
    const claims: unknown = JSON.parse(Buffer.from(payload, 'base64url').toString('utf8'));
    return claims && typeof claims === 'object' && !Array.isArray(claims)
      ? (claims as Record<string, unknown>)
      : undefined;
  } catch {
    return undefined;
  }
}

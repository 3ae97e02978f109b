// The key registry bearer tokens are signed with: a PEM private key (EC P-256 -> ES256, RSA >= 2048 bits -> RS256)
// whose public half the registry trusts (a certificate in its rootcertbundle, or a jwks file). Push tokens, the
// opaque credential `langgraph deploy` logs in with, are HMACs under a key derived from it, so one secret configures
// both and a push token can never pass for a registry token (the registry accepts no HMAC under our public key).
import { createHash, createPrivateKey, createPublicKey, hkdfSync, type KeyObject } from 'node:crypto';

export type RegistrySigner = {
  privateKey: KeyObject;
  alg: 'ES256' | 'RS256';
  /** The JWT header `kid` the registry looks the key up by (registry/auth/token: the key's JWK thumbprint). */
  kid: string;
  /** The public key as a JWK with its kid, what a registry's `jwks` file lists. */
  publicJwk: Record<string, string>;
  /** HMAC key of push tokens. */
  pushTokenKey: Buffer;
};

/** The signer of a PEM private key, or an Error saying what is wrong with it (no key material in the message). */
export function registrySignerFromPem(pem: string): RegistrySigner {
  let privateKey: KeyObject;
  try {
    privateKey = createPrivateKey(pem);
  } catch {
    throw new Error(
      'is not a PEM private key (PKCS#8, SEC1 EC or PKCS#1 RSA; e.g. openssl ecparam -genkey -name prime256v1)',
    );
  }
  const details = privateKey.asymmetricKeyDetails ?? {};
  let alg: RegistrySigner['alg'];
  if (privateKey.asymmetricKeyType === 'ec' && details.namedCurve === 'prime256v1') alg = 'ES256';
  else if (privateKey.asymmetricKeyType === 'rsa' && (details.modulusLength ?? 0) >= 2048) alg = 'RS256';
  else {
    throw new Error(
      `must be an EC P-256 or an RSA (2048 bits or more) key, not ${privateKey.asymmetricKeyType ?? 'unknown'}` +
        `${details.namedCurve ? ` ${details.namedCurve}` : details.modulusLength ? ` ${details.modulusLength}-bit` : ''}`,
    );
  }
  const jwk = createPublicKey(privateKey).export({ format: 'jwk' }) as Record<string, string>;
  const kid = registryKeyId(jwk);
  const der = privateKey.export({ type: 'pkcs8', format: 'der' });
  const pushTokenKey = Buffer.from(hkdfSync('sha256', der, Buffer.alloc(0), 'agentplane registry push tokens v1', 32));
  return { privateKey, alg, kid, publicJwk: { ...jwk, kid, alg, use: 'sig' }, pushTokenKey };
}

/**
 * The kid CNCF Distribution (3.x) derives from a trusted certificate's key: SHA-256 over the RFC 7638 member string,
 * base64url. Hand-written rather than jose's thumbprint because Distribution writes EC coordinates as Go's
 * big.Int.Bytes() does, without leading zero bytes, where RFC 7638 keeps them (one key in ~128 would differ).
 */
function registryKeyId(jwk: Record<string, string>): string {
  const unpadded = (b64: string) => {
    const bytes = Buffer.from(b64, 'base64url');
    let i = 0;
    while (i < bytes.length - 1 && bytes[i] === 0) i++;
    return bytes.subarray(i).toString('base64url');
  };
  const members =
    jwk.kty === 'EC'
      ? `{"crv":"${jwk.crv}","kty":"EC","x":"${unpadded(jwk.x!)}","y":"${unpadded(jwk.y!)}"}`
      : `{"e":"${jwk.e}","kty":"RSA","n":"${jwk.n}"}`;
  return createHash('sha256').update(members).digest('base64url');
}

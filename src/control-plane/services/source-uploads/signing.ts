// Upload URLs are capabilities: whoever holds one may PUT one tarball, for one workspace's deployment, under one
// object path, until it expires, up to a size. All of that is in the URL and bound by an HMAC-SHA256 under a key
// derived from the platform's secret key, so the URL works without an API key (the CLI PUTs it bare) and changing
// any part of it breaks the signature.
import { createHmac, hkdfSync, timingSafeEqual } from 'node:crypto';

export type UploadGrant = {
  tenant: string;
  deploymentId: string;
  uploadId: string;
  /** Seconds since the epoch. */
  expires: number;
  maxBytes: number;
};

/** The upload-signing key, derived from the platform's secret key (a key of its own, never the secret key itself). */
export function uploadSigningKey(secretKey: Buffer): Buffer {
  return Buffer.from(hkdfSync('sha256', secretKey, Buffer.alloc(0), 'agentplane source upload urls v1', 32));
}

function mac(key: Buffer, g: UploadGrant): Buffer {
  const fields = [g.tenant, g.deploymentId, g.uploadId, String(g.expires), String(g.maxBytes)];
  // NUL-separated: no field may move its bytes into a neighbour (tenant ids and ids carry no NUL).
  return createHmac('sha256', key)
    .update(`agentplane-upload\0${fields.join('\0')}`)
    .digest();
}

export function signGrant(key: Buffer, g: UploadGrant): string {
  return mac(key, g).toString('base64url');
}

export function verifyGrant(key: Buffer, g: UploadGrant, signature: string): boolean {
  const given = Buffer.from(signature, 'base64url');
  const want = mac(key, g);
  return given.length === want.length && timingSafeEqual(given, want);
}

// Encryption of OAuth client secrets and tokens at rest: AES-256-GCM (node:crypto), one random IV per value, the
// value's place (kind/tenant/name) as additional data so a ciphertext cannot be moved to another record. A keyring
// holds the current key (every write) and older keys (reads only), named by an id written into each value, so keys
// rotate without downtime: `ak1:<key id>:<iv>:<tag>:<ciphertext>` (base64).
import { createCipheriv, createDecipheriv, hkdfSync, randomBytes } from 'node:crypto';

const VERSION = 'ak1';
const KEY_ID = /^[A-Za-z0-9_-]{1,32}$/;

/** The keyring cannot open a value (unknown key id, wrong key, damaged value). */
export class AuthKeyError extends Error {}

export type AuthKeyring = {
  /** Id of the key every new value is sealed with. */
  currentId: string;
  keys: ReadonlyMap<string, Buffer>;
};

/**
 * Parses `id=base64,id2=base64` (AGENTPLANE_AUTH_ENCRYPTION_KEYS): the first entry is the current key, the others
 * only open values written before a rotation. Each key is the base64 of exactly 32 bytes.
 */
export function parseAuthKeyring(text: string): AuthKeyring {
  const keys = new Map<string, Buffer>();
  let currentId: string | undefined;
  for (const entry of text
    .split(',')
    .map((e) => e.trim())
    .filter(Boolean)) {
    const eq = entry.indexOf('=');
    const id = eq > 0 ? entry.slice(0, eq) : '';
    if (!KEY_ID.test(id))
      throw new AuthKeyError('each entry is <id>=<base64 of 32 bytes>; ids are 1-32 of A-Z a-z 0-9 _ -');
    const key = Buffer.from(entry.slice(eq + 1), 'base64');
    if (key.length !== 32) throw new AuthKeyError(`key "${id}" must be the base64 of exactly 32 bytes`);
    if (keys.has(id)) throw new AuthKeyError(`key id "${id}" is listed twice`);
    keys.set(id, key);
    currentId ??= id;
  }
  if (!currentId) throw new AuthKeyError('no key given');
  return { currentId, keys };
}

/** A keyring of one key derived from another secret (the embedded store's key), for one-machine installs. */
export function derivedAuthKeyring(secret: Buffer): AuthKeyring {
  const key = Buffer.from(hkdfSync('sha256', secret, Buffer.alloc(0), 'agentplane auth service v1', 32));
  return { currentId: 'store', keys: new Map([['store', key]]) };
}

export function sealValue(ring: AuthKeyring, plaintext: string, aad: string): string {
  const key = ring.keys.get(ring.currentId)!;
  const iv = randomBytes(12);
  const cipher = createCipheriv('aes-256-gcm', key, iv);
  cipher.setAAD(Buffer.from(aad, 'utf8'));
  const ct = Buffer.concat([cipher.update(plaintext, 'utf8'), cipher.final()]);
  return [
    VERSION,
    ring.currentId,
    iv.toString('base64'),
    cipher.getAuthTag().toString('base64'),
    ct.toString('base64'),
  ].join(':');
}

/** Opens a sealed value; `stale` is true when it was sealed with a key other than the current one. */
export function openValue(ring: AuthKeyring, sealed: string, aad: string): { value: string; stale: boolean } {
  const [version, id, iv, tag, ct] = sealed.split(':');
  if (version !== VERSION || !id || iv === undefined || tag === undefined || ct === undefined) {
    throw new AuthKeyError('unknown format of an encrypted value');
  }
  const key = ring.keys.get(id);
  if (!key) throw new AuthKeyError(`value encrypted with key "${id}", which is not in the keyring`);
  try {
    const decipher = createDecipheriv('aes-256-gcm', key, Buffer.from(iv, 'base64'));
    decipher.setAAD(Buffer.from(aad, 'utf8'));
    decipher.setAuthTag(Buffer.from(tag, 'base64'));
    const value = Buffer.concat([decipher.update(Buffer.from(ct, 'base64')), decipher.final()]).toString('utf8');
    return { value, stale: id !== ring.currentId };
  } catch {
    throw new AuthKeyError(`key "${id}" does not open this value (wrong key or damaged value)`);
  }
}

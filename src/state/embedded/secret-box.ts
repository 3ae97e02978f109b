// Secret values at rest in the embedded store: AES-256-GCM (node:crypto), one random IV per value, the value's place
// (namespace/set/variable) as additional data so a ciphertext cannot be moved to another variable. Stored as
// `v1:<iv>:<tag>:<ciphertext>` (base64) so the format can change later.
import { createCipheriv, createDecipheriv, randomBytes } from 'node:crypto';
import { linkSync, readFileSync, unlinkSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';

export const KEY_FILE = 'secret.key';
const VERSION = 'v1';

/** The key given does not open what is stored (or no key is there to open it). */
export class SecretKeyError extends Error {}

export function seal(key: Buffer, plaintext: string, aad: string): string {
  const iv = randomBytes(12);
  const cipher = createCipheriv('aes-256-gcm', key, iv);
  cipher.setAAD(Buffer.from(aad, 'utf8'));
  const ct = Buffer.concat([cipher.update(plaintext, 'utf8'), cipher.final()]);
  return [VERSION, iv.toString('base64'), cipher.getAuthTag().toString('base64'), ct.toString('base64')].join(':');
}

/** Throws SecretKeyError when `key` is not the key `sealed` was made with (GCM authentication fails). */
export function open(key: Buffer, sealed: string, aad: string): string {
  const [version, iv, tag, ct] = sealed.split(':');
  if (version !== VERSION || iv === undefined || tag === undefined || ct === undefined) {
    throw new SecretKeyError(`unknown secret format "${sealed.slice(0, 8)}..."`);
  }
  try {
    const decipher = createDecipheriv('aes-256-gcm', key, Buffer.from(iv, 'base64'));
    decipher.setAAD(Buffer.from(aad, 'utf8'));
    decipher.setAuthTag(Buffer.from(tag, 'base64'));
    return Buffer.concat([decipher.update(Buffer.from(ct, 'base64')), decipher.final()]).toString('utf8');
  } catch {
    throw new SecretKeyError('the secret key is not the one these values were encrypted with');
  }
}

export function parseKey(text: string, where: string): Buffer {
  const key = Buffer.from(text.trim(), 'base64');
  if (key.length !== 32) throw new SecretKeyError(`${where} must hold the base64 of exactly 32 bytes`);
  return key;
}

/** Reads `<dir>/secret.key`; `create` makes it (mode 0600) when missing. Safe against another process doing the same. */
export function readKeyFile(dir: string, create: boolean): Buffer | undefined {
  const file = join(dir, KEY_FILE);
  try {
    return parseKey(readFileSync(file, 'utf8'), file);
  } catch (err) {
    if ((err as NodeJS.ErrnoException).code !== 'ENOENT') throw err;
  }
  if (!create) return undefined;
  // Written whole under a temporary name, then linked into place: a second process either wins the link or reads
  // the complete file, never a half-written one.
  const tmp = join(dir, `.${KEY_FILE}.${process.pid}.${randomBytes(4).toString('hex')}`);
  writeFileSync(tmp, `${randomBytes(32).toString('base64')}\n`, { mode: 0o600, flag: 'wx' });
  try {
    linkSync(tmp, file);
  } catch (err) {
    if ((err as NodeJS.ErrnoException).code !== 'EEXIST') throw err;
  } finally {
    unlinkSync(tmp);
  }
  return parseKey(readFileSync(file, 'utf8'), file);
}

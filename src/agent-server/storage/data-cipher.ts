// Encryption at rest of agent data: thread values, checkpoints (SqliteSaver, PostgresSaver), store items and run
// inputs, sealed with AES-256-GCM (node:crypto; authenticated, so a changed byte fails to open instead of reading
// as other data). The key is LANGGRAPH_AES_KEY, as on the LangGraph platform: 16, 24 or 32 bytes of text. Whatever
// its length, HKDF-SHA256 stretches it to the 256-bit AES key, and a short id derived from it names the key in
// every sealed value, so that after a rotation the previous keys (AGENTPLANE_AES_PREVIOUS_KEYS) still open what
// they sealed while a background pass seals it again under the current one (rotate.ts).
//
// A sealed value is ASCII text, `apenc1:<key id>:<base64 of iv | ciphertext | tag>`: it fits SQLite TEXT columns,
// SqliteSaver's `CAST(value AS TEXT)` reads and (as a JSON string) Postgres jsonb columns. Anything not in that form
// is read as the plain JSON it was before encryption was turned on, so existing data stays readable.
import { createCipheriv, createDecipheriv, hkdfSync, randomBytes } from 'node:crypto';
import type { SerializerProtocol } from '@langchain/langgraph-checkpoint';

const PREFIX = 'apenc1:';
const IV_BYTES = 12;
const TAG_BYTES = 16;
/** What follows the prefix of a sealed value: the key id (12 hex digits) and a colon, then base64. */
const SEALED_HEAD = /^[0-9a-f]{12}:$/;

/** Thrown when a sealed value cannot be opened: no key with its id, or it was changed. Never holds key material. */
export class DataKeyError extends Error {
  override name = 'DataKeyError';
}

interface DataKey {
  id: string;
  aes: Buffer;
}

/** The key text as LANGGRAPH_AES_KEY holds it: 16, 24 or 32 bytes, as the LangGraph platform accepts. */
export function checkKeyText(text: string, name: string): Buffer {
  const bytes = Buffer.from(text, 'utf8');
  if (![16, 24, 32].includes(bytes.length)) {
    // The message gives the length only: the value is a secret and error messages reach logs.
    throw new DataKeyError(`${name} must be 16, 24 or 32 bytes long (it is ${bytes.length})`);
  }
  return bytes;
}

function deriveKey(material: Buffer): DataKey {
  const aes = Buffer.from(hkdfSync('sha256', material, 'agentplane', 'agent data aes-256-gcm', 32));
  const id = Buffer.from(hkdfSync('sha256', material, 'agentplane', 'agent data key id', 6)).toString('hex');
  return { id, aes };
}

/**
 * The keys of one deployment's data: the current one seals, every one opens what it sealed. Its key bytes never
 * show when the object is logged or serialised (toJSON, util.inspect); `material()` hands them to an executor
 * thread.
 */
export class DataKeyring {
  private readonly current: DataKey;
  private readonly byId: Map<string, DataKey>;

  private constructor(private readonly raw: Buffer[]) {
    const keys = raw.map(deriveKey);
    this.current = keys[0]!;
    this.byId = new Map(keys.map((k) => [k.id, k]));
  }

  /** From key texts (current first), as LANGGRAPH_AES_KEY and AGENTPLANE_AES_PREVIOUS_KEYS give them. */
  static fromTexts(current: string, previous: string[] = []): DataKeyring {
    return new DataKeyring([
      checkKeyText(current, 'LANGGRAPH_AES_KEY'),
      ...previous.map((p, i) => checkKeyText(p, `AGENTPLANE_AES_PREVIOUS_KEYS (key ${i + 1})`)),
    ]);
  }

  /** The keyring `material()` gave, in another thread. */
  static fromMaterial(material: Uint8Array[]): DataKeyring {
    return new DataKeyring(material.map((m) => Buffer.from(m)));
  }

  /** The key bytes, current first (for workerData only). */
  material(): Uint8Array[] {
    return this.raw.map((r) => new Uint8Array(r));
  }

  /** The id sealed values carry for the current key (not secret: a one-way function of the key). */
  get currentId(): string {
    return this.current.id;
  }

  /** Whether `text` is sealed under the current key (rotation leaves it alone). */
  isCurrent(text: string): boolean {
    return text.startsWith(`${PREFIX}${this.current.id}:`);
  }

  seal(plain: Uint8Array | string): string {
    const iv = randomBytes(IV_BYTES);
    const cipher = createCipheriv('aes-256-gcm', this.current.aes, iv);
    const body = Buffer.concat([
      iv,
      cipher.update(typeof plain === 'string' ? Buffer.from(plain, 'utf8') : plain),
      cipher.final(),
      cipher.getAuthTag(),
    ]);
    return `${PREFIX}${this.current.id}:${body.toString('base64')}`;
  }

  /** The plaintext of a sealed value (isSealed). */
  open(sealed: string): Buffer {
    const id = sealed.slice(PREFIX.length, PREFIX.length + 12);
    const key = this.byId.get(id);
    if (!key) {
      throw new DataKeyError(
        `stored data is sealed with data key ${id}, which is neither LANGGRAPH_AES_KEY nor one of ` +
          'AGENTPLANE_AES_PREVIOUS_KEYS',
      );
    }
    const body = Buffer.from(sealed.slice(PREFIX.length + 13), 'base64');
    if (body.length < IV_BYTES + TAG_BYTES) throw new DataKeyError('stored data is sealed but truncated');
    const decipher = createDecipheriv('aes-256-gcm', key.aes, body.subarray(0, IV_BYTES));
    decipher.setAuthTag(body.subarray(body.length - TAG_BYTES));
    try {
      return Buffer.concat([decipher.update(body.subarray(IV_BYTES, body.length - TAG_BYTES)), decipher.final()]);
    } catch {
      throw new DataKeyError(`stored data sealed with data key ${id} does not authenticate: it was changed`);
    }
  }

  toJSON(): string {
    return `[DataKeyring ${this.current.id}]`;
  }

  [Symbol.for('nodejs.util.inspect.custom')](): string {
    return this.toJSON();
  }
}

/**
 * Whether a stored text is a sealed value (else it is plain JSON, written before encryption was on). Only its head
 * is looked at, so the test costs the same for a value of any size; the rest is checked when it is opened (the tag
 * authenticates every byte).
 */
export function isSealed(text: string): boolean {
  return text.startsWith(PREFIX) && SEALED_HEAD.test(text.slice(PREFIX.length, PREFIX.length + 13));
}

/** Whether stored bytes are a sealed value (see isSealed). */
export function isSealedBytes(data: Uint8Array | string): boolean {
  if (typeof data === 'string') return isSealed(data);
  if (data.length < PREFIX.length + 13) return false;
  for (let i = 0; i < PREFIX.length; i++) if (data[i] !== PREFIX.charCodeAt(i)) return false;
  return SEALED_HEAD.test(Buffer.from(data.buffer, data.byteOffset + PREFIX.length, 13).toString('latin1'));
}

/**
 * How a store writes and reads its JSON columns: sealed under the keyring when there is one, plain JSON otherwise;
 * reading accepts both, so a store that holds data from before encryption (or from before a rotation) reads it all.
 */
export interface JsonCodec {
  readonly keyring: DataKeyring | undefined;
  /** The text to store for `value` (already JSON text when `json` is true). */
  write(value: unknown, json?: boolean): string;
  /** The JSON text of a stored text. */
  text(stored: string): string;
  read<T = unknown>(stored: string): T;
}

export function jsonCodec(keyring: DataKeyring | undefined): JsonCodec {
  if (!keyring) {
    return {
      keyring,
      write: (value, json) => (json ? (value as string) : JSON.stringify(value)),
      text: (stored) => (isSealed(stored) ? refuse(stored) : stored),
      read: <T>(stored: string) => JSON.parse(isSealed(stored) ? refuse(stored) : stored) as T,
    };
  }
  const text = (stored: string) => (isSealed(stored) ? keyring.open(stored).toString('utf8') : stored);
  return {
    keyring,
    write: (value, json) => keyring.seal(json ? (value as string) : JSON.stringify(value)),
    text,
    read: <T>(stored: string) => JSON.parse(text(stored)) as T,
  };
}

function refuse(stored: string): never {
  throw new DataKeyError(
    `stored data is sealed with data key ${stored.slice(PREFIX.length, PREFIX.length + 12)}, but no ` +
      'LANGGRAPH_AES_KEY is set',
  );
}

/** The keyring the environment names, if any (LANGGRAPH_AES_KEY, AGENTPLANE_AES_PREVIOUS_KEYS: comma-separated). */
export function keyringFromEnv(env: NodeJS.ProcessEnv): DataKeyring | undefined {
  const current = env.LANGGRAPH_AES_KEY;
  if (!current) {
    if (env.AGENTPLANE_AES_PREVIOUS_KEYS) {
      throw new DataKeyError('AGENTPLANE_AES_PREVIOUS_KEYS is set without LANGGRAPH_AES_KEY');
    }
    return undefined;
  }
  const previous = (env.AGENTPLANE_AES_PREVIOUS_KEYS ?? '').split(',').filter((k) => k.length > 0);
  return DataKeyring.fromTexts(current, previous);
}

/**
 * A Postgres jsonb column's parameter text for `value`: the value's JSON, or, sealed, a JSON string holding the
 * sealed text (the column keeps its type; SQL that looks inside values finds a string).
 */
export function jsonbParam(codec: JsonCodec, value: unknown): string {
  return codec.keyring ? JSON.stringify(codec.write(value)) : JSON.stringify(value);
}

/** A jsonb column as node-pg parsed it, opened when it holds a sealed value. */
export function fromJsonb<T = unknown>(codec: JsonCodec, value: unknown): T {
  return (typeof value === 'string' && isSealed(value) ? codec.read(value) : value) as T;
}

/** The cipher name a sealed checkpoint value adds to its serde type ("json" -> "json+aesgcm"). */
export const SERDE_CIPHER = 'aesgcm';

/**
 * The checkpointers' serde with encryption: what `inner` writes is sealed and its type marked `+aesgcm` (the
 * LangGraph platform's EncryptedSerializer marks `+aes` the same way); a value of any other type is read as
 * `inner` wrote it, so checkpoints from before encryption stay readable. A `+aesgcm` value that is not sealed is
 * read plain too: SqliteSaver keeps one type for a checkpoint and its metadata, and metadata stays plain (it is
 * filtered on in SQL, as on the platform).
 */
export class EncryptingSerializer implements SerializerProtocol {
  constructor(
    readonly inner: SerializerProtocol,
    private readonly keyring: DataKeyring | undefined,
  ) {}

  async dumpsTyped(value: unknown): Promise<[string, Uint8Array]> {
    const [type, data] = await this.inner.dumpsTyped(value);
    if (!this.keyring) return [type, data];
    return [`${type}+${SERDE_CIPHER}`, Buffer.from(this.keyring.seal(data), 'latin1')];
  }

  async loadsTyped(type: string, data: Uint8Array | string): Promise<unknown> {
    const plus = type.indexOf('+');
    if (plus < 0) return this.inner.loadsTyped(type, data);
    const cipher = type.slice(plus + 1);
    if (cipher !== SERDE_CIPHER) {
      throw new DataKeyError(`checkpoint data is sealed with cipher "${cipher}", which this server does not read`);
    }
    const base = type.slice(0, plus);
    if (!isSealedBytes(data)) return this.inner.loadsTyped(base, data);
    const text =
      typeof data === 'string' ? data : Buffer.from(data.buffer, data.byteOffset, data.byteLength).toString('latin1');
    if (!this.keyring) refuse(text);
    return this.inner.loadsTyped(base, new Uint8Array(this.keyring.open(text)));
  }
}

// Resealing (rotation, and encrypting data stored before a key was set): each stored value not sealed under the
// current key is opened (or taken as the plain JSON it is) and sealed under the current key. The stores write it
// back only where the value is still the one they read, so a run writing meanwhile always wins.

/** A JSON column's stored text sealed under the current key; null when it already is. */
export function resealText(keyring: DataKeyring, stored: string): string | null {
  if (keyring.isCurrent(stored)) return null;
  return keyring.seal(isSealed(stored) ? keyring.open(stored) : stored);
}

/** A checkpoint value (serde type and data) sealed under the current key; null when it already is. */
export function resealTyped(
  keyring: DataKeyring,
  type: string,
  data: Uint8Array | string,
): { type: string; data: Buffer } | null {
  const bytes =
    typeof data === 'string' ? Buffer.from(data, 'utf8') : Buffer.from(data.buffer, data.byteOffset, data.byteLength);
  const sealed = isSealedBytes(bytes) ? bytes.toString('latin1') : undefined;
  if (sealed && keyring.isCurrent(sealed) && type.endsWith(`+${SERDE_CIPHER}`)) return null;
  const plain = sealed ? keyring.open(sealed) : Buffer.from(bytes);
  const base = type.endsWith(`+${SERDE_CIPHER}`) ? type.slice(0, -SERDE_CIPHER.length - 1) : type;
  if (base.includes('+')) throw new DataKeyError(`checkpoint data of type "${type}" cannot be resealed`);
  return { type: `${base}+${SERDE_CIPHER}`, data: Buffer.from(keyring.seal(plain), 'latin1') };
}

/** The bytes every value sealed under the current key starts with (for SQL that skips them). */
export function currentPrefix(keyring: DataKeyring): string {
  return `${PREFIX}${keyring.currentId}:`;
}

/** What a reseal pass did. `failed`: values no configured key opens (left as they are). */
export interface ResealCounts {
  resealed: number;
  failed: number;
}

// Rotation of the embedded store's secret key. Every value sealed with the old key is opened and sealed again with
// a new one in a single SQLite transaction: the secret sets of deployments, the tokens of git integrations, the key
// check, and the auth service records sealed with the key derived from the store key (records sealed with a
// configured AGENTPLANE_AUTH_ENCRYPTION_KEYS keyring are not ours to touch and stay as they are).
//
// The transaction runs under an exclusive lock, which SQLite grants only when no other connection has the file open:
// a platform running on the data dir keeps it open, so a rotation is refused while it runs (and a platform started
// during one cannot open the store until it is over).
//
// With the key in <dir>/secret.key the new key is written to secret.key.new before the transaction commits; once it
// has, the old key is kept as secret.key.old and secret.key.new is renamed over secret.key. A rotation interrupted
// between the two is finished by the next run, which tells from the key check which key the store is sealed with.
import { randomBytes } from 'node:crypto';
import { closeSync, existsSync, fsyncSync, openSync, readFileSync, renameSync, unlinkSync, writeSync } from 'node:fs';
import { join } from 'node:path';
import Database from 'better-sqlite3';
import { derivedAuthKeyring, openValue, sealValue } from '../../lib/auth-crypto.ts';
import { KEY_CHECK, KEY_CHECK_TEXT } from './context.ts';
import { embeddedStateFile, openEmbeddedPlatformState } from './index.ts';
import { integrationAad } from './integrations.ts';
import { secretAad } from './secrets.ts';
import { KEY_FILE, SecretKeyError, open, parseKey, readKeyFile, seal } from './secret-box.ts';

export const NEW_KEY_FILE = `${KEY_FILE}.new`;
export const OLD_KEY_FILE = `${KEY_FILE}.old`;

/** Another process (a running platform, another rotation) has the store open. */
export class StoreInUseError extends Error {}

export type RotateOptions = {
  /** Folder of the embedded store (control-plane.db, secret.key). */
  dataDir: string;
  /** The current key when it is given (AGENTPLANE_SECRET_KEY) instead of kept in secret.key. */
  currentKey?: Buffer;
  /** The key to rotate to; made at random when not given. Required with `currentKey` (there is no file to put it). */
  newKey?: Buffer;
  /** How long to wait for a short-lived holder of the store (an `api-key` command) before calling it in use. */
  lockWaitMs?: number;
};

export type RotateResult = {
  secretSets: number;
  integrations: number;
  authRecords: number;
  /** Set when the key lives in files: where the new and the old key are now. */
  keyFile?: string;
  oldKeyFile?: string;
  /** An earlier rotation had been interrupted after its commit: this run finished it (and did nothing else). */
  finishedInterrupted: boolean;
};

/** The auth service binds each record to its place this way (src/control-plane/services/oauth/). */
const authAad = (kind: string, tenant: string, name: string) => `auth/${kind}/${tenant}/${name}`;

export async function rotateSecretKey(opts: RotateOptions): Promise<RotateResult> {
  const { dataDir } = opts;
  const storeFile = embeddedStateFile(dataDir);
  if (!existsSync(storeFile)) throw new Error(`no control-plane store in ${dataDir} (no ${storeFile})`);
  const lockWaitMs = opts.lockWaitMs ?? 2000;
  const inFiles = opts.currentKey === undefined;
  if (!inFiles && !opts.newKey) {
    throw new SecretKeyError('the current key is given (AGENTPLANE_SECRET_KEY), so the new key must be given too');
  }
  if (inFiles && withExclusiveStore(storeFile, lockWaitMs, (db) => finishInterrupted(db, dataDir))) {
    // That rotation is what was asked for; running another one now would be a surprise.
    return { ...keyFiles(dataDir), secretSets: 0, integrations: 0, authRecords: 0, finishedInterrupted: true };
  }
  // Opening the store the usual way brings an older file to the current schema, encrypts values written before
  // encryption, and checks the current key with a message naming it.
  await openEmbeddedPlatformState({ dataDir, ...(opts.currentKey ? { secretKey: opts.currentKey } : {}) }).close();
  const oldKey = opts.currentKey ?? readKeyFile(dataDir, false);
  if (!oldKey) {
    throw new SecretKeyError(
      `there is no ${join(dataDir, KEY_FILE)} to rotate: it is made when the first secret is stored`,
    );
  }
  const newKey = opts.newKey ?? randomBytes(32);
  if (newKey.equals(oldKey)) throw new SecretKeyError('the new key is the current key');
  const newFile = join(dataDir, NEW_KEY_FILE);
  if (inFiles) writePrivateFile(newFile, `${newKey.toString('base64')}\n`);
  let counts: Omit<RotateResult, 'finishedInterrupted'>;
  try {
    counts = withExclusiveStore(storeFile, lockWaitMs, (db) => reseal(db, oldKey, newKey));
  } catch (err) {
    if (inFiles) unlinkSync(newFile);
    throw err;
  }
  if (!inFiles) return { ...counts, finishedInterrupted: false };
  swapKeyFiles(dataDir);
  return { ...counts, ...keyFiles(dataDir), finishedInterrupted: false };
}

const keyFiles = (dataDir: string) => ({ keyFile: join(dataDir, KEY_FILE), oldKeyFile: join(dataDir, OLD_KEY_FILE) });

/** Runs `fn` in one write transaction on a connection that no other may share; refuses when the store is open. */
function withExclusiveStore<T>(file: string, lockWaitMs: number, fn: (db: Database.Database) => T): T {
  const db = new Database(file, { fileMustExist: true, timeout: lockWaitMs });
  try {
    db.pragma('locking_mode = EXCLUSIVE');
    // Pages freed by the rewrite are zeroed: the old ciphertexts do not stay behind in the file.
    db.pragma('secure_delete = ON');
    try {
      db.exec('BEGIN EXCLUSIVE');
    } catch (err) {
      if ((err as { code?: string }).code?.startsWith('SQLITE_BUSY')) {
        throw new StoreInUseError(
          `${file} is open in another process (is the platform running on this data dir?): stop it, then rotate`,
        );
      }
      throw err;
    }
    try {
      const result = fn(db);
      db.exec('COMMIT');
      return result;
    } catch (err) {
      db.exec('ROLLBACK');
      throw err;
    }
  } finally {
    db.close();
  }
}

function reseal(db: Database.Database, oldKey: Buffer, newKey: Buffer): Omit<RotateResult, 'finishedInterrupted'> {
  const check = db.prepare('SELECT value FROM meta WHERE name = ?').get(KEY_CHECK) as { value: string } | undefined;
  if (check) open(oldKey, check.value, KEY_CHECK); // the store changed since it was opened: refuse, change nothing
  db.prepare('INSERT OR REPLACE INTO meta (name, value) VALUES (?, ?)').run(
    KEY_CHECK,
    seal(newKey, KEY_CHECK_TEXT, KEY_CHECK),
  );

  const sets = db.prepare('SELECT namespace, name, data, enc FROM secrets').all() as {
    namespace: string;
    name: string;
    data: string;
    enc: number;
  }[];
  const updateSet = db.prepare('UPDATE secrets SET data = ?, enc = 1 WHERE namespace = ? AND name = ?');
  for (const s of sets) {
    const values = JSON.parse(s.data) as Record<string, string>;
    const resealed: Record<string, string> = {};
    for (const [variable, value] of Object.entries(values)) {
      const aad = secretAad(s.namespace, s.name, variable);
      let plain: string;
      try {
        plain = s.enc ? open(oldKey, value, aad) : value;
      } catch (err) {
        throw new SecretKeyError(`secret set "${s.name}", variable ${variable}: ${(err as Error).message}`);
      }
      resealed[variable] = seal(newKey, plain, aad);
    }
    updateSet.run(JSON.stringify(resealed), s.namespace, s.name);
  }

  const integrations = db.prepare('SELECT id, tenant, token FROM integrations').all() as {
    id: string;
    tenant: string;
    token: string;
  }[];
  const updateIntegration = db.prepare('UPDATE integrations SET token = ? WHERE id = ?');
  for (const i of integrations) {
    const aad = integrationAad(i.tenant, i.id);
    updateIntegration.run(seal(newKey, open(oldKey, i.token, aad), aad), i.id);
  }

  const oldRing = derivedAuthKeyring(oldKey);
  const newRing = derivedAuthKeyring(newKey);
  const records = db.prepare('SELECT kind, name, tenant, sealed FROM auth_objects').all() as {
    kind: string;
    name: string;
    tenant: string;
    sealed: string;
  }[];
  const updateRecord = db.prepare(
    'UPDATE auth_objects SET sealed = ?, version = version + 1 WHERE kind = ? AND name = ?',
  );
  let authRecords = 0;
  for (const r of records) {
    // `ak1:<key id>:...`: only values of the derived key ("store") depend on the store key.
    if (r.sealed.split(':')[1] !== oldRing.currentId) continue;
    const aad = authAad(r.kind, r.tenant, r.name);
    updateRecord.run(sealValue(newRing, openValue(oldRing, r.sealed, aad).value, aad), r.kind, r.name);
    authRecords++;
  }
  return { secretSets: sets.length, integrations: integrations.length, authRecords };
}

/**
 * A secret.key.new left behind: when the key check opens with it, the rotation had committed and only the files
 * are left to swap; otherwise it never committed and the file is dropped. Returns whether a rotation was finished.
 */
function finishInterrupted(db: Database.Database, dataDir: string): boolean {
  const newFile = join(dataDir, NEW_KEY_FILE);
  if (!existsSync(newFile)) return false;
  const newKey = parseKey(readFileSync(newFile, 'utf8'), newFile);
  const check = db.prepare('SELECT value FROM meta WHERE name = ?').get(KEY_CHECK) as { value: string } | undefined;
  let committed = false;
  if (check) {
    try {
      open(newKey, check.value, KEY_CHECK);
      committed = true;
    } catch {
      committed = false;
    }
  }
  if (!committed) {
    unlinkSync(newFile);
    return false;
  }
  swapKeyFiles(dataDir);
  return true;
}

/** secret.key -> secret.key.old (a copy), then secret.key.new renamed over secret.key. */
function swapKeyFiles(dataDir: string): void {
  const current = join(dataDir, KEY_FILE);
  if (existsSync(current)) writePrivateFile(join(dataDir, OLD_KEY_FILE), readFileSync(current, 'utf8'));
  renameSync(join(dataDir, NEW_KEY_FILE), current);
}

/** Writes a file readable by its owner only and flushes it to disk. */
function writePrivateFile(file: string, text: string): void {
  if (existsSync(file)) unlinkSync(file);
  const fd = openSync(file, 'wx', 0o600);
  try {
    writeSync(fd, text);
    fsyncSync(fd);
  } finally {
    closeSync(fd);
  }
}

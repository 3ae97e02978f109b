// Secret sets of the embedded state: a row per set, each value sealed with the store's key (secret-box.ts) and
// bound to its place; the variable names stay readable so listing them needs no key.
import { NotFoundError } from '../../lib/errors.ts';
import { AlreadyExistsError } from '../errors.ts';
import type { Kind } from '../resources.ts';
import type { SecretStore } from '../secrets.ts';
import { KEY_CHECK, type EmbeddedContext } from './context.ts';
import { SecretKeyError, open as openSealed, seal } from './secret-box.ts';

/** Binds a ciphertext to its place, so it cannot be copied to another variable or set. */
export function secretAad(namespace: string, set: string, variable: string): string {
  return JSON.stringify([namespace, set, variable]);
}

export function embeddedSecrets(ctx: EmbeddedContext): SecretStore {
  const { db } = ctx;
  return {
    async putSecrets(
      namespace: string,
      name: string,
      owner: { kind: Kind; name: string; uid: string },
      values: Record<string, string>,
    ): Promise<void> {
      const key = ctx.secretKey();
      const sealed = Object.fromEntries(
        Object.entries(values).map(([k, v]) => [k, seal(key, v, secretAad(namespace, name, k))]),
      );
      const res = db
        .prepare('INSERT OR IGNORE INTO secrets (namespace, name, owner_uid, data, enc) VALUES (?, ?, ?, ?, 1)')
        .run(namespace, name, owner.uid, JSON.stringify(sealed));
      if (res.changes === 0) throw new AlreadyExistsError(`secret "${name}" already exists`);
    },

    async getSecrets(namespace: string, name: string): Promise<Record<string, string>> {
      const row = db.prepare('SELECT data, enc FROM secrets WHERE namespace = ? AND name = ?').get(namespace, name) as
        { data: string; enc: number } | undefined;
      if (!row) throw new NotFoundError(`secret "${name}" not found`);
      const data = JSON.parse(row.data) as Record<string, string>;
      if (!row.enc) return data;
      const key = ctx.secretKey();
      try {
        return Object.fromEntries(
          Object.entries(data).map(([k, v]) => [k, openSealed(key, v, secretAad(namespace, name, k))]),
        );
      } catch (err) {
        if (err instanceof SecretKeyError)
          throw new SecretKeyError(`cannot decrypt secret set "${name}": ${err.message}`);
        throw err;
      }
    },

    async secretNames(namespace: string, name: string): Promise<string[]> {
      const row = db.prepare('SELECT data FROM secrets WHERE namespace = ? AND name = ?').get(namespace, name) as
        { data: string } | undefined;
      if (!row) throw new NotFoundError(`secret "${name}" not found`);
      return Object.keys(JSON.parse(row.data) as Record<string, string>);
    },

    async deleteSecrets(namespace: string, name: string): Promise<void> {
      db.prepare('DELETE FROM secrets WHERE namespace = ? AND name = ?').run(namespace, name);
    },
  };
}

/**
 * On open: checks the key against the stored key check (a wrong or missing key fails here, with a message saying
 * which key is meant, instead of later) and encrypts rows written before encryption. Stores without secrets need
 * no key yet.
 */
export function prepareSecrets(ctx: EmbeddedContext): void {
  const { db } = ctx;
  const hasCheck = db.prepare('SELECT 1 FROM meta WHERE name = ?').get(KEY_CHECK) !== undefined;
  const plaintext = db.prepare('SELECT namespace, name, data FROM secrets WHERE enc = 0').all() as {
    namespace: string;
    name: string;
    data: string;
  }[];
  if (!hasCheck && !plaintext.length) return;
  const key = ctx.secretKey();
  if (!plaintext.length) return;
  ctx.write(() => {
    const upd = db.prepare('UPDATE secrets SET data = ?, enc = 1 WHERE namespace = ? AND name = ? AND enc = 0');
    for (const r of plaintext) {
      const values = JSON.parse(r.data) as Record<string, string>;
      const sealed = Object.fromEntries(
        Object.entries(values).map(([k, v]) => [k, seal(key, v, secretAad(r.namespace, r.name, k))]),
      );
      upd.run(JSON.stringify(sealed), r.namespace, r.name);
    }
  });
  // Move the rewritten pages into the main file and empty the WAL, which still holds the plaintext pages.
  db.pragma('wal_checkpoint(TRUNCATE)');
}

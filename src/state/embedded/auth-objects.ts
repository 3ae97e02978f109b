// Auth service records of the embedded state: a row each; the service seals their secret part before they get here.
import { NotFoundError } from '../../lib/errors.ts';
import type { AuthObject, AuthObjectKind, AuthObjectStore } from '../auth-objects.ts';
import { AlreadyExistsError, StaleResourceVersionError } from '../errors.ts';
import type { EmbeddedContext } from './context.ts';

type AuthRow = { kind: AuthObjectKind; name: string; tenant: string; record: string; sealed: string; version: number };

function authObjectOf(r: AuthRow): AuthObject {
  return {
    kind: r.kind,
    name: r.name,
    tenant: r.tenant,
    record: r.record,
    sealed: r.sealed,
    version: String(r.version),
  };
}

export function embeddedAuthObjects(ctx: EmbeddedContext): AuthObjectStore {
  const { db } = ctx;
  return {
    async createAuthObject(o: Omit<AuthObject, 'version'>): Promise<void> {
      const res = db
        .prepare(
          'INSERT OR IGNORE INTO auth_objects (kind, name, tenant, record, sealed, version) VALUES (?, ?, ?, ?, ?, 1)',
        )
        .run(o.kind, o.name, o.tenant, o.record, o.sealed);
      if (res.changes === 0) throw new AlreadyExistsError(`auth ${o.kind} "${o.name}" already exists`);
    },

    async getAuthObject(kind: AuthObjectKind, name: string): Promise<AuthObject | undefined> {
      const row = db.prepare('SELECT * FROM auth_objects WHERE kind = ? AND name = ?').get(kind, name) as
        AuthRow | undefined;
      return row && authObjectOf(row);
    },

    async listAuthObjects(kind: AuthObjectKind, tenant: string): Promise<AuthObject[]> {
      const rows = db
        .prepare('SELECT * FROM auth_objects WHERE kind = ? AND tenant = ? ORDER BY name')
        .all(kind, tenant) as AuthRow[];
      return rows.map(authObjectOf);
    },

    async replaceAuthObject(o: AuthObject): Promise<void> {
      ctx.write(() => {
        const res = db
          .prepare(
            'UPDATE auth_objects SET record = ?, sealed = ?, version = version + 1 WHERE kind = ? AND name = ? AND version = ? AND tenant = ?',
          )
          .run(o.record, o.sealed, o.kind, o.name, Number(o.version), o.tenant);
        if (res.changes > 0) return;
        if (db.prepare('SELECT 1 FROM auth_objects WHERE kind = ? AND name = ?').get(o.kind, o.name)) {
          throw new StaleResourceVersionError(`auth ${o.kind} "${o.name}" changed since it was read`);
        }
        throw new NotFoundError(`auth ${o.kind} "${o.name}" not found`);
      });
    },

    async deleteAuthObject(kind: AuthObjectKind, name: string, version?: string): Promise<boolean> {
      const res =
        version === undefined
          ? db.prepare('DELETE FROM auth_objects WHERE kind = ? AND name = ?').run(kind, name)
          : db
              .prepare('DELETE FROM auth_objects WHERE kind = ? AND name = ? AND version = ?')
              .run(kind, name, Number(version));
      return res.changes > 0;
    },
  };
}

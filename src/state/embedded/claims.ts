// Deployment name claims and custom host claims of the embedded state: one row per (tenant, name) or per host. The
// primary key and an IMMEDIATE transaction make a claim atomic across processes on the same file; a claim goes with
// the deployment holding it (resources.ts removes it).
import {
  claimObjectName,
  type HostClaim,
  type HostClaimStore,
  type NameClaim,
  type NameClaimOwner,
  type NameClaimStore,
} from '../claims.ts';
import { AlreadyExistsError } from '../errors.ts';
import type { AnyResource } from '../resources.ts';
import type { EmbeddedContext } from './context.ts';

export function embeddedClaims(ctx: EmbeddedContext): NameClaimStore & HostClaimStore {
  const { db } = ctx;

  /** The deployment a claim names still exists (same uid) and is not being deleted. */
  const holds = (namespace: string, ownerName: string, ownerUid: string): boolean => {
    const dep = db
      .prepare("SELECT json FROM objects WHERE kind = 'AgentDeployment' AND namespace = ? AND name = ?")
      .get(namespace, ownerName) as { json: string } | undefined;
    const holder = dep && (JSON.parse(dep.json) as AnyResource);
    return Boolean(holder && holder.metadata.uid === ownerUid && !holder.metadata.deletionTimestamp);
  };

  return {
    async claimName(namespace: string, tenant: string, name: string, owner: NameClaimOwner): Promise<void> {
      const claim = claimObjectName(tenant, name);
      ctx.write(() => {
        const row = db
          .prepare('SELECT owner_name, owner_uid FROM name_claims WHERE namespace = ? AND claim = ?')
          .get(namespace, claim) as { owner_name: string; owner_uid: string } | undefined;
        if (row?.owner_uid === owner.uid) return;
        if (row && holds(namespace, row.owner_name, row.owner_uid)) {
          throw new AlreadyExistsError(`the name "${name}" is held by AgentDeployment "${row.owner_name}"`);
        }
        // Free, or stale (its deployment is gone or being deleted): take it.
        db.prepare(
          'INSERT OR REPLACE INTO name_claims (namespace, claim, tenant, name, owner_name, owner_uid) VALUES (?, ?, ?, ?, ?, ?)',
        ).run(namespace, claim, tenant, name, owner.name, owner.uid);
      });
    },

    async releaseName(namespace: string, tenant: string, name: string, owner: NameClaimOwner): Promise<void> {
      db.prepare('DELETE FROM name_claims WHERE namespace = ? AND claim = ? AND owner_uid = ?').run(
        namespace,
        claimObjectName(tenant, name),
        owner.uid,
      );
    },

    async listNameClaims(namespace: string): Promise<NameClaim[]> {
      const rows = db
        .prepare('SELECT tenant, name, owner_name, owner_uid FROM name_claims WHERE namespace = ? ORDER BY claim')
        .all(namespace) as { tenant: string; name: string; owner_name: string; owner_uid: string }[];
      return rows.map((r) => ({ tenant: r.tenant, name: r.name, owner: { name: r.owner_name, uid: r.owner_uid } }));
    },

    // Hosts are shared by every tenant: keyed by the host alone.
    async claimHost(namespace: string, host: string, owner: NameClaimOwner): Promise<void> {
      const key = host.toLowerCase();
      ctx.write(() => {
        const row = db
          .prepare('SELECT owner_name, owner_uid FROM host_claims WHERE namespace = ? AND host = ?')
          .get(namespace, key) as { owner_name: string; owner_uid: string } | undefined;
        if (row?.owner_uid === owner.uid) return;
        if (row && holds(namespace, row.owner_name, row.owner_uid)) {
          throw new AlreadyExistsError(`the host "${key}" is held by AgentDeployment "${row.owner_name}"`);
        }
        db.prepare(
          'INSERT OR REPLACE INTO host_claims (namespace, host, owner_name, owner_uid) VALUES (?, ?, ?, ?)',
        ).run(namespace, key, owner.name, owner.uid);
      });
    },

    async releaseHost(namespace: string, host: string, owner: NameClaimOwner): Promise<void> {
      db.prepare('DELETE FROM host_claims WHERE namespace = ? AND host = ? AND owner_uid = ?').run(
        namespace,
        host.toLowerCase(),
        owner.uid,
      );
    },

    async hostHolder(namespace: string, host: string): Promise<NameClaimOwner | undefined> {
      const row = db
        .prepare('SELECT owner_name, owner_uid FROM host_claims WHERE namespace = ? AND host = ?')
        .get(namespace, host.toLowerCase()) as { owner_name: string; owner_uid: string } | undefined;
      if (!row || !holds(namespace, row.owner_name, row.owner_uid)) return undefined;
      return { name: row.owner_name, uid: row.owner_uid };
    },

    async listHostClaims(namespace: string): Promise<HostClaim[]> {
      const rows = db
        .prepare('SELECT host, owner_name, owner_uid FROM host_claims WHERE namespace = ? ORDER BY host')
        .all(namespace) as { host: string; owner_name: string; owner_uid: string }[];
      return rows.map((r) => ({ host: r.host, owner: { name: r.owner_name, uid: r.owner_uid } }));
    },
  };
}

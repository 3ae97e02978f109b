/**
 * Kinds of records of the auth service (OAuth providers, users' tokens, authorization flows in progress), the
 * GitHub App's setup-URL states (integrations) and workspaces' quota usage (services/quotas.ts), kept where every
 * control-plane replica sees them.
 */
export type AuthObjectKind = 'provider' | 'token' | 'flow' | 'setup' | 'usage';

/**
 * One record of the auth service. `record` is the service's JSON (no secret in it); `sealed` is its secret part,
 * already encrypted by the service (the store never sees plaintext). `version` changes with every write.
 */
export type AuthObject = {
  kind: AuthObjectKind;
  name: string;
  tenant: string;
  record: string;
  sealed: string;
  version: string;
};

/**
 * Auth service records, addressed by (kind, name); names are chosen by the service (hashes and UUIDs), tenants
 * are checked by the service on every read. Kubernetes-shaped: create fails on an existing name, replace is
 * optimistic on `version`.
 */
export interface AuthObjectStore {
  /** Existing (kind, name) -> AlreadyExistsError. */
  createAuthObject(obj: Omit<AuthObject, 'version'>): Promise<void>;
  getAuthObject(kind: AuthObjectKind, name: string): Promise<AuthObject | undefined>;
  /** The tenant's records of one kind, in no particular order. */
  listAuthObjects(kind: AuthObjectKind, tenant: string): Promise<AuthObject[]>;
  /** Writes record and sealed when `version` is still current: changed -> StaleResourceVersionError; gone -> NotFoundError. */
  replaceAuthObject(obj: AuthObject): Promise<void>;
  /** false when missing (or, with `version`, changed since: then nothing is deleted). */
  deleteAuthObject(kind: AuthObjectKind, name: string, version?: string): Promise<boolean>;
}

import { createHash } from 'node:crypto';

export type NameClaimOwner = { name: string; uid: string };
export type NameClaim = { tenant: string; name: string; owner: NameClaimOwner };

/**
 * Deployment names, unique within a tenant across every process sharing the store (two control-plane replicas, a
 * second process on the same data dir). Kubernetes-style: one claim object per (tenant, name) under a deterministic
 * name (claimObjectName), created atomically, owned by the AgentDeployment holding the name, so it goes when the
 * deployment goes.
 */
export interface NameClaimStore {
  /**
   * Claims `name` in `tenant` for the AgentDeployment `owner` (which must exist). Held by another deployment that
   * exists and is not being deleted -> AlreadyExistsError. A stale claim (its deployment is gone or being deleted) is
   * taken over with a compare-and-swap, so of two processes taking it over at once exactly one wins. Claiming a name
   * `owner` already holds succeeds.
   */
  claimName(namespace: string, tenant: string, name: string, owner: NameClaimOwner): Promise<void>;
  /** Releases the claim on `name` if `owner` holds it (after a rename, or a failed one); otherwise does nothing. */
  releaseName(namespace: string, tenant: string, name: string, owner: NameClaimOwner): Promise<void>;
  /** Every claim in the namespace (for checks and tests). */
  listNameClaims(namespace: string): Promise<NameClaim[]>;
}

/** Deterministic object name of the claim on (tenant, name): the same in every process. */
export function claimObjectName(tenant: string, name: string): string {
  return `agentplane-name-${createHash('sha256')
    .update(JSON.stringify([tenant, name]))
    .digest('hex')
    .slice(0, 40)}`;
}

export type HostClaim = { host: string; owner: NameClaimOwner };

/**
 * Custom hosts (source_config.custom_url), unique across every deployment of every tenant: the same claim
 * mechanism as names (atomic create, owned by the deployment, stale claims taken over by compare-and-swap), keyed by
 * the host alone.
 */
export interface HostClaimStore {
  /** Claims `host` for `owner`; held by another live deployment -> AlreadyExistsError. */
  claimHost(namespace: string, host: string, owner: NameClaimOwner): Promise<void>;
  /** Releases the claim on `host` if `owner` holds it; otherwise does nothing. */
  releaseHost(namespace: string, host: string, owner: NameClaimOwner): Promise<void>;
  /** The live deployment holding `host` (a stale claim holds nothing), read without writing. */
  hostHolder(namespace: string, host: string): Promise<NameClaimOwner | undefined>;
  listHostClaims(namespace: string): Promise<HostClaim[]>;
}

/** Deterministic object name of the claim on a custom host. */
export function hostClaimObjectName(host: string): string {
  return `agentplane-host-${createHash('sha256').update(host.toLowerCase()).digest('hex').slice(0, 40)}`;
}

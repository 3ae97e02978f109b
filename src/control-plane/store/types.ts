// The store port, shared by the control plane API and the operators. Kubernetes-shaped on purpose: the kubernetes
// adapter maps it 1:1 onto the API server, the embedded adapter (SQLite) behaves the same way, so code written
// against it runs unchanged on one machine and in a cluster.
//
// Semantics (both adapters):
// - create: fills uid, resourceVersion, generation=1, creationTimestamp; ignores `status` (status subresource).
//   A name that exists -> AlreadyExistsError (409).
// - update: writes metadata (labels, annotations, finalizers, ownerReferences) and spec; ignores status. Optimistic
//   on metadata.resourceVersion when it is set: stale -> StaleResourceVersionError (409). generation increments only
//   when spec changed. Removing the last finalizer of an object marked for deletion removes it.
// - updateStatus: writes status only (same optimistic check).
// - delete: with finalizers, sets deletionTimestamp (once) and keeps the object; without, removes it. Removal
//   garbage-collects dependents (objects and secrets whose ownerReferences name the removed uid), like Kubernetes.
// - watch: events after `resourceVersion` ('' or '0' = synthetic ADDED for every current object first), in
//   resourceVersion order. A version older than the store keeps history for -> onError(ResourceExpiredError) (410),
//   then list again. onError also ends a watch the server closed (kubernetes: timeouts, network); re-list or resume
//   from the last seen resourceVersion. Embedded watches also see writes of other processes on the same file (polled).
import { createHash } from 'node:crypto';
import { AppError, ConflictError } from '../../lib/errors.ts';
import type { AgentDeployment, AgentRevision } from '../../resources/index.ts';

/** Where the key publisher writes a tenant's key hashes for its agent servers to read (a file, a Secret). */
export interface TenantKeySink {
  write(tenant: string, hashes: string[]): Promise<void>;
}

export type Kind = 'AgentDeployment' | 'AgentRevision';
export type KindMap = { AgentDeployment: AgentDeployment; AgentRevision: AgentRevision };
export type AnyResource = KindMap[Kind];

export type WatchEventType = 'ADDED' | 'MODIFIED' | 'DELETED';

export type ListOptions = {
  /** Kubernetes equality-based selector: "a=b,c!=d,e" (e = label exists). */
  labelSelector?: string;
};

export interface ResourceStore {
  get<K extends Kind>(kind: K, namespace: string, name: string): Promise<KindMap[K]>;
  list<K extends Kind>(
    kind: K,
    namespace?: string,
    opts?: ListOptions,
  ): Promise<{ items: KindMap[K][]; resourceVersion: string }>;
  create<K extends Kind>(kind: K, obj: KindMap[K]): Promise<KindMap[K]>;
  update<K extends Kind>(kind: K, obj: KindMap[K]): Promise<KindMap[K]>;
  updateStatus<K extends Kind>(kind: K, obj: KindMap[K]): Promise<KindMap[K]>;
  delete(kind: Kind, namespace: string, name: string): Promise<void>;
  /**
   * Streams changes after `resourceVersion`; resolves to a stop function (after which nothing is delivered).
   * `onError` is called at most once when the stream breaks (or the version is too old: ResourceExpiredError);
   * the watch is over then and the caller lists again.
   */
  watch<K extends Kind>(
    kind: K,
    namespace: string | undefined,
    resourceVersion: string,
    onEvent: (type: WatchEventType, obj: KindMap[K]) => void,
    onError: (err: unknown) => void,
  ): Promise<() => void>;
}

/** Environment values of a deployment, one immutable set per change (see resources/names.ts secretsName). */
export interface SecretStore {
  /** Creates the set `name` owned by `owner` (garbage-collected with it). Existing name -> AlreadyExistsError. */
  putSecrets(
    namespace: string,
    name: string,
    owner: { kind: Kind; name: string; uid: string },
    values: Record<string, string>,
  ): Promise<void>;
  /** Values of a set; NotFoundError when missing. Only runtimes call this; the API never returns values. */
  getSecrets(namespace: string, name: string): Promise<Record<string, string>>;
  /** Variable names of a set, for API responses. */
  secretNames(namespace: string, name: string): Promise<string[]>;
  deleteSecrets(namespace: string, name: string): Promise<void>;
}

export type ApiKeyRecord = {
  id: string;
  name: string;
  /** Tenants the key may act for; '*' = every tenant (bootstrap admin keys). */
  tenants: string[];
  createdAt: string;
  /** Set on listener keys: the key may only call the endpoints of this listener (in its one tenant). */
  listenerId?: string;
};

/** API keys: only a SHA-256 hash of each key is stored. */
export interface ApiKeyStore {
  /** Stores a key (the caller generated it) by its hash. */
  putApiKey(record: ApiKeyRecord, keyHash: string): Promise<void>;
  findApiKey(keyHash: string): Promise<ApiKeyRecord | undefined>;
  /** Every stored key with its hash, oldest first (the hashes feed the agents' key files; never shown by the API). */
  listApiKeys(): Promise<(ApiKeyRecord & { hash: string })[]>;
  /** Revokes a key by id; false when no such key exists. */
  deleteApiKey(id: string): Promise<boolean>;
}

/** A plain git credential of one workspace (tenant), valid for one repository host. */
export type IntegrationRecord = {
  id: string;
  tenant: string;
  name: string;
  /** Repository host the credential is for (lowercase, with :port when not the default). */
  host: string;
  /** HTTPS username; undefined = token only (sent with a fixed username the host ignores). */
  username?: string;
  createdAt: string;
  /** 'git' (default): a stored credential; 'github': an installation of the control plane's GitHub App. */
  type?: 'git' | 'github';
  /** git: how the stored credential authenticates (default 'token': HTTPS; 'ssh': private key + known_hosts). */
  auth?: 'token' | 'ssh';
  /** github: the App installation id and the account (user or organization) it is installed on. */
  installationId?: number;
  account?: string;
  /** git: the integration has a webhook secret (its generic push webhook is enabled). */
  webhook?: boolean;
};

/** The record's fields beyond the original columns, kept as one JSON value by the adapters. */
export function integrationDetails(r: IntegrationRecord): Partial<IntegrationRecord> {
  const { type, auth, installationId, account, webhook } = r;
  return Object.fromEntries(
    Object.entries({ type, auth, installationId, account, webhook }).filter(([, v]) => v !== undefined),
  );
}

/** Integrations: the credential is stored encrypted (embedded) or in a tenant-labelled Secret (kubernetes). */
export interface IntegrationStore {
  putIntegration(record: IntegrationRecord, token: string): Promise<void>;
  /** The tenant's integrations, oldest first. */
  listIntegrations(tenant: string): Promise<IntegrationRecord[]>;
  /** undefined when missing or owned by another tenant. */
  getIntegration(tenant: string, id: string): Promise<IntegrationRecord | undefined>;
  /** The credential; only builds call this, the API never returns it. */
  integrationToken(tenant: string, id: string): Promise<string | undefined>;
  /** false when missing or owned by another tenant. */
  deleteIntegration(tenant: string, id: string): Promise<boolean>;
  /** Across tenants (webhooks, installation ownership): the integrations with this id or this GitHub installation. */
  findIntegrations(where: { id?: string; installationId?: number }): Promise<IntegrationRecord[]>;
}

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

/** A data plane registered with the control plane (Listeners v2); it dials out and runs the deployments named for it. */
export type ListenerRecord = {
  id: string;
  tenant: string;
  computeType: 'k8s' | 'local';
  /** Unique within the tenant; immutable. */
  computeId: string;
  computeConfig: { k8sNamespaces: string[] };
  version: string | null;
  /** Where the listener's deployments are served: the URLs it reports must lie under it (declared by the workspace). */
  baseUrl?: string;
  createdAt: string;
  updatedAt: string;
  /** When the listener last called the control plane (watch or report). */
  lastSeenAt?: string;
  /** The agentplane version the listener process reported. */
  agentVersion?: string;
};

/** Listener records, one per (tenant, computeId). */
export interface ListenerStore {
  /** Stores a new listener; (tenant, computeId) taken -> AlreadyExistsError. */
  createListener(record: ListenerRecord): Promise<void>;
  /** undefined when missing or owned by another tenant. */
  getListener(tenant: string, id: string): Promise<ListenerRecord | undefined>;
  /** The tenant's listeners, oldest first. */
  listListeners(tenant: string): Promise<ListenerRecord[]>;
  /** Replaces the mutable fields (version, computeConfig, updatedAt, lastSeenAt, agentVersion) of an existing one. */
  updateListener(record: ListenerRecord): Promise<void>;
  /** false when missing or owned by another tenant. */
  deleteListener(tenant: string, id: string): Promise<boolean>;
}

export type LogType = 'build' | 'deploy';
export type LogEntry = { id: string; timestamp: string; type: LogType; message: string };

export type LogPage = {
  logs: LogEntry[];
  /** Cursor for the next page; null when there is nothing more (for now). */
  next_offset: string | null;
};

/** Build and deploy output of revisions, written by runtimes, read by the API. */
export interface RevisionLogStore {
  appendLogs(namespace: string, revision: string, type: LogType, lines: string[]): Promise<void>;
  readLogs(
    namespace: string,
    revision: string,
    opts: { type: LogType; limit: number; offset?: string; order: 'asc' | 'desc' },
  ): Promise<LogPage>;
}

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
  listHostClaims(namespace: string): Promise<HostClaim[]>;
}

/** Deterministic object name of the claim on a custom host. */
export function hostClaimObjectName(host: string): string {
  return `agentplane-host-${createHash('sha256').update(host.toLowerCase()).digest('hex').slice(0, 40)}`;
}

/** Cluster objects a deployment may point at (resource_spec.service_account_name, secret references). */
export type TenantReferences = { serviceAccounts: string[]; secrets: string[] };

/** Everything a control plane needs, as one object the adapters build. */
export interface ControlPlaneStore
  extends
    ResourceStore,
    SecretStore,
    ApiKeyStore,
    IntegrationStore,
    RevisionLogStore,
    NameClaimStore,
    HostClaimStore,
    AuthObjectStore,
    ListenerStore {
  /** The namespace deployments of the API go to (kubernetes: configured; embedded: "default"). */
  readonly namespace: string;
  /**
   * Where the agents of this store's deployments read their tenant's API key hashes, when the store itself is that
   * place (kubernetes: one Secret per tenant that agent pods mount). Undefined when the runtime keeps them (dev).
   */
  tenantKeySink?(namespaceFor?: (tenant: string) => string): TenantKeySink;
  /**
   * The references among `refs` that the tenant may NOT use: objects missing from the namespace or not labelled
   * agentplane.dev/tenant=<tenant>. Only stores backed by a cluster have it; elsewhere such references mean nothing.
   */
  checkTenantReferences?(
    namespace: string,
    tenant: string,
    refs: TenantReferences,
  ): Promise<{ kind: 'ServiceAccount' | 'Secret'; name: string }[]>;
  close(): Promise<void>;
}

/** 409 AlreadyExists: the name is taken. "Ensure" callers treat it as success. */
export class AlreadyExistsError extends ConflictError {
  readonly reason = 'AlreadyExists';
}

/** 409 Conflict: the object changed since it was read (stale metadata.resourceVersion). Re-read and retry. */
export class StaleResourceVersionError extends ConflictError {
  readonly reason = 'Conflict';
}

/** 410 Gone: the watch's resourceVersion is older than the kept history. List again. */
export class ResourceExpiredError extends AppError {
  constructor(message: string) {
    super(message, 410);
  }
}

/** Parses an equality-based label selector into predicates over a label map. */
export function labelSelectorMatcher(
  selector: string | undefined,
): (labels: Record<string, string> | undefined) => boolean {
  const terms = (selector ?? '')
    .split(',')
    .map((t) => t.trim())
    .filter(Boolean)
    .map((t) => {
      const neq = t.indexOf('!=');
      if (neq > 0) return { key: t.slice(0, neq).trim(), op: '!=' as const, value: t.slice(neq + 2).trim() };
      const eq = t.indexOf('=');
      if (eq > 0)
        return {
          key: t.slice(0, eq).trim(),
          op: '=' as const,
          value: t
            .slice(eq + 1)
            .replace(/^=/, '')
            .trim(),
        };
      if (t.startsWith('!')) return { key: t.slice(1).trim(), op: '!' as const, value: '' };
      return { key: t, op: 'exists' as const, value: '' };
    });
  return (labels) =>
    terms.every((t) => {
      const v = labels?.[t.key];
      if (t.op === '=') return v === t.value;
      if (t.op === '!=') return v !== t.value;
      if (t.op === '!') return v === undefined;
      return v !== undefined;
    });
}

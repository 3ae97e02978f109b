// Object names, labels and owner references. Names are derived, never chosen by users, so every name is a valid
// DNS-1035 label with room for suffixes (Kubernetes Services need that): `ag-<uuid>` and `ag-<uuid>-r<n>`.
import { createHash } from 'node:crypto';
import type { AgentDeployment } from './agent-deployment.ts';
import { API_VERSION, type OwnerReference } from './meta.ts';

export const LABEL_TENANT = 'agentplane.dev/tenant';
export const LABEL_DEPLOYMENT = 'agentplane.dev/deployment';
export const LABEL_DEPLOYMENT_ID = 'agentplane.dev/deployment-id';
export const LABEL_REVISION_NUMBER = 'agentplane.dev/revision-number';
/**
 * The Secret holding a tenant's data-plane API key hashes (`keys.json`: {"hashes":["<sha256 hex>", ...]}): written by
 * the control plane where the tenant's agents run, mounted by their pods. Hashed so any tenant id gives a valid name.
 */
export function tenantKeysSecretName(tenantId: string): string {
  return `agentplane-keys-${createHash('sha256').update(tenantId).digest('hex').slice(0, 16)}`;
}

/**
 * The namespace of a tenant's agents when each tenant has its own: `<prefix><tenant>`, lowercased; a tenant id that
 * is not already a valid name (or too long) is sanitised and suffixed with a hash of it, so two ids never share one.
 */
export function tenantNamespaceName(prefix: string, tenantId: string): string {
  const clean = tenantId
    .toLowerCase()
    .replace(/[^a-z0-9-]+/g, '-')
    .replace(/-+/g, '-')
    .replace(/^-+|-+$/g, '');
  const room = 63 - prefix.length;
  if (clean && clean === tenantId && clean.length <= room) return `${prefix}${clean}`;
  const hash = createHash('sha256').update(tenantId).digest('hex').slice(0, 8);
  const head = clean.slice(0, Math.max(0, room - hash.length - 1)).replace(/-+$/, '');
  return `${prefix}${head ? `${head}-` : ''}${hash}`;
}

/** Finalizer a runtime puts on deployments it manages; without it, DELETE removes the deployment at once. */
export const FINALIZER_RUNTIME = 'agentplane.dev/runtime';

const UUID_RE = /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/;

export function isUuid(value: string): boolean {
  return UUID_RE.test(value);
}

/**
 * What the CRD accepts as an AgentDeployment name (kubectl-applied ones included): a DNS-1035 label (its Service
 * and Ingress host take the name as-is) of at most 52 characters, so `<name>-r<n>` revision names stay valid label
 * values (children are labelled with them) and the Deployment's ReplicaSets (`<name>-<hash>`) valid too.
 */
export const DEPLOYMENT_NAME_MAX = 52;
export const DEPLOYMENT_NAME_PATTERN = '^[a-z]([-a-z0-9]*[a-z0-9])?$';

/**
 * `name` cut to at most `max` characters: unchanged when it fits (so names that were valid keep their children),
 * otherwise a prefix and a hash of the whole name (two long names never share a child).
 */
export function fitName(name: string, max: number): string {
  if (name.length <= max) return name;
  const hash = createHash('sha256').update(name).digest('hex').slice(0, 8);
  return `${name.slice(0, max - hash.length - 1).replace(/-+$/, '')}-${hash}`;
}

export function deploymentName(deploymentId: string): string {
  return `ag-${deploymentId}`;
}

/**
 * The repository a deployment's images live in under a registry prefix (`registry.example.com/agents`): what source
 * builds push to and the only one a registry push token opens.
 */
export function imageRepositoryOf(registryPrefix: string, deploymentName: string): string {
  return `${registryPrefix.replace(/\/+$/, '')}/${deploymentName}`;
}

export function revisionName(deploymentName: string, revisionNumber: number): string {
  return `${deploymentName}-r${revisionNumber}`;
}

/** Name of the Secret holding a deployment's environment as of revision `n` (one per change; immutable). */
export function secretsName(deploymentName: string, revisionNumber: number): string {
  return `${deploymentName}-env-r${revisionNumber}`;
}

/**
 * Name of the secret set holding a deployment's data keys (encryption at rest of its agent data), made by the local
 * runtime on the deployment's first start and deleted with the deployment.
 */
export function dataKeysName(deploymentName: string): string {
  return `${deploymentName}-data-keys`;
}

export function latestRevisionName(dep: AgentDeployment): string {
  return revisionName(dep.metadata.name, dep.spec.revisionCounter);
}

export function ownerReferenceTo(dep: AgentDeployment): OwnerReference {
  if (!dep.metadata.uid) throw new Error(`deployment ${dep.metadata.name} has no uid yet`);
  return {
    apiVersion: API_VERSION,
    kind: 'AgentDeployment',
    name: dep.metadata.name,
    uid: dep.metadata.uid,
    controller: true,
    blockOwnerDeletion: true,
  };
}

/** Valid Kubernetes label value (tenant ids become labels). */
export function isLabelValue(value: string): boolean {
  return value.length <= 63 && /^([A-Za-z0-9]([-A-Za-z0-9_.]*[A-Za-z0-9])?)?$/.test(value);
}

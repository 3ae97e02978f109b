// Object names, labels and owner references. Names are derived, never chosen by users, so every name is a valid
// DNS-1035 label with room for suffixes (Kubernetes Services need that): `ag-<uuid>` and `ag-<uuid>-r<n>`.
import type { AgentDeployment } from './agent-deployment.ts';
import { API_VERSION, type OwnerReference } from './meta.ts';

export const LABEL_TENANT = 'agentplane.dev/tenant';
export const LABEL_DEPLOYMENT = 'agentplane.dev/deployment';
export const LABEL_DEPLOYMENT_ID = 'agentplane.dev/deployment-id';
export const LABEL_REVISION_NUMBER = 'agentplane.dev/revision-number';
/** Finalizer a runtime puts on deployments it manages; without it, DELETE removes the deployment at once. */
export const FINALIZER_RUNTIME = 'agentplane.dev/runtime';

const UUID_RE = /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/;

export function isUuid(value: string): boolean {
  return UUID_RE.test(value);
}

export function deploymentName(deploymentId: string): string {
  return `ag-${deploymentId}`;
}

export function revisionName(deploymentName: string, revisionNumber: number): string {
  return `${deploymentName}-r${revisionNumber}`;
}

/** Name of the Secret holding a deployment's environment as of revision `n` (one per change; immutable). */
export function secretsName(deploymentName: string, revisionNumber: number): string {
  return `${deploymentName}-env-r${revisionNumber}`;
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

// The Target the builders of the Kubernetes runtime are handed for a deployment: where its children go, whose they
// are, and the owner reference (its AgentDeployment, as controller) every child carries.
import type { Target } from '../../../src/operator/runtimes/kubernetes/labels.ts';

export function deploymentTarget(id: string, namespace: string, tenantId: string, uid: string): Target {
  return {
    namespace,
    name: `ag-${id}`,
    deploymentId: id,
    tenantId,
    owner: {
      apiVersion: 'agentplane.dev/v1alpha1',
      kind: 'AgentDeployment',
      name: `ag-${id}`,
      uid,
      controller: true,
      blockOwnerDeletion: true,
    },
  };
}

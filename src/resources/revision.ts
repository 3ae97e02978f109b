// Pure builder for a deployment's revision object. Both the control plane and an operator may "ensure" a revision
// with it: the name is deterministic, so a second create answers AlreadyExists instead of making a duplicate.
import type { AgentDeployment } from './agent-deployment.ts';
import type { AgentRevision } from './agent-revision.ts';
import { API_VERSION } from './meta.ts';
import {
  LABEL_DEPLOYMENT,
  LABEL_DEPLOYMENT_ID,
  LABEL_REVISION_NUMBER,
  LABEL_TENANT,
  ownerReferenceTo,
  revisionName,
} from './names.ts';

/** The revision `revisionNumber` of `dep` (by default its newest), snapshotting the deployment's current spec. */
export function makeRevision(dep: AgentDeployment, revisionNumber = dep.spec.revisionCounter): AgentRevision {
  const s = dep.spec;
  return {
    apiVersion: API_VERSION,
    kind: 'AgentRevision',
    metadata: {
      name: revisionName(dep.metadata.name, revisionNumber),
      namespace: dep.metadata.namespace,
      labels: {
        [LABEL_TENANT]: s.tenantId,
        [LABEL_DEPLOYMENT]: dep.metadata.name,
        [LABEL_DEPLOYMENT_ID]: s.deploymentId,
        [LABEL_REVISION_NUMBER]: String(revisionNumber),
      },
      ownerReferences: [ownerReferenceTo(dep)],
    },
    spec: {
      deploymentName: dep.metadata.name,
      deploymentId: s.deploymentId,
      tenantId: s.tenantId,
      revisionNumber,
      source: s.source,
      sourceRevisionConfig: { ...s.sourceRevisionConfig },
      sourceConfig: structuredClone(s.sourceConfig),
      secretsName: s.secretsName ?? null,
      secretReferences: structuredClone(s.secretReferences ?? []),
    },
  };
}

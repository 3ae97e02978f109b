import { randomUUID } from 'node:crypto';
import {
  API_VERSION,
  LABEL_DEPLOYMENT_ID,
  LABEL_TENANT,
  deploymentName,
  revisionName,
  type AgentDeployment,
} from '../../../src/resources/index.ts';

export function makeDeployment(namespace: string, tenantId = 'tenant-a', id = randomUUID()): AgentDeployment {
  const name = deploymentName(id);
  return {
    apiVersion: API_VERSION,
    kind: 'AgentDeployment',
    metadata: { name, namespace, labels: { [LABEL_TENANT]: tenantId, [LABEL_DEPLOYMENT_ID]: id } },
    spec: {
      deploymentId: id,
      tenantId,
      displayName: `agent ${id.slice(0, 6)}`,
      source: 'github',
      sourceConfig: {
        integrationId: 'int-1',
        repoUrl: 'https://github.com/example/agent',
        deploymentType: 'dev',
        buildOnPush: false,
        customUrl: null,
        resourceSpec: { minScale: 1, maxScale: 2, cpu: 1, memoryMb: 1024 },
      },
      sourceRevisionConfig: { repoRef: 'main', graphConfigPath: 'langgraph.json', imageUri: null },
      secretsName: null,
      secretReferences: [],
      revisionCounter: 1,
      targetRevisionName: revisionName(name, 1),
    },
  };
}

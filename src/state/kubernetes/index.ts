// Kubernetes platform state: AgentDeployment/AgentRevision custom resources, Secrets for environment values, API key
// hashes, integrations and auth records, ConfigMaps for listeners, claims and revision logs, through
// @kubernetes/client-node. Namespace model: one configured namespace; tenants are told apart by the
// agentplane.dev/tenant label (and spec.tenantId). Each aggregate is a factory over the shared clients (client.ts).
import { CoreV1Api, CustomObjectsApi, type KubeConfig } from '@kubernetes/client-node';
import { loadKubeConfig } from '../../lib/kube-config.ts';
import type { Logger } from '../../lib/logger.ts';
import { tenantKeysSecretName } from '../../resources/index.ts';
import type { PlatformState } from '../types.ts';
import { kubernetesApiKeys } from './api-keys.ts';
import { kubernetesAuthObjects } from './auth-objects.ts';
import { kubernetesClaims } from './claims.ts';
import type { KubeContext } from './client.ts';
import { kubernetesIntegrations } from './integrations.ts';
import { kubernetesListeners } from './listeners.ts';
import { kubernetesResources } from './resources.ts';
import { kubernetesRevisionLogs } from './revision-logs.ts';
import { kubernetesSecrets } from './secrets.ts';
import { kubernetesTenantReferences } from './tenant-references.ts';

export { tenantKeysSecretName };

export { loadKubeConfig };

export type KubernetesPlatformStateOptions = {
  kubeConfig: KubeConfig;
  namespace: string;
  logger: Logger;
  /** How long the server keeps one watch open (default 300 s); the caller then resumes. */
  watchTimeoutSeconds?: number;
};

export function openKubernetesPlatformState(opts: KubernetesPlatformStateOptions): PlatformState {
  const k: KubeContext = {
    namespace: opts.namespace,
    custom: opts.kubeConfig.makeApiClient(CustomObjectsApi),
    core: opts.kubeConfig.makeApiClient(CoreV1Api),
    log: opts.logger.child({ component: 'kubernetes-store' }),
  };
  const resources = kubernetesResources(k, opts.kubeConfig, opts.watchTimeoutSeconds);
  return {
    namespace: k.namespace,
    ...resources,
    ...kubernetesSecrets(k),
    ...kubernetesApiKeys(k),
    ...kubernetesIntegrations(k),
    ...kubernetesAuthObjects(k),
    ...kubernetesListeners(k),
    ...kubernetesClaims(k, resources),
    ...kubernetesRevisionLogs(k, resources),
    ...kubernetesTenantReferences(k),
  };
}

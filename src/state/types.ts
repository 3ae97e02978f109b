// The platform's shared state: the ports of each aggregate (resources.ts, secrets.ts, api-keys.ts, ...) joined as
// the one object a backend (embedded/, kubernetes/) opens.
import type { ApiKeyStore, TenantKeySink } from './api-keys.ts';
import type { AuthObjectStore } from './auth-objects.ts';
import type { HostClaimStore, NameClaimStore } from './claims.ts';
import type { IntegrationStore } from './integrations.ts';
import type { ListenerStore } from './listeners.ts';
import type { ResourceStore } from './resources.ts';
import type { RevisionLogStore } from './revision-logs.ts';
import type { SecretStore } from './secrets.ts';

/** Cluster objects a deployment may point at (resource_spec.service_account_name, secret references). */
export type TenantReferences = { serviceAccounts: string[]; secrets: string[] };

/** The whole platform state as one object each backend builds; consumers that need less take the narrow ports. */
export interface PlatformState
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

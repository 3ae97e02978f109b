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

// What every integration operation works over, and the integration records as the API shows them.
import { NotFoundError } from '../../../lib/errors.ts';
import { isUuid } from '../../../resources/index.ts';
import type { AuthObjectStore } from '../../../state/auth-objects.ts';
import type { IntegrationRecord, IntegrationStore } from '../../../state/integrations.ts';
import type { GitHubApp } from '../../../git/github-app.ts';
import type { Quotas } from '../quotas.ts';

export type IntegrationDeps = {
  store: IntegrationStore & AuthObjectStore;
  github?: GitHubApp;
  quotas: Quotas;
};

export type IntegrationOut = {
  id: string;
  name: string;
  type: 'git' | 'github';
  host: string;
  username: string | null;
  auth: 'token' | 'ssh' | 'github_app';
  installation_id: number | null;
  account: string | null;
  webhook: boolean;
  created_at: string;
};

export const toApi = (r: IntegrationRecord): IntegrationOut => ({
  id: r.id,
  name: r.name,
  type: r.type ?? 'git',
  host: r.host,
  username: r.username ?? null,
  auth: r.type === 'github' ? 'github_app' : (r.auth ?? 'token'),
  installation_id: r.installationId ?? null,
  account: r.account ?? null,
  webhook: r.type === 'github' ? true : (r.webhook ?? false),
  created_at: r.createdAt,
});

/** Creates an integration of `tenant` within the workspace's integrations quota. */
export const admit = <T>({ store, quotas }: IntegrationDeps, tenant: string, create: () => Promise<T>) =>
  quotas.admit(tenant, 'integrations', async () => (await store.listIntegrations(tenant)).length, create);

export function requireGitHub({ github }: IntegrationDeps): GitHubApp {
  if (!github) throw new NotFoundError('This control plane has no GitHub App configured.');
  return github;
}

export async function getRecord(
  { store }: IntegrationDeps,
  tenant: string,
  id: string,
  type?: 'git' | 'github',
): Promise<IntegrationRecord> {
  const r = isUuid(id) ? await store.getIntegration(tenant, id) : undefined;
  if (!r || (type && (r.type ?? 'git') !== type)) throw new NotFoundError(`Integration ${id} not found.`);
  return r;
}

// Integrations v1: plain git credentials of a workspace, each valid for one repository host. The token is
// write-only: accepted at creation, kept by the store (encrypted / in a Secret), handed only to builds.
import { randomUUID } from 'node:crypto';
import { NotFoundError, type ValidationIssue } from '../../lib/errors.ts';
import { isUuid } from '../../resources/index.ts';
import type { IntegrationRecord, IntegrationStore } from '../store/types.ts';

export type IntegrationOut = {
  id: string;
  name: string;
  type: 'git';
  host: string;
  username: string | null;
  created_at: string;
};

export type IntegrationCreateInput = { name: string; host: string; username?: string | null; token: string };

/** Canonical host (lowercase, default port dropped), or undefined when `host` is not a bare host[:port]. */
export function canonicalHost(host: string): string | undefined {
  if (!/^[A-Za-z0-9.-]+(:\d{1,5})?$/.test(host)) return undefined;
  let url: URL;
  try {
    url = new URL(`https://${host}`);
  } catch {
    return undefined;
  }
  if (!url.hostname.includes('.') && url.hostname !== 'localhost') return undefined;
  return url.host;
}

const out = (r: IntegrationRecord): IntegrationOut => ({
  id: r.id,
  name: r.name,
  type: 'git',
  host: r.host,
  username: r.username ?? null,
  created_at: r.createdAt,
});

export function createIntegrationService(store: IntegrationStore) {
  return {
    async create(tenant: string, input: IntegrationCreateInput): Promise<IntegrationOut> {
      const record: IntegrationRecord = {
        id: randomUUID(),
        tenant,
        name: input.name,
        host: canonicalHost(input.host)!,
        ...(input.username ? { username: input.username } : {}),
        createdAt: new Date().toISOString(),
      };
      await store.putIntegration(record, input.token);
      return out(record);
    },
    async list(tenant: string): Promise<IntegrationOut[]> {
      return (await store.listIntegrations(tenant)).map(out);
    },
    async get(tenant: string, id: string): Promise<IntegrationOut> {
      const r = await store.getIntegration(tenant, id);
      if (!r) throw new NotFoundError(`Integration ${id} not found.`);
      return out(r);
    },
    async delete(tenant: string, id: string): Promise<void> {
      if (!(await store.deleteIntegration(tenant, id))) throw new NotFoundError(`Integration ${id} not found.`);
    },
  };
}

export type IntegrationService = ReturnType<typeof createIntegrationService>;

/**
 * Checks a new deployment's source_config against the workspace's integrations. Integration ids are UUIDs; an
 * integration_id of that shape must name an integration of this workspace (another workspace's answers exactly like
 * a missing one) whose host is repo_url's host. Other values are opaque labels that carry no credential (public
 * repositories), as before integrations existed.
 */
export async function integrationIssues(
  store: IntegrationStore,
  tenant: string,
  integrationId: string | null | undefined,
  repoUrl: string | null | undefined,
): Promise<ValidationIssue[]> {
  if (!integrationId || !isUuid(integrationId)) return [];
  const at = ['body', 'source_config'];
  const integration = await store.getIntegration(tenant, integrationId);
  if (!integration)
    return [
      {
        loc: [...at, 'integration_id'],
        msg: `integration ${integrationId} not found in this workspace`,
        type: 'not_found',
      },
    ];
  let host: string | undefined;
  try {
    host = repoUrl ? new URL(repoUrl).host.toLowerCase() : undefined;
  } catch {
    host = undefined;
  }
  if (host !== integration.host) {
    return [
      {
        loc: [...at, 'repo_url'],
        msg: `the host of repo_url must be ${integration.host}, the host of integration ${integrationId}`,
        type: 'value_error',
      },
    ];
  }
  return [];
}

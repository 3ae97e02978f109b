// Which git credentials a build may use. Each tenant has its own Secret (`<prefix><tenant>`, named like a tenant
// namespace), and a build uses only its own tenant's: a tenant that names another tenant's private repository
// clones it with no credential at all, as an anonymous user would. The Secret must also say whose it is (the
// `agentplane.dev/tenant` label or annotation, so a name collision after cleaning a tenant id grants nothing), and
// may narrow where the token is sent (`agentplane.dev/git-repositories`: hosts, `host/owner` or `host/owner/repo`
// prefixes), so it never reaches a host it was not made for.
import type { V1Secret } from '@kubernetes/client-node';
import { LABEL_TENANT, tenantNamespaceName } from '../resources/names.ts';
import { repositoryPath } from './url.ts';

export const ANNOTATION_GIT_REPOSITORIES = 'agentplane.dev/git-repositories';

/** Name of a tenant's git credentials Secret in the build namespace. */
export function gitCredentialsSecretName(prefix: string, tenantId: string): string {
  return tenantNamespaceName(prefix, tenantId);
}

/** True when `repo` (a repositoryPath) lies under one of the comma- or space-separated prefixes. */
export function repositoryAllowed(repo: string, scopes: string): boolean {
  return scopes
    .split(/[\s,]+/)
    .filter(Boolean)
    .map((s) =>
      s
        .replace(/^[a-z][a-z0-9+.-]*:\/\//i, '')
        .replace(/\/+$/, '')
        .replace(/\.git$/, ''),
    )
    .some((s) => {
      const [host, ...rest] = s.split('/');
      const scope = [host!.toLowerCase(), ...rest].join('/');
      return repo === scope || repo.startsWith(`${scope}/`);
    });
}

/**
 * The Secret name a tenant's build of `repoUrl` mounts, or undefined (no credential) with the reason, which the
 * operator logs for the admin and never shows the tenant.
 */
export function gitCredentialsFor(
  secret: V1Secret | undefined,
  tenantId: string,
  repoUrl: string,
): { name: string } | { reason: string } {
  const meta = secret?.metadata;
  const name = meta?.name;
  if (!meta || !name) return { reason: 'no git credentials Secret for this tenant' };
  const owner = meta.labels?.[LABEL_TENANT] ?? meta.annotations?.[LABEL_TENANT];
  if (owner !== tenantId)
    return { reason: `Secret ${meta.name} does not say it belongs to this tenant (${LABEL_TENANT})` };
  const scopes = meta.annotations?.[ANNOTATION_GIT_REPOSITORIES];
  if (scopes !== undefined) {
    const repo = repositoryPath(repoUrl);
    if (!repo || !repositoryAllowed(repo, scopes))
      return { reason: `repository is outside ${ANNOTATION_GIT_REPOSITORIES} of Secret ${meta.name}` };
  }
  return { name };
}

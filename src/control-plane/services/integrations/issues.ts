// Whether a deployment's source_config may use an integration: the integration must be the workspace's own and
// fit the repository URL.
import { NotFoundError, type ValidationIssue } from '../../../lib/errors.ts';
import { isUuid } from '../../../resources/index.ts';
import type { IntegrationStore } from '../../../state/integrations.ts';
import { githubRepoOf, type GitHubApp } from '../../../git/github-app.ts';
import { repoHostOf } from '../../../git/url.ts';

/**
 * Checks a new deployment's source_config against the workspace's integrations. Integration ids are UUIDs; an
 * integration_id of that shape must name an integration of this workspace (another workspace's id answers 404,
 * exactly like a missing one) whose host is repo_url's host, and for a GitHub integration a repository the
 * installation can see. Other values are opaque labels that carry no credential (public repositories), as before
 * integrations existed.
 */
export async function integrationIssues(
  store: IntegrationStore,
  tenant: string,
  integrationId: string | null | undefined,
  repoUrl: string | null | undefined,
  github?: GitHubApp,
): Promise<ValidationIssue[]> {
  if (!integrationId || !isUuid(integrationId)) return [];
  const at = ['body', 'source_config'];
  const integration = await store.getIntegration(tenant, integrationId);
  if (!integration) throw new NotFoundError(`Integration ${integrationId} not found.`);
  const host = repoUrl ? repoHostOf(repoUrl) : undefined;
  const sshUrl = repoUrl ? !/^https?:\/\//i.test(repoUrl) : false;
  if (host !== integration.host) {
    return [
      {
        loc: [...at, 'repo_url'],
        msg: `the host of repo_url must be ${integration.host}, the host of integration ${integrationId}`,
        type: 'value_error',
      },
    ];
  }
  if (integration.type !== 'github' && (integration.auth === 'ssh') !== sshUrl)
    return [
      {
        loc: [...at, 'repo_url'],
        msg:
          integration.auth === 'ssh'
            ? `integration ${integrationId} holds an SSH key: repo_url must be an ssh:// or user@host:path URL`
            : `integration ${integrationId} holds an HTTPS token: repo_url must be an https:// URL`,
        type: 'value_error',
      },
    ];
  if (integration.type === 'github') {
    if (!github) throw new NotFoundError('This control plane has no GitHub App configured.');
    const repo = githubRepoOf(github.settings.webUrl, repoUrl!);
    const visible = repo
      ? (await github.repositories(integration.installationId!)).some(
          (r) => r.owner.toLowerCase() === repo.owner.toLowerCase() && r.name.toLowerCase() === repo.name.toLowerCase(),
        )
      : false;
    if (!visible)
      return [
        {
          loc: [...at, 'repo_url'],
          msg: `not a repository that GitHub installation ${integration.installationId} can see`,
          type: 'value_error',
        },
      ];
  }
  return [];
}

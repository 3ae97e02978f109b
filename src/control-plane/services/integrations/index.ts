// Integrations v1 of a workspace:
//   git: a stored credential for one repository host: an HTTPS token (optionally with a username) or an SSH private
//     key with its known_hosts. Write-only: accepted at creation, kept by the store (encrypted / in a Secret), handed
//     only to builds. Optionally a webhook secret for the generic push webhook (shown once, in the creation answer).
//   github: an installation of the control plane's GitHub App; builds get a fresh installation token each.
// The operations live in integrations/, one file per group, over the IntegrationDeps built here.
import type { AuthObjectStore } from '../../../state/auth-objects.ts';
import type { IntegrationStore } from '../../../state/integrations.ts';
import type { GitHubApp } from '../../../git/github-app.ts';
import {
  createGitIntegration,
  deleteIntegration,
  getIntegration,
  listIntegrations,
  type IntegrationCreateInput,
} from './git.ts';
import {
  completeGitHubInstall,
  githubInstallations,
  githubRepos,
  registerGitHub,
  startGitHubInstall,
} from './github-installs.ts';
import type { IntegrationDeps } from './records.ts';
import { installationOwners, webhookTarget } from './webhook-targets.ts';
import { createQuotas, type Quotas } from '../quotas.ts';

export type IntegrationService = ReturnType<typeof createIntegrationService>;

export function createIntegrationService(
  store: IntegrationStore & AuthObjectStore,
  github?: GitHubApp,
  quotas: Quotas = createQuotas({ store }),
) {
  const deps: IntegrationDeps = { store, quotas, ...(github ? { github } : {}) };
  return {
    github,
    create: (tenant: string, input: IntegrationCreateInput) => createGitIntegration(deps, tenant, input),
    list: (tenant: string) => listIntegrations(deps, tenant),
    get: (tenant: string, id: string) => getIntegration(deps, tenant, id),
    delete: (tenant: string, id: string) => deleteIntegration(deps, tenant, id),

    // GitHub App installations
    githubInstallations: (tenant: string) => githubInstallations(deps, tenant),
    /** Registers an installation by id (admin keys only: the id alone does not prove who installed it). */
    registerGitHub: (tenant: string, installationId: number, name?: string) =>
      registerGitHub(deps, tenant, installationId, name),
    startGitHubInstall: (tenant: string, account: string) => startGitHubInstall(deps, tenant, account),
    completeGitHubInstall: (state: string, installationId: number, code?: string) =>
      completeGitHubInstall(deps, state, installationId, code),
    githubRepos: (tenant: string, id: string) => githubRepos(deps, tenant, id),

    // webhooks
    webhookTarget: (id: string) => webhookTarget(deps, id),
    installationOwners: (installationId: number) => installationOwners(deps, installationId),
  };
}

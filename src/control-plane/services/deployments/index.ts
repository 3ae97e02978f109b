// Deployments and revisions on top of the store port. Tenancy: every object carries its tenant in spec and in the
// agentplane.dev/tenant label; another tenant's deployment is answered exactly like a missing one. The operations
// live in deployments/, one file per group, over the DeploymentDeps built here.
import type { Logger } from '../../../lib/logger.ts';
import type { PlatformState } from '../../../state/types.ts';
import type { DeploymentCreate, DeploymentPatch } from '../../../api/schemas/deployments.ts';
import type { InputPolicy } from '../../../api/input-rules.ts';
import type { GitHubApp } from '../../../git/github-app.ts';
import { createQuotas, type Quotas } from '../quotas.ts';
import type { RepoPolicy } from '../../../git/repo-url.ts';
import { createDeployment } from './create.ts';
import type { DeploymentDeps, TarballResolver } from './deps.ts';
import { patchDeployment } from './patch.ts';
import { deleteDeployment, getDeployment, listDeployments, type DeploymentListQuery } from './query.ts';
import {
  createRevision,
  createRevisionOnPush,
  getRevision,
  listRevisions,
  redeploy,
  requireRevision,
  revisionLogs,
  type RevisionListQuery,
  type RevisionLogQuery,
} from './revisions.ts';
import { createTenantChecks } from './tenant-checks.ts';
import { liveLogs, type LiveLogOptions } from './live-logs.ts';

export { liveLogEventId } from './live-logs.ts';

export type DeploymentService = ReturnType<typeof createDeploymentService>;

export function createDeploymentService(options: {
  store: PlatformState;
  logger: Logger;
  policy?: InputPolicy;
  /** Where a tenant's pods run (namespace per tenant); default: the store's namespace. */
  referenceNamespace?: (tenant: string) => string;
  github?: GitHubApp;
  /** Per-workspace quotas (default: DEFAULT_QUOTAS on the real clock). */
  quotas?: Quotas;
  /** The local runtime's repo_url rules, where builds run on this machine (dev); a local path is checked up front. */
  localRepos?: RepoPolicy;
  /** Resolves an internal_source revision's source_tarball_path to the stored bytes (none: such revisions refused). */
  sourceUploads?: TarballResolver;
  /** The build registry prefix (the operator's --registry): images under it must be their deployment's own. */
  buildRegistry?: string;
  /** Push tokens are handed out: internal_docker deployments may be created and get pushed images. */
  pushTokens?: boolean;
  /** Called after a deployment was created: its tenant may be new to the data plane (e.g. publish its key set now). */
  onCreated?: (tenant: string) => void;
}) {
  const { store } = options;
  const deps: DeploymentDeps = {
    store,
    ns: store.namespace,
    logger: options.logger,
    quotas: options.quotas ?? createQuotas({ store }),
    checks: createTenantChecks(options),
    tenantLocks: new Map(),
    ...(options.github ? { github: options.github } : {}),
    ...(options.localRepos ? { localRepos: options.localRepos } : {}),
    ...(options.sourceUploads ? { sourceUploads: options.sourceUploads } : {}),
    ...(options.buildRegistry ? { buildRegistry: options.buildRegistry } : {}),
    ...(options.pushTokens ? { pushTokens: true } : {}),
  };
  return {
    create: async (tenant: string, body: DeploymentCreate) => {
      const created = await createDeployment(deps, tenant, body);
      options.onCreated?.(tenant);
      return created;
    },
    get: (tenant: string, id: string) => getDeployment(deps, tenant, id),
    list: (tenant: string, q: DeploymentListQuery) => listDeployments(deps, tenant, q),
    patch: (tenant: string, id: string, body: DeploymentPatch) => patchDeployment(deps, tenant, id, body),
    delete: (tenant: string, id: string) => deleteDeployment(deps, tenant, id),
    listRevisions: (tenant: string, id: string, q: RevisionListQuery) => listRevisions(deps, tenant, id, q),
    requireRevision: (tenant: string, id: string, revisionId: string) => requireRevision(deps, tenant, id, revisionId),
    getRevision: (tenant: string, id: string, revisionId: string) => getRevision(deps, tenant, id, revisionId),
    createRevision: (tenant: string, id: string) => createRevision(deps, tenant, id),
    createRevisionOnPush: (tenant: string, id: string, keys: string[]) => createRevisionOnPush(deps, tenant, id, keys),
    redeploy: (tenant: string, id: string, revisionId: string) => redeploy(deps, tenant, id, revisionId),
    logs: (tenant: string, id: string, revisionId: string, q: RevisionLogQuery) =>
      revisionLogs(deps, tenant, id, revisionId, q),
    liveLogs: (tenant: string, id: string, opts: LiveLogOptions) => liveLogs(deps, tenant, id, opts),
  };
}

// Listeners v2: data planes that dial out to the control plane. The control plane keeps the listener records, hands
// each listener the deployments assigned to it (a level-triggered snapshot with a digest as resume cursor, served by
// long poll) and takes back what the data plane reports: statuses, URLs and build/deploy log lines. The operations
// live next to this file, one per group, over the ListenerDeps built here.
import type { Logger } from '../../../lib/logger.ts';
import { DEFAULT_LOG_LIMITS, type LogLimits } from '../../../lib/log-limits.ts';
import type { PlatformState } from '../../../state/types.ts';
import { buildCredentialResolver } from '../../../git/credentials.ts';
import type { GitHubApp } from '../../../git/github-app.ts';
import { createQuotas, type Quotas } from '../quotas.ts';
import {
  createListener,
  createListenerKey,
  deleteListener,
  getListener,
  listListeners,
  patchListener,
} from './crud.ts';
import { gitCredential } from './git-credential.ts';
import { requireListener, type ListenerDeps } from './records.ts';
import { report } from './report.ts';
import type {
  ListenerCreate,
  ListenerGitCredentialRequest,
  ListenerPatch,
  ListenerReport,
} from '../../../api/schemas/listeners.ts';
import { watchListener } from './watch.ts';

export type ListenerService = ReturnType<typeof createListenerService>;

export function createListenerService(options: {
  store: PlatformState;
  logger: Logger;
  /** A listener not heard from for this long shows as disconnected (default 30 s). */
  heartbeatTimeoutMs?: number;
  /** The control plane's GitHub App: mints the clone tokens handed to listeners. */
  github?: GitHubApp;
  /** What a pushed log may store per revision and type (default: as local builds). */
  logLimits?: LogLimits;
  /** Per-workspace quotas (default: DEFAULT_QUOTAS). */
  quotas?: Quotas;
}) {
  const { store } = options;
  const deps: ListenerDeps = {
    store,
    ns: store.namespace,
    logger: options.logger,
    quotas: options.quotas ?? createQuotas({ store }),
    timeoutMs: options.heartbeatTimeoutMs ?? 30_000,
    logLimits: options.logLimits ?? DEFAULT_LOG_LIMITS,
    resolveCredential: buildCredentialResolver(store, options.github),
    lastWrite: new Map(),
  };
  return {
    require: (tenant: string, id: string) => requireListener(deps, tenant, id),
    list: (tenant: string) => listListeners(deps, tenant),
    get: (tenant: string, id: string) => getListener(deps, tenant, id),
    create: (tenant: string, body: ListenerCreate) => createListener(deps, tenant, body),
    patch: (tenant: string, id: string, body: ListenerPatch) => patchListener(deps, tenant, id, body),
    delete: (tenant: string, id: string, cascade: boolean) => deleteListener(deps, tenant, id, cascade),
    createKey: (tenant: string, id: string, name?: string) => createListenerKey(deps, tenant, id, name),
    watch: (
      tenant: string,
      id: string,
      since: string | undefined,
      waitMs: number,
      opts: { agentVersion?: string; closed: () => boolean },
    ) => watchListener(deps, tenant, id, since, waitMs, opts),
    gitCredential: (tenant: string, id: string, req: ListenerGitCredentialRequest) =>
      gitCredential(deps, tenant, id, req),
    report: (tenant: string, id: string, body: ListenerReport) => report(deps, tenant, id, body),
  };
}

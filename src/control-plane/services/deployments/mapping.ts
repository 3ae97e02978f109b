// Translation between the API's snake_case records and the resources' camelCase specs. URLs and status messages
// are shown redacted: a record stored before credentials were refused may still carry some.
import { redactUrl, redactUrlsIn } from '../../../lib/redact.ts';
import {
  findCondition,
  RevisionPhase,
  type AgentDeployment,
  type AgentRevision,
  type Condition,
  type ResourceSpec,
  type SecretReference,
  type SourceConfig,
  type SourceRevisionConfig,
} from '../../../resources/index.ts';
import type { ResourceSpecApi, SourceConfigIn, SourceRevisionConfigIn } from '../../../api/schemas/deployments.ts';
import type { Deployment, Revision } from '../../../api/schemas/deployment-views.ts';
import { summarizeStatus } from './status.ts';

const defined = <T extends object>(o: T): T =>
  Object.fromEntries(Object.entries(o).filter(([, v]) => v !== undefined)) as T;

export function resourceSpecFromApi(r: ResourceSpecApi | null | undefined): ResourceSpec | null | undefined {
  if (r === null || r === undefined) return r;
  return defined({
    minScale: r.min_scale,
    maxScale: r.max_scale,
    cpu: r.cpu,
    cpuLimit: r.cpu_limit,
    memoryMb: r.memory_mb,
    memoryLimitMb: r.memory_limit_mb,
    labels: r.labels,
    annotations: r.annotations,
    serviceAccountName: r.service_account_name,
    imagePullSecrets: r.image_pull_secrets,
    nodeSelector: r.node_selector,
    idleTimeoutMinutes: r.idle_timeout_minutes,
  });
}

function resourceSpecToApi(r: ResourceSpec | null | undefined): Deployment['source_config']['resource_spec'] {
  if (!r) return null;
  return defined({
    min_scale: r.minScale,
    max_scale: r.maxScale,
    cpu: r.cpu,
    cpu_limit: r.cpuLimit,
    memory_mb: r.memoryMb,
    memory_limit_mb: r.memoryLimitMb,
    labels: r.labels,
    annotations: r.annotations,
    service_account_name: r.serviceAccountName,
    image_pull_secrets: r.imagePullSecrets,
    node_selector: r.nodeSelector,
    idle_timeout_minutes: r.idleTimeoutMinutes,
  });
}

/** The keys present in `c` as a partial spec (undefined = not given, so PATCH can merge key by key). */
export function sourceConfigFromApi(c: SourceConfigIn): Partial<SourceConfig> {
  return defined({
    integrationId: c.integration_id,
    repoUrl: c.repo_url,
    deploymentType: c.deployment_type,
    buildOnPush: c.build_on_push,
    customUrl: c.custom_url,
    resourceSpec: resourceSpecFromApi(c.resource_spec),
    listenerId: c.listener_id,
    listenerConfig:
      c.listener_config === undefined
        ? undefined
        : c.listener_config === null
          ? null
          : defined({ k8sNamespace: c.listener_config.k8s_namespace }),
    installCommand: c.install_command,
    buildCommand: c.build_command,
    accessMode: c.access_mode,
  });
}

export function sourceRevisionConfigFromApi(c: SourceRevisionConfigIn): Partial<SourceRevisionConfig> {
  return defined({
    repoRef: c.repo_ref,
    graphConfigPath: c.graph_config_path ?? c.langgraph_config_path,
    imageUri: c.image_uri,
    sourceTarballPath: c.source_tarball_path,
  });
}

export function secretReferencesFromApi(
  list: { name: string; secret_name: string; secret_key: string }[],
): SecretReference[] {
  return list.map((s) => ({ name: s.name, secretName: s.secret_name, secretKey: s.secret_key }));
}

function secretReferencesToApi(list: SecretReference[] | undefined) {
  return (list ?? []).map((s) => ({ name: s.name, secret_name: s.secretName, secret_key: s.secretKey }));
}

function sourceRevisionConfigToApi(c: SourceRevisionConfig, commit: string | undefined) {
  const path = c.graphConfigPath ?? null;
  return {
    repo_ref: c.repoRef ?? null,
    graph_config_path: path,
    langgraph_config_path: path,
    image_uri: c.imageUri ?? null,
    repo_commit_sha: commit ?? null,
    source_tarball_path: c.sourceTarballPath ?? null,
    source_tarball_sha256: c.sourceTarballSha256 ?? null,
  };
}

export const UPDATED_AT_ANNOTATION = 'agentplane.dev/updated-at';

/**
 * The API's health of a resource: whether it serves now, from its Serving condition (a deployment's Ready also waits
 * for the revision it asks for) or, for resources without one, Ready. Messages redacted like status messages.
 */
function healthOf(conditions: Condition[] | undefined): Deployment['health'] {
  const ready = findCondition(conditions, 'Serving') ?? findCondition(conditions, 'Ready');
  if (!ready) return { ready: null, reason: null, message: null, since: null };
  return {
    ready: ready.status === 'True' ? true : ready.status === 'False' ? false : null,
    reason: ready.reason || null,
    message: ready.message ? redactUrlsIn(ready.message) : null,
    since: ready.lastTransitionTime ?? null,
  };
}

export function toApiDeployment(
  dep: AgentDeployment,
  extra: {
    secretNames: string[];
    latestRevision: AgentRevision | undefined;
    activeRevision: AgentRevision | undefined;
    /** The revision the deployment asked for last (spec.targetRevisionName). */
    targetRevision?: AgentRevision | undefined;
  },
): Deployment {
  const s = dep.spec;
  const c = s.sourceConfig;
  const created = dep.metadata.creationTimestamp ?? new Date(0).toISOString();
  const health = healthOf(dep.status?.conditions);
  return {
    id: s.deploymentId,
    tenant_id: s.tenantId,
    name: s.displayName,
    source: s.source,
    source_config: {
      integration_id: c.integrationId ?? null,
      repo_url: c.repoUrl ? redactUrl(c.repoUrl) : null,
      deployment_type: c.deploymentType ?? 'dev',
      build_on_push: c.buildOnPush ?? false,
      custom_url: c.customUrl ? redactUrl(c.customUrl) : null,
      resource_spec: resourceSpecToApi(c.resourceSpec),
      listener_id: c.listenerId ?? null,
      listener_config: c.listenerConfig ? defined({ k8s_namespace: c.listenerConfig.k8sNamespace }) : null,
      install_command: c.installCommand ?? null,
      build_command: c.buildCommand ?? null,
      access_mode: c.accessMode ?? 'api_key',
    },
    source_revision_config: sourceRevisionConfigToApi(
      s.sourceRevisionConfig,
      extra.latestRevision?.status?.repoCommitSha,
    ),
    secrets: extra.secretNames.map((name) => ({ name })),
    secret_references: secretReferencesToApi(s.secretReferences),
    status: dep.metadata.deletionTimestamp ? 'AWAITING_DELETE' : (dep.status?.phase ?? 'AWAITING_DATABASE'),
    latest_revision_id: extra.latestRevision?.metadata.uid ?? null,
    active_revision_id: extra.activeRevision?.metadata.uid ?? null,
    url: dep.status?.url ?? null,
    health,
    status_summary: summarizeStatus(
      dep,
      { latest: extra.latestRevision, active: extra.activeRevision, target: extra.targetRevision },
      health,
    ),
    created_at: created,
    updated_at: dep.metadata.annotations?.[UPDATED_AT_ANNOTATION] ?? created,
  };
}

export function toApiRevision(rev: AgentRevision): Revision {
  const created = rev.metadata.creationTimestamp ?? new Date(0).toISOString();
  const times = [created, ...(rev.status?.conditions ?? []).map((c) => c.lastTransitionTime)].sort();
  return {
    id: rev.metadata.uid ?? '',
    deployment_id: rev.spec.deploymentId,
    revision_number: rev.spec.revisionNumber,
    status: rev.status?.phase ?? RevisionPhase.CREATING,
    status_message: rev.status?.statusMessage ? redactUrlsIn(rev.status.statusMessage) : null,
    source: rev.spec.source,
    source_revision_config: sourceRevisionConfigToApi(rev.spec.sourceRevisionConfig, rev.status?.repoCommitSha),
    image: rev.status?.image ?? null,
    repo_commit_sha: rev.status?.repoCommitSha ?? null,
    health: healthOf(rev.status?.conditions),
    created_at: created,
    updated_at: times[times.length - 1]!,
  };
}

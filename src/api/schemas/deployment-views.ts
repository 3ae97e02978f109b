// Response shapes of the Deployments v2 API: deployments, revisions, their lists, status and health, log pages,
// bulk delete results, access tokens and the error body these routes answer with.
import { z } from 'zod';
import { deploymentPhaseSchema, revisionPhaseSchema, sourceSchema } from '../../resources/index.ts';

const ResourceSpecOut = z.object({
  min_scale: z.number().optional(),
  max_scale: z.number().optional(),
  cpu: z.number().optional(),
  cpu_limit: z.number().optional(),
  memory_mb: z.number().optional(),
  memory_limit_mb: z.number().optional(),
  labels: z.record(z.string(), z.string()).optional(),
  annotations: z.record(z.string(), z.string()).optional(),
  service_account_name: z.string().optional(),
  image_pull_secrets: z.array(z.string()).optional(),
  node_selector: z.record(z.string(), z.string()).optional(),
  idle_timeout_minutes: z.number().optional(),
});

export const SourceConfigOut = z.object({
  integration_id: z.string().nullable(),
  repo_url: z.string().nullable(),
  deployment_type: z.enum(['dev', 'prod']),
  build_on_push: z.boolean(),
  custom_url: z.string().nullable(),
  resource_spec: ResourceSpecOut.nullable(),
  listener_id: z.string().nullable(),
  listener_config: z.object({ k8s_namespace: z.string().optional() }).nullable(),
  install_command: z.string().nullable(),
  build_command: z.string().nullable(),
  access_mode: z.enum(['api_key', 'public']),
});

export const SourceRevisionConfigOut = z.object({
  repo_ref: z.string().nullable(),
  graph_config_path: z.string().nullable(),
  langgraph_config_path: z.string().nullable(),
  image_uri: z.string().nullable(),
  repo_commit_sha: z.string().nullable(),
  /** internal_source: the uploaded tarball's object path, and the SHA-256 of its bytes. */
  source_tarball_path: z.string().nullable(),
  source_tarball_sha256: z.string().nullable(),
});

/**
 * Whether it serves now, from the resource's Ready condition: `ready` null before anything was observed; `reason`
 * and `message` say why not (e.g. CrashLoopBackOff, DatabaseUnavailable); `since` is when `ready` last changed.
 */
export const Health = z.object({
  ready: z.boolean().nullable(),
  reason: z.string().nullable(),
  message: z.string().nullable(),
  since: z.string().nullable(),
});

/**
 * A deployment's status in one read (derived, read-only): `state` serving | building | failed | deleting; which
 * revision serves, which it asked for and which is newest (ids and numbers); `reason` and `message` say why it is
 * not serving the revision it asked for (a failed build, a revision on its way, a crashed server).
 */
export const StatusSummary = z.object({
  state: z.enum(['serving', 'building', 'failed', 'deleting']),
  serving_revision_id: z.string().nullable(),
  serving_revision_number: z.number().int().nullable(),
  /** The revision it asked for last: the newest, or an older one after a redeploy; state is about this one. */
  target_revision_id: z.string().nullable(),
  target_revision_number: z.number().int().nullable(),
  latest_revision_id: z.string().nullable(),
  latest_revision_number: z.number().int().nullable(),
  reason: z.string().nullable(),
  message: z.string().nullable(),
});
export type StatusSummary = z.infer<typeof StatusSummary>;

export const Deployment = z.object({
  id: z.string(),
  tenant_id: z.string(),
  name: z.string(),
  source: sourceSchema,
  source_config: SourceConfigOut,
  source_revision_config: SourceRevisionConfigOut,
  /** Names only: secret values are write-only. */
  secrets: z.array(z.object({ name: z.string() })),
  /** Plain strings: records stored before the input rules must still render. */
  secret_references: z.array(z.object({ name: z.string(), secret_name: z.string(), secret_key: z.string() })),
  status: deploymentPhaseSchema,
  latest_revision_id: z.string().nullable(),
  active_revision_id: z.string().nullable(),
  /** Where the deployment's agent server answers, once a runtime serves it. */
  url: z.string().nullable(),
  health: Health,
  status_summary: StatusSummary,
  created_at: z.string(),
  updated_at: z.string(),
});
export type Deployment = z.infer<typeof Deployment>;

export const Revision = z.object({
  id: z.string(),
  deployment_id: z.string(),
  revision_number: z.number().int(),
  status: revisionPhaseSchema,
  status_message: z.string().nullable(),
  source: sourceSchema,
  source_revision_config: SourceRevisionConfigOut,
  image: z.string().nullable(),
  repo_commit_sha: z.string().nullable(),
  health: Health,
  created_at: z.string(),
  updated_at: z.string(),
});
export type Revision = z.infer<typeof Revision>;

export const DeploymentList = z.object({ resources: z.array(Deployment), offset: z.number().int() });
export const RevisionList = z.object({ resources: z.array(Revision), offset: z.number().int() });

export const LogEntry = z.object({
  id: z.string(),
  timestamp: z.string(),
  type: z.enum(['build', 'deploy']),
  message: z.string(),
});
export type LogEntry = z.infer<typeof LogEntry>;

export const LogPage = z.object({ logs: z.array(LogEntry), next_offset: z.string().nullable() });
export type LogPage = z.infer<typeof LogPage>;

export const BulkDeleteResult = z.object({
  deleted: z.array(z.string()),
  errors: z.array(z.object({ id: z.string(), detail: z.string() })),
});

export const AccessToken = z.object({ token: z.string(), expires_at: z.string(), deployment_id: z.string() });

export const DeploymentErrorBody = z.object({
  detail: z.union([
    z.string(),
    z.array(z.object({ loc: z.array(z.union([z.string(), z.number()])), msg: z.string(), type: z.string() })),
  ]),
});

/** POST /v2/deployments/{id}/push-token: what `docker login` and `docker push` of a local build use. */
export const PushToken = z.object({
  /** The password (an opaque credential for the registry's token endpoint, this deployment's repository only). */
  token: z.string(),
  username: z.string(),
  /** The build registry prefix (host and path). */
  registry_url: z.string(),
  /** The one repository the token may push to and pull from: `<registry_url>/ag-<deployment id>`. */
  repository_url: z.string(),
  expires_at: z.string(),
});

/** GET /v2/registry/token: the Docker token spec's answer (`token` and its OAuth2 alias `access_token`). */
export const RegistryToken = z.object({
  token: z.string(),
  access_token: z.string(),
  expires_in: z.number().int(),
  issued_at: z.string(),
});

/** POST /v2/deployments/{id}/upload-url: where to PUT the source tarball, and the object path to deploy it by. */
export const UploadUrl = z.object({
  upload_url: z.string(),
  object_path: z.string(),
  /** Headers the upload must carry (the signature covers its content type). */
  upload_headers: z.record(z.string(), z.string()),
  expires_at: z.string(),
  max_bytes: z.number().int(),
});

/** The answer to a finished upload. */
export const UploadDone = z.object({ object_path: z.string(), sha256: z.string(), size: z.number().int() });

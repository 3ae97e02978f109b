// Request and response schemas of the Deployments v2 API (snake_case, as the public API). The same schemas
// validate requests and feed /openapi.json.
import { z } from 'zod';
import { deploymentPhaseSchema, revisionPhaseSchema } from '../../../resources/index.ts';

const ENV_NAME = /^[A-Za-z_][A-Za-z0-9_]*$/;

export const ResourceSpecApi = z
  .object({
    min_scale: z.number().int().min(0).optional(),
    max_scale: z.number().int().min(0).optional(),
    cpu: z.number().positive().optional(),
    cpu_limit: z.number().positive().optional(),
    memory_mb: z.number().int().positive().optional(),
    memory_limit_mb: z.number().int().positive().optional(),
    labels: z.record(z.string(), z.string()).optional(),
    annotations: z.record(z.string(), z.string()).optional(),
    service_account_name: z.string().optional(),
    image_pull_secrets: z.array(z.string()).optional(),
    node_selector: z.record(z.string(), z.string()).optional(),
  })
  .refine((r) => r.min_scale === undefined || r.max_scale === undefined || r.min_scale <= r.max_scale, {
    message: 'min_scale must not exceed max_scale',
    path: ['max_scale'],
  });
export type ResourceSpecApi = z.infer<typeof ResourceSpecApi>;

export const SourceConfigIn = z.object({
  integration_id: z.string().nullable().optional(),
  repo_url: z.string().min(1).nullable().optional(),
  deployment_type: z.enum(['dev', 'prod']).optional(),
  build_on_push: z.boolean().optional(),
  custom_url: z.string().nullable().optional(),
  resource_spec: ResourceSpecApi.nullable().optional(),
  listener_id: z.string().nullable().optional(),
  listener_config: z.object({ k8s_namespace: z.string().optional() }).nullable().optional(),
  install_command: z.string().nullable().optional(),
  build_command: z.string().nullable().optional(),
});
export type SourceConfigIn = z.infer<typeof SourceConfigIn>;

export const SourceRevisionConfigIn = z.object({
  repo_ref: z.string().min(1).nullable().optional(),
  graph_config_path: z.string().min(1).nullable().optional(),
  /** Alias of graph_config_path used by the public API. */
  langgraph_config_path: z.string().min(1).nullable().optional(),
  image_uri: z.string().min(1).nullable().optional(),
});
export type SourceRevisionConfigIn = z.infer<typeof SourceRevisionConfigIn>;

export const SecretIn = z.object({
  name: z.string().regex(ENV_NAME, 'must be an environment variable name ([A-Za-z_][A-Za-z0-9_]*)'),
  value: z.string(),
});

export const SecretReferenceApi = z.object({
  name: z.string().regex(ENV_NAME, 'must be an environment variable name ([A-Za-z_][A-Za-z0-9_]*)'),
  secret_name: z.string().min(1),
  secret_key: z.string().min(1),
});

const uniqueNames = (list: { name: string }[] | undefined, ctx: z.RefinementCtx, field: string) => {
  const seen = new Set<string>();
  list?.forEach((s, i) => {
    if (seen.has(s.name)) {
      ctx.addIssue({ code: 'custom', path: [field, i, 'name'], message: `duplicate name "${s.name}"` });
    }
    seen.add(s.name);
  });
};

export const DeploymentCreate = z
  .object({
    name: z.string().trim().min(1).max(255),
    source: z.enum(['github', 'external_docker']),
    source_config: SourceConfigIn.default({}),
    source_revision_config: SourceRevisionConfigIn.default({}),
    secrets: z.array(SecretIn).default([]),
    secret_references: z.array(SecretReferenceApi).default([]),
  })
  .superRefine((b, ctx) => {
    const src = b.source_revision_config;
    if (b.source === 'github') {
      if (!b.source_config.repo_url) {
        ctx.addIssue({ code: 'custom', path: ['source_config', 'repo_url'], message: 'required for source github' });
      }
      if (!src.repo_ref) {
        ctx.addIssue({ code: 'custom', path: ['source_revision_config', 'repo_ref'], message: 'required for source github' });
      }
    } else if (!src.image_uri) {
      ctx.addIssue({
        code: 'custom',
        path: ['source_revision_config', 'image_uri'],
        message: 'required for source external_docker',
      });
    }
    if (b.source_config.build_on_push && src.repo_ref?.startsWith('refs/tags/')) {
      ctx.addIssue({
        code: 'custom',
        path: ['source_config', 'build_on_push'],
        message: 'must be false when repo_ref is a tag (refs/tags/...)',
      });
    }
    uniqueNames(b.secrets, ctx, 'secrets');
    uniqueNames(b.secret_references, ctx, 'secret_references');
  });
export type DeploymentCreate = z.infer<typeof DeploymentCreate>;

export const DeploymentPatch = z
  .object({
    name: z.string().trim().min(1).max(255).optional(),
    source: z.enum(['github', 'external_docker']).optional(),
    source_config: SourceConfigIn.optional(),
    source_revision_config: SourceRevisionConfigIn.optional(),
    secrets: z.array(SecretIn).optional(),
    secret_references: z.array(SecretReferenceApi).optional(),
  })
  .superRefine((b, ctx) => {
    uniqueNames(b.secrets, ctx, 'secrets');
    uniqueNames(b.secret_references, ctx, 'secret_references');
  });
export type DeploymentPatch = z.infer<typeof DeploymentPatch>;

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
});

export const SourceRevisionConfigOut = z.object({
  repo_ref: z.string().nullable(),
  graph_config_path: z.string().nullable(),
  langgraph_config_path: z.string().nullable(),
  image_uri: z.string().nullable(),
  repo_commit_sha: z.string().nullable(),
});

export const Deployment = z.object({
  id: z.string(),
  tenant_id: z.string(),
  name: z.string(),
  source: z.enum(['github', 'external_docker']),
  source_config: SourceConfigOut,
  source_revision_config: SourceRevisionConfigOut,
  /** Names only: secret values are write-only. */
  secrets: z.array(z.object({ name: z.string() })),
  secret_references: z.array(SecretReferenceApi),
  status: deploymentPhaseSchema,
  latest_revision_id: z.string().nullable(),
  active_revision_id: z.string().nullable(),
  /** Where the deployment's agent server answers, once a runtime serves it. */
  url: z.string().nullable(),
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
  source: z.enum(['github', 'external_docker']),
  source_revision_config: SourceRevisionConfigOut,
  image: z.string().nullable(),
  repo_commit_sha: z.string().nullable(),
  created_at: z.string(),
  updated_at: z.string(),
});
export type Revision = z.infer<typeof Revision>;

export const DeploymentList = z.object({ resources: z.array(Deployment), offset: z.number().int() });
export const RevisionList = z.object({ resources: z.array(Revision), offset: z.number().int() });

const csv = z
  .string()
  .transform((s) => s.split(',').map((x) => x.trim()).filter(Boolean))
  .optional();

export const ListDeploymentsQuery = z.object({
  limit: z.coerce.number().int().min(1).max(100).default(20),
  offset: z.coerce.number().int().min(0).default(0),
  name_contains: z.string().optional(),
  status: z
    .string()
    .transform((s) => s.split(',').map((x) => x.trim()).filter(Boolean))
    .pipe(z.array(deploymentPhaseSchema))
    .optional(),
  deployment_type: z.enum(['dev', 'prod']).optional(),
  deployment_ids: csv,
});

export const ListRevisionsQuery = z.object({
  limit: z.coerce.number().int().min(1).max(100).default(20),
  offset: z.coerce.number().int().min(0).default(0),
  status: z
    .string()
    .transform((s) => s.split(',').map((x) => x.trim()).filter(Boolean))
    .pipe(z.array(revisionPhaseSchema))
    .optional(),
});

export const BulkDeleteQuery = z.object({ deployment_ids: z.string().transform((s) => s.split(',').map((x) => x.trim()).filter(Boolean)).pipe(z.array(z.string()).min(1)) });

export const LogsQuery = z.object({
  type: z.enum(['build', 'deploy']).default('build'),
  limit: z.coerce.number().int().min(1).max(1000).default(50),
  offset: z.string().regex(/^\d+$/, 'must be a cursor returned as next_offset').optional(),
  order: z.enum(['asc', 'desc']).default('asc'),
});

export const LogPage = z.object({
  logs: z.array(z.object({ id: z.string(), timestamp: z.string(), type: z.enum(['build', 'deploy']), message: z.string() })),
  next_offset: z.string().nullable(),
});

export const BulkDeleteResult = z.object({
  deleted: z.array(z.string()),
  errors: z.array(z.object({ id: z.string(), detail: z.string() })),
});

export const DeploymentParams = z.object({ deployment_id: z.string() });
export const RevisionParams = z.object({ deployment_id: z.string(), revision_id: z.string() });

// AgentDeployment: what a tenant asked to run. Spec fields are camelCase versions of the API's source_config /
// source_revision_config; secret VALUES never live here, only the name of the Secret that holds them.
import { z } from 'zod';
import { API_VERSION, conditionSchema, objectMetaSchema } from './meta.ts';

/**
 * Where a revision's code comes from: a git repository (github), a prebuilt image (external_docker), a source
 * tarball uploaded through the control plane (internal_source, what LangChain's `langgraph deploy --remote` sends),
 * or an image the user built and pushed to the deployment's own repository in the build registry with a push token
 * (internal_docker, `langgraph deploy` with a local docker build).
 */
export const sourceSchema = z.enum(['github', 'external_docker', 'internal_source', 'internal_docker']);
export type Source = z.infer<typeof sourceSchema>;

/** Sources whose revisions run an image named in image_uri: nothing to build. */
export function runsImage(source: Source | string): boolean {
  return source === 'external_docker' || source === 'internal_docker';
}

export const deploymentTypeSchema = z.enum(['dev', 'prod']);

/** A week: a longer idle window is no idle policy at all (0 says that). */
export const MAX_IDLE_TIMEOUT_MINUTES = 10_080;
/** Idle minutes of a `dev` deployment that names none: previews and branches mostly sit unused. */
export const DEV_IDLE_TIMEOUT_MINUTES = 15;

export const resourceSpecSchema = z.object({
  minScale: z.number().int().min(0).optional(),
  maxScale: z.number().int().min(0).optional(),
  /** CPU cores (request). */
  cpu: z.number().positive().optional(),
  cpuLimit: z.number().positive().optional(),
  memoryMb: z.number().int().positive().optional(),
  memoryLimitMb: z.number().int().positive().optional(),
  labels: z.record(z.string(), z.string()).optional(),
  annotations: z.record(z.string(), z.string()).optional(),
  serviceAccountName: z.string().optional(),
  imagePullSecrets: z.array(z.string()).optional(),
  nodeSelector: z.record(z.string(), z.string()).optional(),
  /**
   * Minutes without traffic, runs or due crons after which the agent server stops until its next request or due
   * work (0: never). Unset: the deployment type's default (idleTimeoutMinutesOf).
   */
  idleTimeoutMinutes: z.number().int().min(0).max(MAX_IDLE_TIMEOUT_MINUTES).optional(),
});
export type ResourceSpec = z.infer<typeof resourceSpecSchema>;

export const sourceConfigSchema = z.object({
  integrationId: z.string().nullable().optional(),
  repoUrl: z.string().nullable().optional(),
  deploymentType: deploymentTypeSchema.optional(),
  buildOnPush: z.boolean().optional(),
  customUrl: z.string().nullable().optional(),
  resourceSpec: resourceSpecSchema.nullable().optional(),
  listenerId: z.string().nullable().optional(),
  listenerConfig: z.object({ k8sNamespace: z.string().optional() }).nullable().optional(),
  installCommand: z.string().nullable().optional(),
  buildCommand: z.string().nullable().optional(),
  /**
   * Who may call the deployed agent: `api_key` (default) = requests need an API key of the deployment's tenant in
   * X-Api-Key; `public` = anyone who reaches the URL (opt-in only).
   */
  accessMode: z.enum(['api_key', 'public']).optional(),
});
export type SourceConfig = z.infer<typeof sourceConfigSchema>;

export const sourceRevisionConfigSchema = z.object({
  /** Branch, tag, full ref or commit (github source). */
  repoRef: z.string().nullable().optional(),
  /** Path of langgraph.json inside the repository (the public API also calls it langgraph_config_path). */
  graphConfigPath: z.string().nullable().optional(),
  /** Prebuilt image (external_docker source). */
  imageUri: z.string().nullable().optional(),
  /** The upload's object path as the API named it (internal_source): `sources/<deployment id>/<upload id>`. */
  sourceTarballPath: z.string().nullable().optional(),
  /** SHA-256 of the uploaded tarball: the stored bytes a build (and every rebuild of the revision) extracts. */
  sourceTarballSha256: z.string().nullable().optional(),
});
export type SourceRevisionConfig = z.infer<typeof sourceRevisionConfigSchema>;

export const secretReferenceSchema = z.object({
  /** Environment variable name. */
  name: z.string().min(1),
  secretName: z.string().min(1),
  secretKey: z.string().min(1),
});
export type SecretReference = z.infer<typeof secretReferenceSchema>;

export const deploymentPhaseSchema = z.enum(['AWAITING_DATABASE', 'READY', 'UNUSED', 'AWAITING_DELETE', 'UNKNOWN']);
export type DeploymentPhase = z.infer<typeof deploymentPhaseSchema>;

export const agentDeploymentSpecSchema = z.object({
  /** API id of the deployment (a UUID); the object name is derived from it (see names.ts). */
  deploymentId: z.string().min(1),
  tenantId: z.string().min(1),
  /** The API's `name`: free text, unique within a tenant. */
  displayName: z.string().min(1),
  source: sourceSchema,
  sourceConfig: sourceConfigSchema,
  sourceRevisionConfig: sourceRevisionConfigSchema,
  /** Name of the Secret (embedded: secret row) holding the current environment values, if any. */
  secretsName: z.string().nullable().optional(),
  secretReferences: z.array(secretReferenceSchema).optional(),
  /** Number of the newest revision; revision names are `<deployment name>-r<n>`. */
  revisionCounter: z.number().int().min(1),
  /**
   * The revision that should take traffic. Set to each new revision when it is created, and to an older one by
   * redeploy. The runtime moves status.activeRevisionName towards it.
   */
  targetRevisionName: z.string().min(1),
});
export type AgentDeploymentSpec = z.infer<typeof agentDeploymentSpecSchema>;

export const agentDeploymentStatusSchema = z.object({
  phase: deploymentPhaseSchema.optional(),
  latestRevisionName: z.string().optional(),
  /** The revision currently taking traffic (written by the runtime). */
  activeRevisionName: z.string().optional(),
  /** Stable URL where the deployment's agent server answers (written by the runtime). */
  url: z.string().optional(),
  observedGeneration: z.number().int().optional(),
  conditions: z.array(conditionSchema).optional(),
});
export type AgentDeploymentStatus = z.infer<typeof agentDeploymentStatusSchema>;

export const agentDeploymentSchema = z.object({
  apiVersion: z.literal(API_VERSION),
  kind: z.literal('AgentDeployment'),
  metadata: objectMetaSchema,
  spec: agentDeploymentSpecSchema,
  status: agentDeploymentStatusSchema.optional(),
});
export type AgentDeployment = z.infer<typeof agentDeploymentSchema>;

/**
 * The idle policy of a deployment, in minutes (0: its agent server never sleeps). Explicit wins; else `dev`
 * deployments sleep after DEV_IDLE_TIMEOUT_MINUTES and `prod` ones never (a first request after a sleep waits for a
 * start), nor any that keeps replicas up on purpose (min_scale 1 or more).
 */
export function idleTimeoutMinutesOf(config: Pick<SourceConfig, 'deploymentType' | 'resourceSpec'>): number {
  const explicit = config.resourceSpec?.idleTimeoutMinutes;
  if (explicit !== undefined) return explicit;
  if ((config.resourceSpec?.minScale ?? 0) >= 1) return 0;
  return (config.deploymentType ?? 'dev') === 'dev' ? DEV_IDLE_TIMEOUT_MINUTES : 0;
}

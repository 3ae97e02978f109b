// AgentRevision: one immutable snapshot of what to build and run. Only its status changes after creation, and
// only the runtime (operator) writes it.
import { z } from 'zod';
import {
  secretReferenceSchema,
  sourceConfigSchema,
  sourceRevisionConfigSchema,
  sourceSchema,
} from './agent-deployment.ts';
import { API_VERSION, conditionSchema, objectMetaSchema } from './meta.ts';

export const revisionPhaseSchema = z.enum([
  'CREATING',
  'QUEUED',
  'AWAITING_BUILD',
  'BUILDING',
  'AWAITING_DEPLOY',
  'DEPLOYING',
  'DEPLOYED',
  'CREATE_FAILED',
  'BUILD_FAILED',
  'DEPLOY_FAILED',
  'SKIPPED',
  'INTERRUPTED',
  'UNKNOWN',
]);
export type RevisionPhase = z.infer<typeof revisionPhaseSchema>;
/** The phases by name (`RevisionPhase.DEPLOYED` is the string 'DEPLOYED'), so tsc checks every phase code names. */
export const RevisionPhase = revisionPhaseSchema.enum;

/** Phases a revision does not leave on its own: nothing more happens to it unless it is redeployed. */
export const TERMINAL_REVISION_PHASES: ReadonlySet<RevisionPhase> = new Set([
  RevisionPhase.DEPLOYED,
  RevisionPhase.CREATE_FAILED,
  RevisionPhase.BUILD_FAILED,
  RevisionPhase.DEPLOY_FAILED,
  RevisionPhase.SKIPPED,
  RevisionPhase.INTERRUPTED,
  RevisionPhase.UNKNOWN,
]);

export const agentRevisionSpecSchema = z.object({
  /** Name of the owning AgentDeployment object. */
  deploymentName: z.string().min(1),
  /** API id of the owning deployment. */
  deploymentId: z.string().min(1),
  tenantId: z.string().min(1),
  revisionNumber: z.number().int().min(1),
  source: sourceSchema,
  sourceRevisionConfig: sourceRevisionConfigSchema,
  /** Snapshot of the deployment's source_config when the revision was made (commands, resources, type). */
  sourceConfig: sourceConfigSchema,
  /** Secret holding this revision's environment values (immutable per revision), if any. */
  secretsName: z.string().nullable().optional(),
  secretReferences: z.array(secretReferenceSchema).optional(),
});
export type AgentRevisionSpec = z.infer<typeof agentRevisionSpecSchema>;

export const agentRevisionStatusSchema = z.object({
  phase: revisionPhaseSchema.optional(),
  statusMessage: z.string().optional(),
  /** The image (or local build id) the revision runs. */
  image: z.string().optional(),
  /** Commit the repo_ref resolved to. */
  repoCommitSha: z.string().optional(),
  observedGeneration: z.number().int().optional(),
  conditions: z.array(conditionSchema).optional(),
});
export type AgentRevisionStatus = z.infer<typeof agentRevisionStatusSchema>;

export const agentRevisionSchema = z.object({
  apiVersion: z.literal(API_VERSION),
  kind: z.literal('AgentRevision'),
  metadata: objectMetaSchema,
  spec: agentRevisionSpecSchema,
  status: agentRevisionStatusSchema.optional(),
});
export type AgentRevision = z.infer<typeof agentRevisionSchema>;

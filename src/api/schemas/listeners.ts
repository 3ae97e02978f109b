// Bodies, answers, queries, headers and path parameters of the Listeners v2 API: what a data plane registers as,
// reports and is handed (its snapshot, a git credential), and the listener keys made for it.
import { z } from 'zod';
import {
  agentDeploymentStatusSchema,
  agentRevisionStatusSchema,
  type AgentDeployment,
  type AgentRevision,
} from '../../resources/index.ts';
import type { LogType } from '../../state/revision-logs.ts';
import { baseUrlProblem } from '../listener-urls.ts';

const baseUrl = z
  .string()
  .max(2048)
  .superRefine((v, ctx) => {
    const problem = baseUrlProblem(v);
    if (problem) ctx.addIssue({ code: 'custom', message: problem });
  });

const ONE_NAMESPACE =
  "a listener's data plane serves one namespace (its chart's agent namespace, the only one its listener and operator watch and have rights in): list at most one";

export const ListenerCreate = z
  .object({
    compute_type: z.enum(['k8s', 'local']),
    compute_id: z
      .string()
      .min(1)
      .max(253)
      .regex(/^[^\p{Cc}]*$/u, 'must not contain control characters'),
    compute_config: z
      .object({
        // A data plane serves one namespace: the chart's agent namespace, the only one its listener and operator have
        // rights in and watch. A second one would be accepted and never reconciled, so it is refused here.
        k8s_namespaces: z.array(z.string().regex(/^[a-z0-9]([-a-z0-9]{0,61}[a-z0-9])?$/)).max(1, ONE_NAMESPACE),
      })
      .strict()
      .default({ k8s_namespaces: [] }),
    version: z.string().max(100).nullable().optional(),
    /** Where this listener's deployments are served; the URLs it reports must lie under it. */
    base_url: baseUrl.nullable().optional(),
  })
  .strict();
export type ListenerCreate = z.infer<typeof ListenerCreate>;

export const ListenerPatch = z
  .object({
    compute_config: ListenerCreate.shape.compute_config.removeDefault().optional(),
    version: z.string().max(100).nullable().optional(),
    base_url: baseUrl.nullable().optional(),
    compute_id: z.unknown().optional(),
    compute_type: z.unknown().optional(),
  })
  .strict();
export type ListenerPatch = z.infer<typeof ListenerPatch>;

export const Listener = z.object({
  id: z.string(),
  tenant_id: z.string(),
  compute_type: z.enum(['k8s', 'local']),
  compute_id: z.string(),
  compute_config: z.object({ k8s_namespaces: z.array(z.string()) }),
  version: z.string().nullable(),
  base_url: z.string().nullable(),
  connected: z.boolean(),
  last_seen_at: z.string().nullable(),
  agent_version: z.string().nullable(),
  deployment_count: z.number().int(),
  created_at: z.string(),
  updated_at: z.string(),
});
export type Listener = z.infer<typeof Listener>;

const logEntry = z.object({ id: z.string().regex(/^\d{1,15}$/), message: z.string().max(65_536) });
const logBatch = z.array(logEntry).max(2_000);
export const ListenerReport = z
  .object({
    agent_version: z.string().max(100).optional(),
    deployments: z
      .array(
        z.object({
          deployment_id: z.string(),
          status: agentDeploymentStatusSchema
            .pick({ phase: true, url: true, activeRevisionName: true, latestRevisionName: true })
            .extend({ url: z.string().max(2048).optional() })
            .strict(),
          revisions: z
            .array(
              z.object({
                name: z.string().max(253),
                status: agentRevisionStatusSchema
                  .pick({ phase: true, statusMessage: true, image: true, repoCommitSha: true })
                  .extend({ statusMessage: z.string().max(16_384).optional() })
                  .strict(),
                logs: z.object({ build: logBatch.optional(), deploy: logBatch.optional() }).strict().optional(),
              }),
            )
            .max(1_000),
        }),
      )
      .max(1_000),
  })
  .strict();
export type ListenerReport = z.infer<typeof ListenerReport>;

/** What a listener must run: its deployments, their revisions, the env values they need, and the tenant's key hashes. */
export type ListenerSnapshot = {
  cursor: string;
  deployments: {
    name: string;
    annotations: Record<string, string>;
    spec: AgentDeployment['spec'];
    revisions: { name: string; spec: AgentRevision['spec']; log_cursors: Record<LogType, string | null> }[];
  }[];
  /** Environment values by secret set name (only the sets the snapshot's objects name). */
  secrets: Record<string, Record<string, string>>;
  /** SHA-256 hashes of the keys the tenant's agents accept. */
  key_hashes: string[];
  /** The namespaces the listener offers (compute_config.k8s_namespaces): where it looks for what it made. */
  namespaces: string[];
};

export const ListenerGitCredentialRequest = z
  .object({
    integration_id: z.string().uuid('must be the id (a UUID) of an integration'),
    repo_url: z.string().min(1).max(2048),
  })
  .strict();
export type ListenerGitCredentialRequest = z.infer<typeof ListenerGitCredentialRequest>;

export const ListenerGitCredential = z.object({
  host: z.string(),
  username: z.string(),
  token: z.string(),
  expires_at: z.string().optional(),
});
export type ListenerGitCredential = z.infer<typeof ListenerGitCredential>;

export const ListenerList = z.object({ resources: z.array(Listener) });

export const ListenerParams = z.object({ listener_id: z.string() });

export const ListenerDeleteQuery = z.object({ cascade: z.enum(['true', 'false']).default('false') });

export const ListenerKeyCreate = z
  .object({
    name: z
      .string()
      .min(1)
      .max(200)
      .regex(/^[^\p{Cc}]*$/u)
      .optional(),
  })
  .strict()
  .default({});

export const ListenerKeyCreated = z.object({
  id: z.string(),
  name: z.string(),
  listener_id: z.string(),
  tenant_id: z.string(),
  key: z.string(),
  created_at: z.string(),
});

export const ListenerWatchQuery = z.object({
  since: z.string().max(64).optional(),
  timeout: z.coerce.number().int().min(0).max(60).default(25),
});

export const ListenerWatchHeaders = z.object({ 'x-agentplane-version': z.string().max(100).optional() }).passthrough();

export const ListenerReportResult = z.object({ accepted: z.number(), ignored: z.array(z.string()) });
export type ListenerReportResult = z.infer<typeof ListenerReportResult>;

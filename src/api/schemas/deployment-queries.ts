// Query strings and path parameters of the Deployments v2 API (list, revisions, logs, bulk delete), and the byte
// bounds of a log page.
import { z } from 'zod';
import { deploymentPhaseSchema, revisionPhaseSchema } from '../../resources/index.ts';
import { StatusSummary } from './deployment-views.ts';

/** A comma-separated list in one query parameter ("a, b,,c" -> ["a", "b", "c"]). */
const commaList = () =>
  z.string().transform((s) =>
    s
      .split(',')
      .map((x) => x.trim())
      .filter(Boolean),
  );
const csv = commaList().optional();

export const ListDeploymentsQuery = z.object({
  limit: z.coerce.number().int().min(1).max(100).default(20),
  offset: z.coerce.number().int().min(0).default(0),
  name_contains: z.string().optional(),
  status: commaList().pipe(z.array(deploymentPhaseSchema)).optional(),
  /** By status_summary.state, comma-separated (serving,building,failed,deleting). */
  state: commaList().pipe(z.array(StatusSummary.shape.state)).optional(),
  deployment_type: z.enum(['dev', 'prod']).optional(),
  deployment_ids: csv,
});

export const ListRevisionsQuery = z.object({
  limit: z.coerce.number().int().min(1).max(100).default(20),
  offset: z.coerce.number().int().min(0).default(0),
  status: commaList().pipe(z.array(revisionPhaseSchema)).optional(),
});

export const BulkDeleteQuery = z.object({
  deployment_ids: commaList().pipe(z.array(z.string()).min(1)),
});

/** Bytes of log messages in one page: by default, and at most (a page of 1000 long lines would be megabytes). */
export const DEFAULT_LOG_PAGE_BYTES = 1024 * 1024;
export const MAX_LOG_PAGE_BYTES = 8 * 1024 * 1024;

export const LogsQuery = z.object({
  type: z.enum(['build', 'deploy']).default('build'),
  limit: z.coerce.number().int().min(1).max(1000).default(50),
  offset: z.string().regex(/^\d+$/, 'must be a cursor returned as next_offset').optional(),
  order: z.enum(['asc', 'desc']).default('asc'),
  /** A page also ends before its messages pass this many UTF-8 bytes (it always holds at least one line). */
  limit_bytes: z.coerce.number().int().min(1024).max(MAX_LOG_PAGE_BYTES).default(DEFAULT_LOG_PAGE_BYTES),
});

export const LiveLogsQuery = z.object({
  /** How many of the serving revision's last lines come first. */
  tail: z.coerce.number().int().min(0).max(1000).default(100),
});

export const DeploymentParams = z.object({ deployment_id: z.string() });
export const RevisionParams = z.object({ deployment_id: z.string(), revision_id: z.string() });

// A deployment's revisions: listing and reading them, making new ones (on request or on push), pointing traffic
// at one, and paging its logs.
import { ConflictError, NotFoundError } from '../../../lib/errors.ts';
import { redactUrlsIn } from '../../../lib/redact.ts';
import {
  RevisionPhase,
  isUuid,
  revisionName,
  type AgentDeployment,
  type AgentRevision,
} from '../../../resources/index.ts';
import type { Deployment, Revision } from '../../../api/schemas/deployment-views.ts';
import { PUSH_DELIVERIES_ANNOTATION, withRevisionQuota, type DeploymentDeps } from './deps.ts';
import { toApiRevision } from './mapping.ts';
import { ensureRevision, render, requireDeployment, revisionsOf, updateDeployment } from './records.ts';

/** Thrown inside the revision quota when a push repeats one already handled (so its place is given back). */
const REPEAT = Symbol('repeated push');

export type RevisionListQuery = { limit: number; offset: number; status?: string[] };
export type RevisionLogQuery = {
  type: 'build' | 'deploy';
  limit: number;
  offset?: string;
  order: 'asc' | 'desc';
  limit_bytes: number;
};

export async function listRevisions(
  deps: DeploymentDeps,
  tenant: string,
  id: string,
  q: RevisionListQuery,
): Promise<{ resources: Revision[]; offset: number }> {
  const dep = await requireDeployment(deps, tenant, id);
  const all = (await revisionsOf(deps, dep))
    .map(toApiRevision)
    .filter((r) => !q.status?.length || q.status.includes(r.status));
  const page = all.slice(q.offset, q.offset + q.limit);
  return { resources: page, offset: q.offset + page.length };
}

export async function requireRevision(
  deps: DeploymentDeps,
  tenant: string,
  id: string,
  revisionId: string,
): Promise<{ dep: AgentDeployment; rev: AgentRevision }> {
  const dep = await requireDeployment(deps, tenant, id);
  const rev = isUuid(revisionId)
    ? (await revisionsOf(deps, dep)).find((r) => r.metadata.uid === revisionId)
    : undefined;
  if (!rev) throw new NotFoundError(`Revision ID ${revisionId} not found.`);
  return { dep, rev };
}

export async function getRevision(
  deps: DeploymentDeps,
  tenant: string,
  id: string,
  revisionId: string,
): Promise<Revision> {
  return toApiRevision((await requireRevision(deps, tenant, id, revisionId)).rev);
}

/** A new revision from the deployment's current settings (e.g. to rebuild the same ref). */
export async function createRevision(deps: DeploymentDeps, tenant: string, id: string): Promise<Revision> {
  await requireDeployment(deps, tenant, id); // a missing deployment is a 404, not a quota answer
  const dep = await withRevisionQuota(deps, tenant, () =>
    updateDeployment(deps, tenant, id, async (d) => {
      d.spec.revisionCounter += 1;
      d.spec.targetRevisionName = revisionName(d.metadata.name, d.spec.revisionCounter);
      return d;
    }),
  );
  return toApiRevision(await ensureRevision(deps, dep));
}

/**
 * Build on push: a new revision unless one of `keys` (the webhook's delivery id, the pushed commit) already made
 * one for the deployment. The last keys are kept on the deployment and written together with the new revision
 * number, so a redelivery racing the first one loses on the resource version. Undefined: a repeat.
 */
export async function createRevisionOnPush(
  deps: DeploymentDeps,
  tenant: string,
  id: string,
  keys: string[],
): Promise<Revision | undefined> {
  let repeat = false;
  const dep = await withRevisionQuota(deps, tenant, async () => {
    const updated = await updateDeployment(deps, tenant, id, async (d) => {
      const seen = (d.metadata.annotations?.[PUSH_DELIVERIES_ANNOTATION] ?? '').split(',').filter(Boolean);
      repeat = keys.some((k) => seen.includes(k));
      if (repeat) return undefined;
      d.metadata.annotations = {
        ...d.metadata.annotations,
        [PUSH_DELIVERIES_ANNOTATION]: [...seen, ...keys].slice(-40).join(','),
      };
      d.spec.revisionCounter += 1;
      d.spec.targetRevisionName = revisionName(d.metadata.name, d.spec.revisionCounter);
      return d;
    });
    // A repeated delivery makes no revision: its place goes back.
    if (repeat) throw REPEAT;
    return updated;
  }).catch((err: unknown) => {
    if (err === REPEAT) return undefined;
    throw err;
  });
  if (!dep) return undefined;
  const rev = await ensureRevision(deps, dep);
  deps.logger.info({ deployment_id: id, revision: rev.metadata.name }, 'revision created on push');
  return toApiRevision(rev);
}

/** Points the deployment's traffic at an existing revision; the runtime rolls to it. */
export async function redeploy(
  deps: DeploymentDeps,
  tenant: string,
  id: string,
  revisionId: string,
): Promise<Deployment> {
  const { rev } = await requireRevision(deps, tenant, id, revisionId);
  const unbuilt = neverBuilt(rev);
  if (unbuilt) throw new ConflictError(unbuilt);
  const dep = await updateDeployment(deps, tenant, id, async (d) =>
    d.spec.targetRevisionName === rev.metadata.name
      ? undefined
      : { ...d, spec: { ...d.spec, targetRevisionName: rev.metadata.name } },
  );
  return render(deps, dep);
}

/** Phases a revision stays in for good: pointed at again, it would neither build nor serve. */
const ENDED_UNBUILT = new Set<string>([
  RevisionPhase.CREATE_FAILED,
  RevisionPhase.BUILD_FAILED,
  RevisionPhase.SKIPPED,
  RevisionPhase.INTERRUPTED,
  RevisionPhase.UNKNOWN,
]);

/**
 * Why traffic cannot go to a revision that ended without a build (there is nothing to roll back to, and the
 * deployment would read failed until the next redeploy); undefined when it can.
 */
function neverBuilt(rev: AgentRevision): string | undefined {
  const phase = rev.status?.phase;
  if (!phase || !ENDED_UNBUILT.has(phase) || rev.status?.image) return undefined;
  const why = rev.status?.statusMessage ? `: ${rev.status.statusMessage}` : '';
  return (
    `revision ${rev.spec.revisionNumber} never built (${phase}${why}), so there is nothing to roll back to; ` +
    'redeploy a revision that served, or make a new one from the fixed source'
  );
}

export async function revisionLogs(
  deps: DeploymentDeps,
  tenant: string,
  id: string,
  revisionId: string,
  q: RevisionLogQuery,
) {
  const { rev } = await requireRevision(deps, tenant, id, revisionId);
  const page = await deps.store.readLogs(deps.ns, rev.metadata.name, q);
  // Paged by bytes as well as lines: the page ends before its messages pass limit_bytes (at least one line, so a
  // reader always moves on); the cursor is then the last line given, in either order.
  const logs: typeof page.logs = [];
  let bytes = 0;
  for (const l of page.logs) {
    const message = redactUrlsIn(l.message);
    bytes += Buffer.byteLength(message);
    if (logs.length && bytes > q.limit_bytes) break;
    logs.push({ ...l, message });
  }
  const cut = logs.length < page.logs.length;
  return { logs, next_offset: cut ? logs[logs.length - 1]!.id : page.next_offset };
}

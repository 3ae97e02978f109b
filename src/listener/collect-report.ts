// The report half of the listener's sync: what the local operator made of this listener's deployments (statuses, the
// URL, and the build/deploy log lines after the control plane's cursor), as the report the control plane takes.
import { LABEL_DEPLOYMENT } from '../resources/index.ts';
import type { ListenerReport, ListenerSnapshot } from '../api/schemas/listeners.ts';
import type { LogType } from '../state/revision-logs.ts';
import { ourDeployments, type SyncContext } from './local-store.ts';

/**
 * The report, and the log cursors it moves (`<revision>/<type>` to the last line id it carries): the caller records
 * them once the control plane has taken the report.
 */
export async function collectReport(
  ctx: SyncContext,
  last: ListenerSnapshot | undefined,
  version: string,
): Promise<{ report: ListenerReport; marks: [string, number][] }> {
  const { store } = ctx;
  const deps = await ourDeployments(ctx, last);
  // Revisions by their deployment: the local operator may have made one itself (without our label).
  const revs = (
    await Promise.all(
      deps.map((d) =>
        store.list('AgentRevision', d.metadata.namespace, { labelSelector: `${LABEL_DEPLOYMENT}=${d.metadata.name}` }),
      ),
    )
  ).flatMap((l) => l.items);
  const marks: [string, number][] = [];
  const report: ListenerReport = { agent_version: version, deployments: [] };
  for (const d of deps) {
    if (d.metadata.deletionTimestamp) continue;
    const mine = revs.filter(
      (r) => r.spec.deploymentName === d.metadata.name && r.metadata.namespace === d.metadata.namespace,
    );
    const revisions: ListenerReport['deployments'][number]['revisions'] = [];
    for (const r of mine) {
      const logs: Partial<Record<LogType, { id: string; message: string }[]>> = {};
      for (const type of ['build', 'deploy'] as const) {
        const key = `${r.metadata.name}/${type}`;
        const after = ctx.shipped.get(key);
        if (after === undefined) continue; // the control plane's cursor is not known yet
        const page = await store.readLogs(r.metadata.namespace!, r.metadata.name, {
          type,
          limit: 500,
          offset: after > 0 ? String(after) : undefined,
          order: 'asc',
        });
        const fresh = page.logs.filter((l) => Number(l.id) > after);
        if (fresh.length) {
          logs[type] = fresh.map((l) => ({ id: l.id, message: l.message }));
          marks.push([key, Number(fresh[fresh.length - 1]!.id)]);
        }
      }
      const s = r.status ?? {};
      revisions.push({
        name: r.metadata.name,
        status: defined({
          phase: s.phase,
          statusMessage: s.statusMessage?.slice(0, 16_384),
          image: s.image,
          repoCommitSha: s.repoCommitSha,
        }),
        ...(Object.keys(logs).length ? { logs } : {}),
      });
    }
    const s = d.status ?? {};
    report.deployments.push({
      deployment_id: d.spec.deploymentId,
      status: defined({
        phase: s.phase,
        url: s.url,
        activeRevisionName: s.activeRevisionName,
        latestRevisionName: s.latestRevisionName,
      }),
      revisions,
    });
  }
  return { report, marks };
}

function defined<T extends object>(o: T): T {
  return Object.fromEntries(Object.entries(o).filter(([, v]) => v !== undefined)) as T;
}

// A data plane's reports: statuses of the deployments and revisions assigned to its listener, and their build and
// deploy log lines (bounded as local builds are, with a per-revision cursor so nothing is taken in twice).
import { ValidationError } from '../../../lib/errors.ts';
import { admitLogLines, type LogUsage } from '../../../lib/log-limits.ts';
import { LABEL_DEPLOYMENT, isUuid, type AgentDeployment, type AgentRevision } from '../../../resources/index.ts';
import { StaleResourceVersionError } from '../../../state/errors.ts';
import { type LogType } from '../../../state/revision-logs.ts';
import { deploymentsOf, requireListener, touch, type ListenerDeps } from './records.ts';
import { reportedUrlProblem } from '../../../api/listener-urls.ts';
import type { ListenerReport } from '../../../api/schemas/listeners.ts';

/** Annotations on the control plane's revision: the id of the last data-plane log line taken in, per type. */
export const LOG_CURSOR_ANNOTATION: Record<LogType, string> = {
  build: 'agentplane.dev/listener-log-build',
  deploy: 'agentplane.dev/listener-log-deploy',
};

/** Annotations on the control plane's revision: lines and bytes stored from the data plane, per type ("n,b[,t]"). */
export const LOG_USAGE_ANNOTATION: Record<LogType, string> = {
  build: 'agentplane.dev/listener-log-build-usage',
  deploy: 'agentplane.dev/listener-log-deploy-usage',
};

function parseUsage(value: string | undefined): LogUsage {
  const [lines, bytes, truncated] = (value ?? '').split(',');
  return { lines: Number(lines) || 0, bytes: Number(bytes) || 0, truncated: truncated === 't' };
}

const formatUsage = (u: LogUsage) => `${u.lines},${u.bytes}${u.truncated ? ',t' : ''}`;

async function setStatus<T extends AgentDeployment | AgentRevision>(
  { store, ns }: ListenerDeps,
  kind: T['kind'],
  name: string,
  change: (obj: T) => T | undefined,
): Promise<void> {
  for (let attempt = 0; ; attempt++) {
    const obj = (await store.get(kind, ns, name)) as unknown as T;
    const next = change(structuredClone(obj));
    if (!next) return;
    try {
      await store.updateStatus(kind, next as never);
      return;
    } catch (err) {
      if (err instanceof StaleResourceVersionError && attempt < 10) continue;
      throw err;
    }
  }
}

async function setAnnotations(
  { store, ns }: ListenerDeps,
  name: string,
  values: Record<string, string>,
): Promise<void> {
  for (let attempt = 0; ; attempt++) {
    const rev = await store.get('AgentRevision', ns, name);
    rev.metadata.annotations = { ...rev.metadata.annotations, ...values };
    try {
      await store.update('AgentRevision', rev);
      return;
    } catch (err) {
      if (err instanceof StaleResourceVersionError && attempt < 10) continue;
      throw err;
    }
  }
}

/** Takes in a data plane's statuses and log lines; only objects assigned to this listener are written. */
export async function report(
  deps: ListenerDeps,
  tenant: string,
  id: string,
  body: ListenerReport,
): Promise<{ accepted: number; ignored: string[] }> {
  const { store, ns } = deps;
  const r = await requireListener(deps, tenant, id);
  await touch(deps, r, body.agent_version);
  const assigned = await deploymentsOf(deps, tenant, id);
  const find = (deploymentId: string) =>
    isUuid(deploymentId) ? assigned.find((x) => x.spec.deploymentId === deploymentId) : undefined;
  // URLs first, so a refused one leaves nothing half-written.
  body.deployments.forEach((d, i) => {
    const dep = find(d.deployment_id);
    if (d.status.url === undefined || !dep) return;
    const problem = reportedUrlProblem(d.status.url, {
      baseUrl: r.baseUrl,
      customUrl: dep.spec.sourceConfig.customUrl,
    });
    if (problem) {
      throw new ValidationError(`deployments[${i}].status.url ${problem}`, [
        { loc: ['body', 'deployments', i, 'status', 'url'], msg: problem, type: 'value_error' },
      ]);
    }
  });
  const ignored: string[] = [];
  let accepted = 0;
  for (const d of body.deployments) {
    const dep = find(d.deployment_id);
    if (!dep || dep.metadata.deletionTimestamp) {
      ignored.push(d.deployment_id);
      continue;
    }
    const { items } = await store.list('AgentRevision', ns, {
      labelSelector: `${LABEL_DEPLOYMENT}=${dep.metadata.name}`,
    });
    const mine = new Map(items.filter((x) => x.spec.tenantId === tenant).map((x) => [x.metadata.name, x]));
    for (const rev of d.revisions) {
      const current = mine.get(rev.name);
      if (!current) {
        ignored.push(rev.name);
        continue;
      }
      await setStatus<AgentRevision>(deps, 'AgentRevision', rev.name, (obj) => {
        const status = { ...obj.status, ...rev.status };
        if (rev.status.statusMessage === undefined) delete status.statusMessage;
        return JSON.stringify(status) === JSON.stringify(obj.status ?? {}) ? undefined : { ...obj, status };
      });
      for (const type of ['build', 'deploy'] as const) {
        const entries = rev.logs?.[type];
        if (!entries?.length) continue;
        const after = Number(current.metadata.annotations?.[LOG_CURSOR_ANNOTATION[type]] ?? '0');
        const fresh = entries.filter((e) => Number(e.id) > after).sort((a, b) => Number(a.id) - Number(b.id));
        if (!fresh.length) continue;
        // Bounded as local builds are: lines cut at 8 KiB, at most so many lines and bytes per revision and
        // type, then one line saying so; the cursor still moves on, so the data plane stops resending.
        const usage = parseUsage(current.metadata.annotations?.[LOG_USAGE_ANNOTATION[type]]);
        const lines = admitLogLines(
          fresh.map((e) => e.message),
          usage,
          deps.logLimits,
        );
        if (lines.length) await store.appendLogs(ns, rev.name, type, lines);
        await setAnnotations(deps, rev.name, {
          [LOG_CURSOR_ANNOTATION[type]]: fresh[fresh.length - 1]!.id,
          [LOG_USAGE_ANNOTATION[type]]: formatUsage(usage),
        });
      }
      accepted++;
    }
    const known = (name: string | undefined) => name === undefined || mine.has(name);
    if (!known(d.status.activeRevisionName) || !known(d.status.latestRevisionName)) {
      ignored.push(d.deployment_id);
      continue;
    }
    await setStatus<AgentDeployment>(deps, 'AgentDeployment', dep.metadata.name, (obj) => {
      const status = { ...obj.status, ...d.status };
      return JSON.stringify(status) === JSON.stringify(obj.status ?? {}) ? undefined : { ...obj, status };
    });
    accepted++;
  }
  return { accepted, ignored };
}

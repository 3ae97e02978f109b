// A deployment's serving agent's log, live: the deploy log of the revision that serves (the agent server's own
// output, as the runtime stores it), its last lines first, then each new line as it is stored, following the traffic
// to the next revision when it moves. Read from the store, so it works whatever runtime wrote the lines and whichever
// replica of the control plane is asked.
import { setTimeout as sleep } from 'node:timers/promises';
import { NotFoundError } from '../../../lib/errors.ts';
import { redactUrlsIn } from '../../../lib/redact.ts';
import type { LogEntry } from '../../../state/revision-logs.ts';
import type { DeploymentDeps } from './deps.ts';
import { requireDeployment } from './records.ts';

export type LiveLogLine = LogEntry & { revision_id: string; revision_number: number };

export type LiveLogOptions = { tail: number; pollMs?: number; signal: AbortSignal };

/**
 * The lines as they come; ends when the deployment is deleted or `signal` aborts. The deployment is looked up before
 * the first line, so a missing one (or another workspace's) is a NotFound the caller answers with a 404.
 */
export async function liveLogs(
  deps: DeploymentDeps,
  tenant: string,
  id: string,
  opts: LiveLogOptions,
): Promise<AsyncGenerator<LiveLogLine>> {
  await requireDeployment(deps, tenant, id);
  return follow(deps, tenant, id, opts);
}

async function* follow(
  deps: DeploymentDeps,
  tenant: string,
  id: string,
  opts: LiveLogOptions,
): AsyncGenerator<LiveLogLine> {
  const pollMs = opts.pollMs ?? 500;
  let revision: { name: string; uid: string; number: number } | undefined;
  let cursor: string | undefined;
  while (!opts.signal.aborted) {
    let serving: typeof revision;
    try {
      serving = await servingRevision(deps, tenant, id);
    } catch (err) {
      if (err instanceof NotFoundError) return; // deleted: the tail ends
      throw err;
    }
    let page: LogEntry[] = [];
    if (serving && serving.name !== revision?.name) {
      // The first revision: its last `tail` lines; a revision the traffic moved to: all of it, from its start.
      const first = !revision;
      revision = serving;
      const read = await deps.store.readLogs(deps.ns, serving.name, {
        type: 'deploy',
        limit: first ? opts.tail : 1000,
        order: first ? 'desc' : 'asc',
      });
      page = first ? read.logs.reverse() : read.logs;
      cursor = page.at(-1)?.id;
    } else if (revision) {
      const read = await deps.store.readLogs(deps.ns, revision.name, {
        type: 'deploy',
        limit: 1000,
        order: 'asc',
        ...(cursor ? { offset: cursor } : {}),
      });
      page = read.logs;
      if (page.length) cursor = page.at(-1)!.id;
    }
    for (const l of page) {
      yield { ...l, message: redactUrlsIn(l.message), revision_id: revision!.uid, revision_number: revision!.number };
    }
    // A full page: more is waiting, read on at once.
    if (page.length < 1000) await sleep(pollMs, undefined, { signal: opts.signal }).catch(() => undefined);
  }
}

/** The revision traffic goes to (none before the first one serves). */
async function servingRevision(deps: DeploymentDeps, tenant: string, id: string) {
  const dep = await requireDeployment(deps, tenant, id);
  const name = dep.status?.activeRevisionName;
  if (!name) return undefined;
  try {
    const rev = await deps.store.get('AgentRevision', deps.ns, name);
    return { name, uid: rev.metadata.uid!, number: rev.spec.revisionNumber };
  } catch (err) {
    if (err instanceof NotFoundError) return undefined;
    throw err;
  }
}

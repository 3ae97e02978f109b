// A deployment's serving agent's log, live: the deploy log of the revision that serves (the agent server's own
// output, as the runtime stores it), its last lines first, then each new line as it is stored, following the traffic
// to the next revision when it moves. Read from the store, so it works whatever runtime wrote the lines and whichever
// replica of the control plane is asked. A line appended through this process's store wakes the tail at once; a slow
// poll catches what other processes append (an operator or a listener beside this control plane), a traffic move
// and the deployment's delete.
import { BadRequestError, NotFoundError } from '../../../lib/errors.ts';
import { redactUrlsIn } from '../../../lib/redact.ts';
import { revisionName } from '../../../resources/index.ts';
import type { LogEntry } from '../../../state/revision-logs.ts';
import type { DeploymentDeps } from './deps.ts';
import { requireDeployment } from './records.ts';

export type LiveLogLine = LogEntry & { revision_id: string; revision_number: number };

export type LiveLogOptions = {
  tail: number;
  /** The SSE Last-Event-ID of a dropped stream: the lines after it come, and no tail. */
  after?: string;
  /** How often the store is read when no append of this process says so (default 2 s). */
  pollMs?: number;
  signal: AbortSignal;
};

const SLOW_POLL_MS = 2_000;
const PAGE = 1000;

/** A line's event id: `<revision number>-<line id>`, both of this deployment, so a resume can name nothing else. */
export function liveLogEventId(line: LiveLogLine): string {
  return `${line.revision_number}-${line.id}`;
}

function parseEventId(text: string): { revision: number; line: string } {
  const m = /^(\d{1,9})-(\d{1,15})$/.exec(text.trim());
  if (!m) {
    throw new BadRequestError(
      'Last-Event-ID is not an event id of this log stream (<revision number>-<line id>, as its events carry).',
    );
  }
  return { revision: Number(m[1]), line: String(Number(m[2])) };
}

/**
 * The lines as they come; ends when the deployment is deleted or `signal` aborts. The deployment is looked up before
 * the first line, so a missing one (or another workspace's) is a NotFound the caller answers with a 404; then a
 * malformed Last-Event-ID is a BadRequest.
 */
export async function liveLogs(
  deps: DeploymentDeps,
  tenant: string,
  id: string,
  opts: LiveLogOptions,
): Promise<AsyncGenerator<LiveLogLine>> {
  const dep = await requireDeployment(deps, tenant, id);
  const after = opts.after === undefined ? undefined : parseEventId(opts.after);
  return follow(deps, tenant, id, dep.metadata.name!, { ...opts, after });
}

type RevisionRef = { name: string; uid: string; number: number };

async function* follow(
  deps: DeploymentDeps,
  tenant: string,
  id: string,
  depName: string,
  opts: Omit<LiveLogOptions, 'after'> & { after?: { revision: number; line: string } },
): AsyncGenerator<LiveLogLine> {
  // Set by an append of this deployment's deploy log; cleared before each read, so one during a read is not lost.
  let appended = false;
  let wake: (() => void) | undefined;
  const prefix = `${depName}-r`;
  const off = deps.store.onLogsAppended((e) => {
    if (e.namespace !== deps.ns || e.type !== 'deploy' || !e.revision.startsWith(prefix)) return;
    appended = true;
    wake?.();
  });
  try {
    let revision: RevisionRef | undefined;
    let cursor: string | undefined;
    if (opts.after) {
      // A resume: the rest of the revision the client read last, from after its last line.
      revision = await revisionOf(deps, revisionName(depName, opts.after.revision));
      if (revision) cursor = opts.after.line;
    }
    while (!opts.signal.aborted) {
      appended = false;
      let serving: RevisionRef | undefined;
      try {
        serving = await servingRevision(deps, tenant, id);
      } catch (err) {
        if (err instanceof NotFoundError) return; // deleted: the tail ends
        throw err;
      }
      let page: LogEntry[] = [];
      if (revision) {
        page = (await read(deps, revision.name, { order: 'asc', limit: PAGE, offset: cursor })).logs;
      }
      // The revision read so far has nothing more: on to the one that serves now (what it logged before the traffic
      // moved, from its start; the first one read only from its last `tail` lines).
      if (!page.length && serving && serving.name !== revision?.name) {
        const first = !revision;
        revision = serving;
        cursor = undefined;
        const got = await read(
          deps,
          serving.name,
          first ? { order: 'desc', limit: opts.tail } : { order: 'asc', limit: PAGE },
        );
        page = first ? got.logs.reverse() : got.logs;
      }
      if (page.length) cursor = page.at(-1)!.id;
      for (const l of page) {
        yield { ...l, message: redactUrlsIn(l.message), revision_id: revision!.uid, revision_number: revision!.number };
      }
      // A full page: more is waiting, read on at once.
      if (page.length < PAGE) await nap(opts.pollMs ?? SLOW_POLL_MS);
    }
  } finally {
    off();
  }

  /** Until this deployment's log gets lines here, `ms` pass, or the stream is closed. */
  function nap(ms: number): Promise<void> {
    if (appended || opts.signal.aborted) return Promise.resolve();
    return new Promise((resolve) => {
      const done = () => {
        clearTimeout(timer);
        wake = undefined;
        opts.signal.removeEventListener('abort', done);
        resolve();
      };
      const timer = setTimeout(done, ms);
      wake = done;
      opts.signal.addEventListener('abort', done, { once: true });
    });
  }
}

function read(
  deps: DeploymentDeps,
  revision: string,
  q: { order: 'asc' | 'desc'; limit: number; offset?: string | undefined },
) {
  return deps.store.readLogs(deps.ns, revision, {
    type: 'deploy',
    limit: q.limit,
    order: q.order,
    ...(q.offset ? { offset: q.offset } : {}),
  });
}

async function revisionOf(deps: DeploymentDeps, name: string): Promise<RevisionRef | undefined> {
  try {
    const rev = await deps.store.get('AgentRevision', deps.ns, name);
    return { name, uid: rev.metadata.uid!, number: rev.spec.revisionNumber };
  } catch (err) {
    if (err instanceof NotFoundError) return undefined;
    throw err;
  }
}

/** The revision traffic goes to (none before the first one serves). */
async function servingRevision(deps: DeploymentDeps, tenant: string, id: string) {
  const dep = await requireDeployment(deps, tenant, id);
  const name = dep.status?.activeRevisionName;
  return name ? revisionOf(deps, name) : undefined;
}

// Follows one revision to the end: a progress line per status change and its build log as it is written, by
// polling (the API has no push channel). Short outages of the control plane (a restart) are waited out.
import { setTimeout as sleep } from 'node:timers/promises';
import {
  ConnectionError,
  type ControlPlaneClient,
  type Deployment,
  type LogEntry,
  type LogType,
  type Revision,
} from '../api/client.ts';
import { RevisionPhase, TERMINAL_REVISION_PHASES } from '../resources/index.ts';
import { formatLogLine } from './log-lines.ts';
import { printable } from './output.ts';

export const isTerminal = (status: RevisionPhase) => TERMINAL_REVISION_PHASES.has(status);
export const isFailure = (status: RevisionPhase) => isTerminal(status) && status !== RevisionPhase.DEPLOYED;

export type FollowOptions = {
  timeoutMs: number;
  pollMs?: number;
  /** Where progress and log lines go (stderr, so that stdout keeps only the result). */
  write: (line: string) => void;
  /** Stream the build log (on by default). */
  logs?: boolean;
};

export type FollowResult = { revision: Revision; timedOut: boolean };

export async function followRevision(
  client: ControlPlaneClient,
  dep: Deployment,
  revisionId: string,
  opts: FollowOptions,
): Promise<FollowResult> {
  const pollMs = opts.pollMs ?? 500;
  const until = Date.now() + opts.timeoutMs;
  const build = logCursor(client, dep.id, revisionId, 'build');
  let last: Revision | undefined;
  let outageSince: number | undefined;
  // The newest log line is held back one poll: a failed step's last line ("build failed: <why>") carries the
  // revision's status message, which the caller says once at the end, so it is not printed twice.
  let held: LogEntry | undefined;
  const started = Date.now();
  for (;;) {
    try {
      const rev = await client.getRevision(dep.id, revisionId);
      // The log is read after the status, so a finished revision's last lines are already in it; they are printed
      // before the final status and after any other status change.
      const lines = [...(held ? [held] : []), ...(opts.logs === false ? [] : await build.next())];
      const terminal = isTerminal(rev.status);
      held = terminal ? undefined : lines.pop();
      const changed = rev.status !== last?.status;
      const secs = Math.round((Date.now() - started) / 1000);
      // A failure's message is the caller's to say (once, with what to do about it).
      const message = rev.status_message && !isFailure(rev.status) ? ` (${printable(rev.status_message)})` : '';
      const statusLine = `${dep.name} revision ${rev.revision_number}: ${rev.status}${message} [${secs}s]`;
      if (changed && !terminal) opts.write(statusLine);
      for (const l of lines) {
        if (isFailure(rev.status) && rev.status_message && l.message.includes(rev.status_message)) continue;
        opts.write(`  | ${formatLogLine(l.message)}`);
      }
      if (changed && terminal) opts.write(statusLine);
      last = rev;
      outageSince = undefined;
      if (isTerminal(rev.status)) return { revision: rev, timedOut: false };
    } catch (err) {
      // A control plane restart is waited out for a minute; API errors (404: deleted meanwhile) end the wait.
      outageSince ??= Date.now();
      if (!(err instanceof ConnectionError) || Date.now() - outageSince > 60_000) throw err;
    }
    if (Date.now() > until) return { revision: last ?? (await client.getRevision(dep.id, revisionId)), timedOut: true };
    await sleep(pollMs);
  }
}

/** Reads a revision's log from where the previous call stopped (the entry ids are the API's cursor). */
export function logCursor(client: ControlPlaneClient, deploymentId: string, revisionId: string, type: LogType) {
  let after: string | undefined;
  return {
    async next(): Promise<LogEntry[]> {
      const out: LogEntry[] = [];
      for (;;) {
        const page = await client.logs(deploymentId, revisionId, { type, limit: 1000, order: 'asc', offset: after });
        out.push(...page.logs);
        if (page.logs.length) after = page.logs[page.logs.length - 1]!.id;
        if (!page.next_offset) return out;
      }
    },
  };
}

/** The last `n` lines of a revision's log. */
export async function tailLog(
  client: ControlPlaneClient,
  deploymentId: string,
  revisionId: string,
  type: LogType,
  n: number,
): Promise<LogEntry[]> {
  const page = await client.logs(deploymentId, revisionId, { type, limit: n, order: 'desc' });
  return page.logs.reverse();
}

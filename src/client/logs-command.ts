// `agentplane logs <deployment> [--follow]`: what the serving agent logs, read as people read logs. Without --follow
// the last lines of the serving revision's deploy log; with it, the control plane's live stream of them (SSE),
// following the traffic to each new revision, until Ctrl-C or the deployment's delete.
import { UsageError } from '../lib/cli-args.ts';
import {
  CliError,
  clientFrom,
  connectionOptions,
  parseClientArgs,
  pickString,
  runReporting,
  type ClientCommandSpec,
} from './args.ts';
import { formatHelp } from '../lib/cli-args.ts';
import type { LiveLogLine } from '../api/client.ts';
import { formatLogLine } from './log-lines.ts';
import { jsonText, printable } from './output.ts';
import { findDeployment } from './resolve.ts';

export const logsCommand: ClientCommandSpec = {
  name: 'logs',
  summary: "Print the serving agent's log lines; --follow keeps printing them as they are logged",
  usage: 'agentplane logs <deployment> [--follow] [--tail 100] [--raw|--json]\n  <deployment>: name or id',
  options: {
    follow: { type: 'boolean', short: 'f', description: 'Keep printing new lines (and those of the next revisions)' },
    tail: { type: 'string', description: 'How many of the last lines come first (0-1000)', default: '100' },
    raw: { type: 'boolean', description: 'Print the lines as stored (agent servers log JSON lines)' },
    ...connectionOptions,
  },
};

export async function run(argv: string[]): Promise<void> {
  const { flags, positionals } = parseClientArgs(logsCommand, argv);
  if (flags.help) {
    process.stdout.write(formatHelp(logsCommand));
    return;
  }
  if (positionals.length !== 1) throw new UsageError('logs needs a deployment name or id');
  const rawTail = pickString(logsCommand, flags, 'tail') ?? '100';
  const tail = Number(rawTail);
  if (!/^\d+$/.test(rawTail) || tail > 1000) throw new UsageError(`--tail must be 0-1000, got "${rawTail}"`);
  const client = clientFrom(logsCommand, flags);
  const json = flags.json === true;
  const raw = flags.raw === true;
  const text = (l: LiveLogLine) => (json ? jsonText(l) : raw ? printable(l.message) : formatLogLine(l.message));
  await runReporting('logs', async () => {
    const dep = await findDeployment(client, positionals[0]!);
    if (!dep.active_revision_id && flags.follow !== true) {
      throw new CliError(`deployment ${dep.name} serves no revision yet (agentplane deployments get ${dep.name})`);
    }
    if (flags.follow !== true) {
      const rev = await client.getRevision(dep.id, dep.active_revision_id!);
      const page = tail ? await client.logs(dep.id, rev.id, { type: 'deploy', limit: tail, order: 'desc' }) : undefined;
      const lines = (page?.logs ?? []).reverse();
      if (json)
        return void process.stdout.write(
          `${jsonText(
            lines.map((l) => ({ ...l, revision_id: rev.id, revision_number: rev.revision_number })),
            2,
          )}\n`,
        );
      for (const l of lines)
        process.stdout.write(`${text({ ...l, revision_id: rev.id, revision_number: rev.revision_number })}\n`);
      return;
    }
    const stop = new AbortController();
    process.once('SIGINT', () => stop.abort());
    process.once('SIGTERM', () => stop.abort());
    let revision: number | undefined;
    const onResume = (attempt: number, why: string) =>
      process.stderr.write(
        `--- the log stream broke off (${why}); resuming after the last line (try ${attempt}) ---\n`,
      );
    for await (const line of client.liveLogs(dep.id, { tail, signal: stop.signal, onResume })) {
      // Which revision the lines come from, said when it changes (on stderr: stdout keeps the lines only).
      if (line.revision_number !== revision && !json) {
        process.stderr.write(`--- ${dep.name} revision ${line.revision_number} ---\n`);
      }
      revision = line.revision_number;
      process.stdout.write(`${text(line)}\n`);
    }
    if (!stop.signal.aborted) process.stderr.write(`--- the log stream ended (deployment ${dep.name} deleted?) ---\n`);
  });
}

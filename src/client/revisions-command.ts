// `agentplane revisions list|logs|redeploy`: a deployment's revisions, their logs, and going back to one.
import { setTimeout as sleep } from 'node:timers/promises';
import { UsageError } from '../lib/cli-args.ts';
import type { RevisionPhase } from '../resources/index.ts';
import {
  CliError,
  clientFrom,
  connectionOptions,
  parseSubcommand,
  pickString,
  positiveInt,
  runReporting,
  type ClientCommandSpec,
} from './args.ts';
import { isFailure, isTerminal, logCursor } from './follow.ts';
import type { ControlPlaneClient, Deployment, LogEntry, LogType, Revision } from '../api/client.ts';
import { formatLogLine } from './log-lines.ts';
import { jsonText, printable, printJson, shortSha, table, when } from './output.ts';
import { allRevisions, findDeployment, findRevision } from './resolve.ts';

export const revisionsCommand: ClientCommandSpec = {
  name: 'revisions',
  summary: "List a deployment's revisions, print their logs, or send traffic back to one (redeploy)",
  usage:
    'agentplane revisions list <deployment> [--limit 20] [--json]\n' +
    '       agentplane revisions logs <deployment> [<revision>] [--type build|deploy] [--follow] [--raw|--json]\n' +
    '       agentplane revisions redeploy <deployment> <revision> [--wait] [--json]\n' +
    '  <deployment>: name or id; <revision>: number, id, "latest" (default for logs) or "active"',
  options: {
    limit: { type: 'string', description: 'list: at most this many (newest first)', default: '20' },
    type: {
      type: 'string',
      description: 'logs: build (clone, install, build) or deploy (start of the agent server)',
      default: 'build',
    },
    follow: { type: 'boolean', description: 'logs: keep printing until the revision is DEPLOYED or failed' },
    raw: { type: 'boolean', description: 'logs: print the lines as stored (agent servers log JSON lines)' },
    wait: { type: 'boolean', description: 'redeploy: return once the revision serves the traffic' },
    timeout: { type: 'string', description: 'seconds --follow / --wait wait before giving up', default: '1800' },
    ...connectionOptions,
  },
};

const SUBCOMMANDS = ['list', 'logs', 'redeploy'] as const;

export async function run(argv: string[]): Promise<void> {
  const parsed = parseSubcommand(revisionsCommand, SUBCOMMANDS, argv);
  if (!parsed) return;
  const { sub, flags, positionals } = parsed;
  const [min, max] = sub === 'list' ? [1, 1] : sub === 'logs' ? [1, 2] : [2, 2];
  if (positionals.length < min || positionals.length > max) {
    throw new UsageError(
      sub === 'redeploy'
        ? 'redeploy needs a deployment and a revision'
        : `${sub} needs a deployment name or id${max > 1 ? ' and optionally a revision' : ''}`,
    );
  }
  const type = pickString(revisionsCommand, flags, 'type');
  if (type !== 'build' && type !== 'deploy') throw new UsageError(`--type must be build or deploy, got "${type}"`);
  const json = flags.json === true;
  const limit = positiveInt('--limit', pickString(revisionsCommand, flags, 'limit'), 20);
  const timeoutMs = positiveInt('--timeout', pickString(revisionsCommand, flags, 'timeout'), 1800) * 1000;
  const client = clientFrom(revisionsCommand, flags);
  await runReporting(`revisions ${sub}`, async () => {
    const dep = await findDeployment(client, positionals[0]!);
    if (sub === 'list') return list(client, dep, limit, json);
    const rev = await findRevision(client, dep, positionals[1]);
    if (sub === 'logs')
      return logs(client, dep, rev, { type, follow: flags.follow === true, json, raw: flags.raw === true, timeoutMs });
    return redeploy(client, dep, rev, { wait: flags.wait === true, json, timeoutMs });
  });
}

async function list(client: ControlPlaneClient, dep: Deployment, limit: number, json: boolean): Promise<void> {
  const revs = await allRevisions(client, dep.id, limit);
  if (json) return printJson(revs);
  if (!revs.length) {
    process.stdout.write(`deployment ${dep.name} has no revisions\n`);
    return;
  }
  const rows = revs.map((r) => [
    `${r.revision_number}${r.id === dep.active_revision_id ? '*' : ''}`,
    r.id,
    r.status,
    r.source_revision_config.repo_ref ?? '',
    shortSha(r.repo_commit_sha),
    when(r.created_at),
    r.status_message ?? '',
  ]);
  process.stdout.write(table(['REVISION', 'ID', 'STATUS', 'REF', 'COMMIT', 'CREATED', 'MESSAGE'], rows));
  if (dep.active_revision_id) process.stdout.write('* serves the traffic\n');
}

async function logs(
  client: ControlPlaneClient,
  dep: Deployment,
  rev: Revision,
  o: { type: LogType; follow: boolean; json: boolean; raw: boolean; timeoutMs: number },
): Promise<number> {
  const cursor = logCursor(client, dep.id, rev.id, o.type);
  // --raw: the message as it was logged, but never a character the terminal would act on.
  const text = (l: LogEntry) => (o.json ? jsonText(l) : o.raw ? printable(l.message) : formatLogLine(l.message));
  if (!o.follow) {
    const lines = await cursor.next();
    if (o.json) printJson(lines);
    else for (const l of lines) process.stdout.write(`${text(l)}\n`);
    return 0;
  }
  // Follow: log lines on stdout as they come, status changes on stderr; the exit code tells how it ended.
  const until = Date.now() + o.timeoutMs;
  let status: RevisionPhase | undefined;
  for (;;) {
    const current = await client.getRevision(dep.id, rev.id);
    for (const l of await cursor.next()) process.stdout.write(`${text(l)}\n`);
    if (current.status !== status)
      process.stderr.write(`${dep.name} revision ${current.revision_number}: ${current.status}\n`);
    status = current.status;
    if (isTerminal(status)) return isFailure(status) ? 1 : 0;
    if (Date.now() > until)
      throw new CliError(`gave up after ${o.timeoutMs / 1000}s: revision ${current.revision_number} is ${status}`);
    await sleep(500);
  }
}

async function redeploy(
  client: ControlPlaneClient,
  dep: Deployment,
  rev: Revision,
  o: { wait: boolean; json: boolean; timeoutMs: number },
): Promise<number> {
  // What the deploy log held before this redeploy was printed by the deploy that wrote it: only new lines are shown.
  const deployLog = logCursor(client, dep.id, rev.id, 'deploy');
  if (o.wait) await deployLog.next();
  let updated = await client.redeploy(dep.id, rev.id);
  if (o.wait) {
    const until = Date.now() + o.timeoutMs;
    const started = Date.now();
    let said = '';
    process.stderr.write(`${dep.name}: sending the traffic to revision ${rev.revision_number}\n`);
    // Progress as deploy --wait gives it: a line per status change, the agent server's start as it is logged.
    for (;;) {
      const r = await client.getRevision(dep.id, rev.id);
      const secs = Math.round((Date.now() - started) / 1000);
      const now = `${dep.name} revision ${r.revision_number}: ${r.status}`;
      if (now !== said) process.stderr.write(`${now} [${secs}s]\n`);
      said = now;
      for (const l of await deployLog.next()) process.stderr.write(`  | ${formatLogLine(l.message)}\n`);
      if (updated.active_revision_id === rev.id) break;
      if (isFailure(r.status)) {
        process.stderr.write(
          `revision ${r.revision_number} ended ${r.status}${r.status_message ? `: ${printable(r.status_message)}` : ''}\n`,
        );
        if (o.json) printJson({ deployment: updated, revision: r });
        return 1;
      }
      if (Date.now() > until)
        throw new CliError(`gave up after ${o.timeoutMs / 1000}s: revision ${rev.revision_number} does not serve yet`);
      await sleep(500);
      updated = await client.getDeployment(dep.id);
    }
  }
  if (o.json) printJson({ deployment: updated, revision: await client.getRevision(dep.id, rev.id) });
  else
    process.stdout.write(
      `deployment ${dep.name} ${o.wait ? 'serves' : 'is switching to'} revision ${rev.revision_number} (${rev.id})\n`,
    );
  return 0;
}

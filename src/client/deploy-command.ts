// `agentplane deploy`: create a deployment, or give an existing one (same name) a new revision, from flags or
// agentplane.yaml; with --wait, follow that revision to DEPLOYED (exit 0) or a failure (exit 1, log lines shown).
import { existsSync } from 'node:fs';
import path from 'node:path';
import { createInterface } from 'node:readline/promises';
import { formatHelp, UsageError } from '../lib/cli-args.ts';
import { RevisionPhase } from '../resources/index.ts';
import {
  CliError,
  clientFrom,
  connectionOptions,
  parseClientArgs,
  pickList,
  positiveInt,
  runReporting,
  type ClientCommandSpec,
  type Flags,
} from './args.ts';
import { readDeployFile, type DeployFile } from './deploy-file.ts';
import { followRevision, isFailure, tailLog } from './follow.ts';
import type { ControlPlaneClient, Deployment, DeploymentInput, Revision } from '../api/client.ts';
import { formatLogLine } from './log-lines.ts';
import { printable, printJson } from './output.ts';
import { findByName } from './resolve.ts';

export const deployCommand: ClientCommandSpec = {
  name: 'deploy',
  summary: 'Create a deployment or roll out a new revision of it (matched by name) from flags or agentplane.yaml',
  usage:
    'agentplane deploy --name NAME --repo-url URL|DIR --ref REF [--config-path langgraph.json] [--secret NAME=VALUE]... [--wait]\n' +
    '       agentplane deploy [--file agentplane.yaml] [--wait]     (flags override the file)',
  options: {
    name: {
      type: 'string',
      description: 'Deployment name (unique in the tenant): updated when it exists, else created',
    },
    'repo-url': {
      type: 'string',
      description: 'Git URL, or a folder on the control plane machine (a local folder is made absolute)',
    },
    ref: {
      type: 'string',
      description: 'Branch, tag or commit to build (required to create; on update defaults to the current one)',
    },
    'config-path': {
      type: 'string',
      description: 'Path of langgraph.json in the repository (default on create: langgraph.json)',
    },
    secret: {
      type: 'string',
      multiple: true,
      description: 'NAME=VALUE environment of the agent (repeatable; given secrets replace the old set)',
    },
    'secret-from-env': {
      type: 'string',
      multiple: true,
      description: 'NAME: a secret whose value is this environment variable (repeatable)',
    },
    'install-command': {
      type: 'string',
      description: 'Install command (default: npm ci when there is a package.json)',
    },
    'build-command': { type: 'string', description: 'Build command run after the install' },
    public: {
      type: 'boolean',
      description: 'Anyone may call the agent; without it callers need an API key of the tenant (also on update)',
    },
    'trust-file': {
      type: 'boolean',
      description:
        'Take "public" and "secrets_from_env" from the settings file without asking (else asked at a terminal, ' +
        'refused elsewhere): a file in a repository must not publish a deployment or send your environment',
    },
    file: {
      type: 'string',
      description: `Settings file (name, repo_url, ref, config_path, install_command, build_command, public, secrets_from_env)`,
      default: './agentplane.yaml when present',
    },
    wait: {
      type: 'boolean',
      description: 'Follow the new revision: a line per status change and its build log; exit 1 unless DEPLOYED',
    },
    timeout: { type: 'string', description: 'With --wait: seconds to wait before giving up (exit 1)', default: '1800' },
    ...connectionOptions,
  },
};

export async function run(argv: string[]): Promise<void> {
  const { flags, positionals } = parseClientArgs(deployCommand, argv);
  if (flags.help) {
    process.stdout.write(formatHelp(deployCommand));
    return;
  }
  if (positionals.length) throw new UsageError(`unexpected argument "${positionals[0]}"`);
  const settings = settingsFrom(flags, process.env, process.cwd());
  if (settings.fileAsks.length && flags['trust-file'] !== true)
    await confirmFileAsks(settings.file!, settings.fileAsks);
  const timeoutMs =
    positiveInt('--timeout', typeof flags.timeout === 'string' ? flags.timeout : undefined, 1800) * 1000;
  const client = clientFrom(deployCommand, flags);
  await runReporting('deploy', () =>
    deploy(client, settings, { wait: flags.wait === true, json: flags.json === true, timeoutMs }),
  );
}

export type DeploySettings = {
  name: string;
  repoUrl?: string;
  ref?: string;
  configPath?: string;
  installCommand?: string;
  buildCommand?: string;
  public: boolean;
  secrets: { name: string; value: string }[];
  /** The settings file read, if any. */
  file?: string;
  /**
   * What the file alone asks for that widens access (public, secrets from the environment), to be confirmed:
   * what a flag asks for too is not listed.
   */
  fileAsks: string[];
};

/** Flags over the file; secret values read from the environment here, once. */
export function settingsFrom(flags: Flags, env: NodeJS.ProcessEnv, cwd: string): DeploySettings {
  const fileArg = typeof flags.file === 'string' ? flags.file : undefined;
  const read = readDeployFile(fileArg, cwd);
  const file: { settings: DeployFile; dir: string } = read ?? { settings: {}, dir: cwd };
  const f = file.settings;
  const str = (name: string) => (typeof flags[name] === 'string' ? (flags[name] as string) : undefined);
  const name = str('name') ?? f.name;
  if (!name) throw new UsageError('--name is required (or "name" in agentplane.yaml)');
  const repoFlag = str('repo-url');
  const secrets = new Map<string, string>();
  const fromEnv = (n: string, where: string) => {
    const v = env[n];
    if (v === undefined) throw new UsageError(`${where} ${n}: the environment variable is not set`);
    secrets.set(n, v);
  };
  for (const n of f.secrets_from_env ?? []) fromEnv(n, 'secrets_from_env');
  for (const n of pickList(flags, 'secret-from-env')) fromEnv(n, '--secret-from-env');
  for (const s of pickList(flags, 'secret')) {
    const eq = s.indexOf('=');
    if (eq <= 0) throw new UsageError(`--secret must be NAME=VALUE, got "${s.split('=')[0]}..."`);
    secrets.set(s.slice(0, eq), s.slice(eq + 1));
  }
  return {
    name,
    repoUrl:
      repoFlag !== undefined
        ? localPathOrUrl(repoFlag, cwd)
        : f.repo_url !== undefined
          ? localPathOrUrl(f.repo_url, file.dir)
          : undefined,
    ref: str('ref') ?? f.ref,
    configPath: str('config-path') ?? f.config_path,
    installCommand: str('install-command') ?? f.install_command,
    buildCommand: str('build-command') ?? f.build_command,
    public: flags.public === true || f.public === true,
    secrets: [...secrets].map(([n, value]) => ({ name: n, value })),
    ...(read ? { file: read.path } : {}),
    fileAsks: fileAsks(f, flags),
  };
}

/** The settings of `f` that widen access and that no flag asks for as well. */
function fileAsks(f: DeployFile, flags: Flags): string[] {
  const asks: string[] = [];
  if (f.public === true && flags.public !== true) asks.push('make the deployment public: anyone may call it (public)');
  const flagged = new Set(pickList(flags, 'secret-from-env'));
  const names = (f.secrets_from_env ?? []).filter((n) => !flagged.has(n));
  if (names.length)
    asks.push(
      `send these variables of your environment to the agent as secrets: ${names.join(', ')} (secrets_from_env)`,
    );
  return asks;
}

/**
 * A settings file found in a folder is whoever wrote the repository's: what it asks for that widens access is done
 * only once the person deploying agrees (at a terminal), or with --trust-file; a job without a terminal (CI) is
 * refused, naming what was asked, before anything is sent.
 */
async function confirmFileAsks(file: string, asks: string[]): Promise<void> {
  const list = asks.map((a) => `  - ${a}`).join('\n');
  if (!process.stdin.isTTY || !process.stderr.isTTY) {
    throw new UsageError(
      `${file} asks to:\n${list}\nSettings that widen access are not taken from a file alone: run at a terminal ` +
        'to confirm them, pass --trust-file, or give them as flags (--public, --secret-from-env NAME)',
    );
  }
  const rl = createInterface({ input: process.stdin, output: process.stderr });
  try {
    const answer = await rl.question(`${file} asks to:\n${list}\nGo ahead? [y/N] `);
    if (!/^y(es)?$/i.test(answer.trim())) throw new CliError('nothing deployed: the settings file was not confirmed');
  } finally {
    rl.close();
  }
}

/** A folder that exists here is sent as an absolute path (the control plane does not share our working directory). */
function localPathOrUrl(value: string, base: string): string {
  if (/^[A-Za-z][A-Za-z0-9+.-]*:\/\//.test(value) || /^[^/]+@[^/:]+:/.test(value)) return value;
  const abs = path.resolve(base, value);
  return existsSync(abs) ? abs : value;
}

type DeployOptions = { wait: boolean; json: boolean; timeoutMs: number; pollMs?: number };

export async function deploy(client: ControlPlaneClient, s: DeploySettings, opts: DeployOptions): Promise<number> {
  const say = (line: string) => process.stderr.write(`${line}\n`);
  const existing = await findByName(client, s.name);
  let dep: Deployment;
  let revisionId: string;
  if (!existing) {
    if (!s.repoUrl) throw new UsageError(`--repo-url is required to create deployment "${s.name}"`);
    if (!s.ref) throw new UsageError(`--ref is required to create deployment "${s.name}"`);
    dep = await client.createDeployment({
      name: s.name,
      source: 'github',
      source_config: { repo_url: s.repoUrl, ...commands(s), access_mode: s.public ? 'public' : 'api_key' },
      source_revision_config: { repo_ref: s.ref, graph_config_path: s.configPath ?? 'langgraph.json' },
      secrets: s.secrets,
    });
    revisionId = dep.latest_revision_id!;
    say(`created deployment ${dep.name} (${dep.id})`);
  } else {
    const body: DeploymentInput = {
      source_config: {
        ...(s.repoUrl ? { repo_url: s.repoUrl } : {}),
        ...commands(s),
        access_mode: s.public ? 'public' : 'api_key',
      },
      // Always carrying the ref makes the PATCH start a revision, even when nothing else changed ("deploy again").
      source_revision_config: {
        repo_ref: s.ref ?? existing.source_revision_config.repo_ref ?? undefined,
        ...(s.configPath ? { graph_config_path: s.configPath } : {}),
      },
      ...(s.secrets.length ? { secrets: s.secrets } : {}),
    };
    dep = await client.patchDeployment(existing.id, body);
    revisionId = dep.latest_revision_id!;
    if (!revisionId || revisionId === existing.latest_revision_id)
      revisionId = (await client.createRevision(dep.id)).id;
    say(`updated deployment ${dep.name} (${dep.id})`);
  }

  if (!opts.wait) {
    const revision = await client.getRevision(dep.id, revisionId);
    say(
      `revision ${revision.revision_number} is ${revision.status}; follow it with: agentplane revisions logs ${dep.name} ${revision.revision_number} --follow`,
    );
    if (opts.json) printJson({ deployment: dep, revision });
    else process.stdout.write(`${dep.name} revision ${revision.revision_number} ${revision.status}\n`);
    return 0;
  }

  const { revision, timedOut } = await followRevision(client, dep, revisionId, {
    timeoutMs: opts.timeoutMs,
    pollMs: opts.pollMs,
    write: say,
  });
  dep = await client.getDeployment(dep.id);
  if (opts.json) printJson({ deployment: dep, revision });
  if (timedOut) {
    throw new CliError(
      `gave up after ${Math.round(opts.timeoutMs / 1000)}s: revision ${revision.revision_number} is ${revision.status}`,
    );
  }
  if (isFailure(revision.status)) {
    // The build log was streamed above: only the deploy log's last lines are new.
    await explainFailure(client, dep, revision, say, { buildLogShown: true });
    return 1;
  }
  if (!opts.json)
    process.stdout.write(`${dep.name} revision ${revision.revision_number} DEPLOYED: ${dep.url ?? '(no URL yet)'}\n`);
  return 0;
}

const commands = (s: DeploySettings) => ({
  ...(s.installCommand !== undefined ? { install_command: s.installCommand } : {}),
  ...(s.buildCommand !== undefined ? { build_command: s.buildCommand } : {}),
});

/** The status message and the last lines of the log of the step that failed, unless that log was shown already. */
async function explainFailure(
  client: ControlPlaneClient,
  dep: Deployment,
  rev: Revision,
  say: (l: string) => void,
  o: { buildLogShown: boolean },
): Promise<void> {
  say(
    `deployment ${dep.name} revision ${rev.revision_number} ended ${rev.status}${rev.status_message ? `: ${printable(rev.status_message)}` : ''}`,
  );
  if (rev.status === RevisionPhase.SKIPPED) {
    say('a newer revision replaced it before it was deployed');
    return;
  }
  const type = rev.status === RevisionPhase.DEPLOY_FAILED ? 'deploy' : 'build';
  if (type === 'build' && o.buildLogShown) return;
  // The line that repeats the status message just said is left out.
  const msg = rev.status_message;
  const lines = (await tailLog(client, dep.id, rev.id, type, 30)).filter((l) => !msg || !l.message.includes(msg));
  if (!lines.length) return;
  say(`--- last lines of the ${type} log ---`);
  for (const l of lines) say(formatLogLine(l.message));
}

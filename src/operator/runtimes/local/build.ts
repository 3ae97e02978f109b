// One revision's build, in a directory of its own: clone at the ref, install, build. A marker file written last
// says the build is complete, so a restart can tell a finished build from an interrupted one.
import { existsSync } from 'node:fs';
import { mkdir, readFile, rm, writeFile } from 'node:fs/promises';
import { dirname, join, relative, resolve, sep } from 'node:path';
import type { BuildSpec } from '../types.ts';
import { killRecordedStep, runStep as runStepIn, StepError, type Step } from './exec.ts';
import type { LogWriter } from './logs.ts';

const MARKER = 'build.json';

export type BuildResult = { commitSha: string };

/** Candidate git refs for a user-given repo_ref, most specific first (branches are remote-tracking after clone). */
export function refCandidates(ref: string): string[] {
  if (ref.startsWith('refs/heads/')) return [`refs/remotes/origin/${ref.slice('refs/heads/'.length)}`];
  if (ref.startsWith('refs/')) return [ref];
  return [`refs/remotes/origin/${ref}`, `refs/tags/${ref}`, ref];
}

export async function readBuildMarker(dir: string): Promise<BuildResult | undefined> {
  try {
    const parsed = JSON.parse(await readFile(join(dir, MARKER), 'utf8')) as BuildResult;
    return typeof parsed.commitSha === 'string' ? parsed : undefined;
  } catch {
    return undefined;
  }
}

/** The directory the agent server and the install run in: the graph config's folder when it is a package. */
export function projectDir(checkout: string, graphConfigPath: string): string {
  const configDir = dirname(join(checkout, graphConfigPath));
  return existsSync(join(configDir, 'package.json')) ? configDir : checkout;
}

export function checkoutDir(dir: string): string {
  return join(dir, 'src');
}

export async function runBuild(spec: BuildSpec, dir: string, log: LogWriter, signal: AbortSignal): Promise<BuildResult> {
  // The pid file lives beside the revision directory so that clearing the directory does not lose it.
  const pidFile = `${dir}.step-pid`;
  await killRecordedStep(pidFile);
  await rm(dir, { recursive: true, force: true });
  await mkdir(dir, { recursive: true });
  const runStep = (step: Step, l: LogWriter, s: AbortSignal) => runStepIn({ ...step, pidFile }, l, s);
  const src = checkoutDir(dir);
  const gitEnv = { ...process.env, GIT_TERMINAL_PROMPT: '0' };
  const git = (label: string, args: string[], cwd = src) =>
    runStep({ label, command: 'git', args, cwd, env: gitEnv }, log, signal);

  await git(`git clone ${spec.repoUrl}`, ['clone', '--quiet', '--no-checkout', '--', spec.repoUrl, src], dir);
  let commitSha: string | undefined;
  for (const candidate of refCandidates(spec.repoRef)) {
    try {
      commitSha = (await git(`git rev-parse ${candidate}`, ['rev-parse', '--verify', '--quiet', `${candidate}^{commit}`])).trim();
      break;
    } catch {
      // try the next interpretation of the ref
    }
  }
  if (!commitSha) throw new StepError(`repo_ref "${spec.repoRef}" is not a branch, tag or commit of ${spec.repoUrl}`);
  log.line(`resolved ${spec.repoRef} to ${commitSha}`);
  await git(`git checkout ${commitSha.slice(0, 12)}`, ['checkout', '--quiet', '--detach', commitSha]);

  const config = resolve(src, spec.graphConfigPath);
  if (!config.startsWith(src + sep) || !existsSync(config)) {
    const shown = relative(src, config).startsWith('..') ? spec.graphConfigPath : relative(src, config);
    throw new StepError(`graph config "${shown}" not found in ${spec.repoUrl} at ${commitSha.slice(0, 12)}`);
  }
  const cwd = projectDir(src, spec.graphConfigPath);
  const env = { ...process.env, npm_config_update_notifier: 'false' };
  if (spec.installCommand) {
    await runStep({ label: spec.installCommand, command: 'sh', args: ['-c', spec.installCommand], cwd, env }, log, signal);
  } else if (existsSync(join(cwd, 'package.json'))) {
    const ci = existsSync(join(cwd, 'package-lock.json'));
    const args = [ci ? 'ci' : 'install', '--prefer-offline', '--no-audit', '--no-fund'];
    await runStep({ label: `npm ${args.join(' ')}`, command: 'npm', args, cwd, env }, log, signal);
  } else {
    log.line('no package.json: skipping install');
  }
  if (spec.buildCommand) {
    await runStep({ label: spec.buildCommand, command: 'sh', args: ['-c', spec.buildCommand], cwd, env }, log, signal);
  }
  await writeFile(join(dir, MARKER), JSON.stringify({ commitSha }));
  log.line(`build complete (${commitSha.slice(0, 12)})`);
  return { commitSha };
}

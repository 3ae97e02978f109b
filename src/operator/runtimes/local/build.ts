// One revision's build, in a directory of its own: clone at the ref, install, build. A marker file written last
// says the build is complete, so a restart can tell a finished build from an interrupted one.
import { existsSync } from 'node:fs';
import { createHash } from 'node:crypto';
import { mkdir, readFile, rename, rm, writeFile } from 'node:fs/promises';
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

/**
 * Installed node_modules keyed by package.json + lock file: a revision whose dependencies did not change links the
 * packages of an earlier install (hard links, as pnpm's store does) instead of running npm ci again.
 */
export type InstallCache = { dir: string };

function installKey(pkg: Buffer, lock: Buffer): string {
  return createHash('sha256').update(pkg).update('\0').update(lock).update(`\0${process.version}\0${process.platform}\0${process.arch}`).digest('hex').slice(0, 32);
}

async function npmCi(cwd: string, env: NodeJS.ProcessEnv, cache: InstallCache | undefined, step: StepRunner, log: LogWriter, signal: AbortSignal): Promise<void> {
  const args = ['ci', '--prefer-offline', '--no-audit', '--no-fund'];
  // package.json is part of the key: npm ci refuses a lock file that disagrees with it, and so must we.
  const key = cache ? installKey(await readFile(join(cwd, 'package.json')), await readFile(join(cwd, 'package-lock.json'))) : '';
  const cached = cache ? join(cache.dir, key) : '';
  if (cache && existsSync(cached)) {
    await step({ label: `npm ci skipped: node_modules linked from the install cache (same package.json and lock, ${key.slice(0, 12)})`, command: 'cp', args: ['-al', cached, join(cwd, 'node_modules')], cwd }, log, signal);
    return;
  }
  await step({ label: `npm ${args.join(' ')}`, command: 'npm', args, cwd, env }, log, signal);
  if (!cache || !existsSync(join(cwd, 'node_modules'))) return;
  // Publish atomically: a half-copied tree must never be found by another build.
  await mkdir(cache.dir, { recursive: true });
  const tmp = `${cached}.tmp-${process.pid}-${Date.now()}`;
  try {
    await step({ label: 'cp -al node_modules (install cache)', command: 'cp', args: ['-al', join(cwd, 'node_modules'), tmp], cwd }, log, signal);
    await rename(tmp, cached);
  } catch {
    await rm(tmp, { recursive: true, force: true });
  }
}

type StepRunner = (step: Step, log: LogWriter, signal: AbortSignal) => Promise<string>;

export async function runBuild(spec: BuildSpec, dir: string, log: LogWriter, signal: AbortSignal, cache?: InstallCache): Promise<BuildResult> {
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
  } else if (existsSync(join(cwd, 'package-lock.json'))) {
    await npmCi(cwd, env, cache, runStep, log, signal);
  } else if (existsSync(join(cwd, 'package.json'))) {
    const args = ['install', '--prefer-offline', '--no-audit', '--no-fund'];
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

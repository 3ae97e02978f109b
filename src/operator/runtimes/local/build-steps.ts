// One revision's build, in a directory of its own: clone at the ref, install, build. A marker file written last
// says the build is complete, so a restart can tell a finished build from an interrupted one. Every step that runs
// what the workspace controls (git on its URL, npm with its package.json, its commands) runs with an allow-listed
// environment and, when there is one, inside the sandbox.
import { existsSync } from 'node:fs';
import { createHash } from 'node:crypto';
import { chmod, copyFile, lstat, mkdir, readFile, realpath, rename, rm, utimes, writeFile } from 'node:fs/promises';
import { dirname, isAbsolute, join, relative, resolve, sep } from 'node:path';
import { graphLanguageProblem } from '../../../lib/graph-language.ts';
import type { GitCredential } from '../../../git/credentials.ts';
import type { BuildSpec } from '../types.ts';
import { childEnv, envProblem } from './env.ts';
import { killRecordedStep, runStep as runStepIn, StepError, type Step } from './exec.ts';
import { checkGraphs, importGraphs } from './graph-check.ts';
import { ownerFile } from './housekeeping.ts';
import { buildHeader } from './build-source.ts';
import { LogWriter } from './logs.ts';
import { localCloneAuth } from '../../../git/clone-auth.ts';
import { redactUrl } from '../../../git/redact.ts';
import { checkRepoUrl, RepoUrlRefused, type RepoPolicy, type RepoSource } from '../../../git/repo-url.ts';
import { ownFolders, type Mounts, type Sandbox } from './sandbox.ts';
import { shell, tool } from './tools.ts';

const MARKER = 'build.json';

export type BuildResult = {
  commitSha: string;
  /**
   * node_modules (of the project folder) share their files with the install cache as hard links: mounted read-only
   * when sandboxed. The path recorded is informative only; users of the marker recompute it (the folder is writable).
   */
  sharedNodeModules?: string;
};

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
 * Installed node_modules keyed by deployment + package.json + lock file: a revision whose dependencies did not
 * change links the packages of an earlier install (hard links, as pnpm's store does) instead of running npm ci
 * again. Entries are never shared between deployments: install scripts, .npmrc and file: dependencies are not part
 * of the key, so one workspace's install must not become another's node_modules.
 */
export type InstallCache = { dir: string; maxBytes: number; onPublished?: (entry: string) => Promise<void> };

function installKey(deploymentId: string, pkg: Buffer, lock: Buffer): string {
  return createHash('sha256')
    .update(deploymentId)
    .update('\0')
    .update(pkg)
    .update('\0')
    .update(lock)
    .update(`\0${process.version}\0${process.platform}\0${process.arch}`)
    .digest('hex')
    .slice(0, 32);
}

/** Where a build's steps run and what they may touch. */
export type BuildContext = {
  /** The revision's folder (cleared first). */
  dir: string;
  /** The deployment's home folder (HOME, npm cache). */
  home: string;
  log: LogWriter;
  signal: AbortSignal;
  sandbox: Sandbox;
  repoPolicy: RepoPolicy;
  /** The dev process's environment, read through the allow-list only. */
  baseEnv: NodeJS.ProcessEnv;
  cache?: InstallCache;
  maxStepOutputBytes?: number;
  /** The deployment's git credential; handed to git only for its host. */
  credential?: GitCredential;
  /** Where the workspace's stored source tarball with this SHA-256 is (internal_source builds). */
  archiveFile?: (sha256: string) => string | undefined;
  /**
   * The environment (secrets) the revision's server will get: with it the graphs are imported at build time
   * (importGraphs); without it (a build asked for without its revision) only the static check runs.
   */
  serverEnv?: Record<string, string>;
};

export async function runBuild(spec: BuildSpec, ctx: BuildContext): Promise<BuildResult> {
  const { dir, home, log, signal } = ctx;
  // The build's first line says what is built, which is known only once the clone resolved the ref: until then the
  // steps write to a buffer, replayed into the log after that line (or before the failure, if the clone fails).
  const early: string[] = [];
  const buffer = new LogWriter({ append: async (_ref, _type, lines) => void early.push(...lines) }, spec, 'build');
  let out = buffer;
  const replay = async () => {
    if (out === log) return;
    out = log;
    await buffer.flush();
    for (const l of early) log.line(l);
  };
  // The pid file lives beside the revision directory so that clearing the directory does not lose it.
  const pidFile = `${dir}.step-pid`;
  await killRecordedStep(pidFile);
  await rm(dir, { recursive: true, force: true });
  await mkdir(dir, { recursive: true });
  await mkdir(home, { recursive: true });
  const npmCache = join(home, '.npm');
  const env = childEnv({ base: ctx.baseEnv, home, npmCache });
  const src = checkoutDir(dir);
  // Made here (git clones into it, empty): the steps run as the sandbox's user when the platform runs as root, and
  // write only what is that user's.
  await mkdir(src);
  const user = ctx.sandbox.user;
  await ownFolders(user, [src, home]);
  // Steps write only the checkout and the home folder; the revision folder itself holds the build marker, which
  // must not be theirs to edit.
  const confined = (
    step: Omit<Step, 'env' | 'sandbox' | 'mounts' | 'pidFile'> & {
      env?: Record<string, string>;
      mounts?: Omit<Mounts, 'cwd'>;
    },
  ) =>
    runStepIn(
      {
        env,
        mounts: { rw: [src, home] },
        ...step,
        sandbox: ctx.sandbox,
        pidFile,
        maxOutputBytes: ctx.maxStepOutputBytes,
      },
      out,
      signal,
    );
  let fetched: { commitSha: string; shownUrl: string };
  try {
    if (spec.sourceArchive) {
      // No header to wait for: the tarball's hash is known before the step.
      await replay();
      fetched = await extractArchive(spec.sourceArchive.sha256, src, ctx, confined);
    } else {
      fetched = await cloneRepo(spec, ctx, { dir, src, env, pidFile }, confined, replay);
    }
  } finally {
    // A failed fetch still shows what its steps printed.
    await replay();
  }
  const { commitSha, shownUrl } = fetched;

  const config = resolve(src, spec.graphConfigPath);
  if (!config.startsWith(src + sep) || !existsSync(config)) {
    const shown = relative(src, config).startsWith('..') ? spec.graphConfigPath : relative(src, config);
    throw new StepError(`graph config "${shown}" not found in ${shownUrl} at ${commitSha.slice(0, 12)}`);
  }
  const cwd = projectDir(src, spec.graphConfigPath);
  // The runtime itself works in this folder (install cache links): a symlink must not lead it out of the checkout.
  if (!(await insideReal(cwd, src)) || !(await insideReal(config, src))) {
    throw new StepError(`graph config "${spec.graphConfigPath}" leads out of the repository through a symbolic link`);
  }
  const graphConfig = await readFile(config, 'utf8')
    .then((text) => JSON.parse(text) as { dockerfile_lines?: unknown })
    .catch(() => undefined);
  // A Python graph would install and build, then fail to import at deploy: refuse it here, in one line.
  const language = graphLanguageProblem(graphConfig);
  if (language) throw new StepError(language);
  const dockerfileLines = graphConfig?.dockerfile_lines;
  if (Array.isArray(dockerfileLines) && dockerfileLines.length) {
    log.line(
      `dockerfile_lines: ${dockerfileLines.length} line(s) not applied (the local runtime builds no image; ` +
        'what they would install must already be on this machine)',
    );
  }
  let sharedNodeModules: string | undefined;
  if (spec.installCommand) {
    await confined({ label: spec.installCommand, command: shell(), args: ['-c', spec.installCommand], cwd });
  } else if (existsSync(join(cwd, 'package-lock.json'))) {
    sharedNodeModules = await npmCi(spec.deploymentId, cwd, ctx, confined);
  } else if (existsSync(join(cwd, 'package.json'))) {
    const args = ['install', '--prefer-offline', '--no-audit', '--no-fund'];
    await confined({ label: `npm ${args.join(' ')}`, command: tool('npm') ?? 'npm', args, cwd });
  } else {
    log.line('no package.json: skipping install');
  }
  if (spec.buildCommand) {
    await confined({
      label: spec.buildCommand,
      command: shell(),
      args: ['-c', spec.buildCommand],
      cwd,
      mounts: revisionMounts(src, home, sharedNodeModules),
    });
  }
  await checkGraphs(confined, {
    config,
    checkout: src,
    cwd,
    home,
    mounts: revisionMounts(src, home, sharedNodeModules),
  });
  // Secrets a process cannot be given fail the server's start, which says so; the build does not fail for them.
  if (ctx.serverEnv && !envProblem(ctx.serverEnv)) {
    await importGraphs(confined, {
      config,
      cwd,
      home,
      env: childEnv({ base: ctx.baseEnv, home, npmCache, extra: ctx.serverEnv }),
      secrets: ctx.serverEnv,
      mounts: revisionMounts(src, home, sharedNodeModules),
    });
  }
  const result: BuildResult = { commitSha, ...(sharedNodeModules ? { sharedNodeModules } : {}) };
  await writeFile(join(dir, MARKER), JSON.stringify(result));
  log.line(`build complete (${commitSha.slice(0, 12)})`);
  return result;
}

type ConfinedIn = (
  step: Omit<Step, 'env' | 'sandbox' | 'mounts' | 'pidFile'> & {
    env?: Record<string, string>;
    mounts?: Omit<Mounts, 'cwd'>;
  },
) => Promise<string>;

/**
 * internal_source: the uploaded tarball (checked when it was uploaded) is extracted into the checkout by tar, as a
 * sandboxed step like git's clone: it may write only the checkout and reads only the archive. Its hash stands for
 * the commit (a rebuild extracts the same bytes).
 */
async function extractArchive(
  sha256: string,
  src: string,
  ctx: BuildContext,
  confined: ConfinedIn,
): Promise<{ commitSha: string; shownUrl: string }> {
  const file = ctx.archiveFile?.(sha256);
  if (!file) throw new StepError(`the source tarball sha256:${sha256.slice(0, 12)} is not stored on this platform`);
  await mkdir(src, { recursive: true });
  // The stored archive is the platform's (0600, in its own folder); the step, which may run as the sandbox's user,
  // reads a copy beside the checkout, readable by it and gone after.
  const staged = join(dirname(src), '.source.tar.gz');
  await copyFile(file, staged);
  await chmod(staged, 0o444);
  try {
    await confined({
      label: `tar -xzf source tarball (sha256:${sha256.slice(0, 12)})`,
      command: tool('tar') ?? 'tar',
      // No owners, no modes beyond the umask's, no absolute names: the archive's metadata is the workspace's word.
      args: ['-xzf', staged, '-C', src, '--no-same-owner', '--no-same-permissions'],
      cwd: src,
      mounts: { rw: [src, ctx.home], ro: [staged] },
    });
  } finally {
    await rm(staged, { force: true });
  }
  ctx.log.line(`extracted source tarball sha256:${sha256}`);
  return { commitSha: sha256, shownUrl: 'the source tarball' };
}

/**
 * github: clone the repository and check out the ref, as sandboxed git steps. The log's first line says which commit
 * is built (and warns of uncommitted changes or a detached HEAD of a local repository): the clone's own lines wait in
 * a buffer until then (`replay` writes them after the header, or before a failure). Returns the commit.
 */
async function cloneRepo(
  spec: BuildSpec,
  ctx: BuildContext,
  at: { dir: string; src: string; env: Record<string, string>; pidFile: string },
  confined: ConfinedIn,
  replay: () => Promise<void>,
): Promise<{ commitSha: string; shownUrl: string }> {
  const { dir, src, env, pidFile } = at;
  const { home, log, signal } = ctx;
  const user = ctx.sandbox.user;
  const shownUrl = redactUrl(spec.repoUrl);

  let source: RepoSource;
  try {
    source = await checkRepoUrl(spec.repoUrl, ctx.repoPolicy);
  } catch (err) {
    if (err instanceof RepoUrlRefused) throw new StepError(err.message);
    throw err;
  }
  const gitEnv = gitEnvironment(env, source);
  const gitArgs = gitProtocolArgs(source);
  const git = (label: string, args: string[], cwd = src, extraEnv: Record<string, string> = {}, ro: string[] = []) =>
    confined({
      label,
      command: tool('git') ?? 'git',
      args: [...gitArgs, ...args],
      cwd,
      env: { ...gitEnv, ...extraEnv },
      // The clone runs in the revision folder (read-only: the credential files) and writes the checkout only.
      mounts: cwd === dir ? { ro: [dir, ...ro], rw: [src, home] } : { rw: [src, home], ro },
    });

  // As the sandbox's user, git refuses a repository another user owns unless its global configuration trusts it
  // (safe.directory counts nowhere else): a file naming this one repository, for the clone and the header only.
  const trust = source.kind === 'local' && user ? join(dir, '.git-safe-directory') : undefined;
  if (trust && source.kind === 'local') {
    const entries = [source.path, join(source.path, '.git')].map((p) => `\tdirectory = ${p}\n`).join('');
    await writeFile(trust, `[safe]\n${entries}`, { mode: 0o644 });
  }
  const trustEnv: Record<string, string> = trust ? { GIT_CONFIG_GLOBAL: trust } : {};
  try {
    const commitSha = await cloneAndResolve(source).catch(async (err: unknown) => {
      await replay();
      throw err;
    });
    // Quiet: what these print is summed up in the header lines, so it goes nowhere else.
    const discard = new LogWriter({ append: async () => undefined }, spec, 'build');
    const quiet = (cwd: string, ro: string[]) => (args: string[]) =>
      runStepIn(
        {
          label: `git ${args[0]}`,
          command: tool('git') ?? 'git',
          args: [...gitArgs, ...args],
          cwd,
          // Read-only mounts: git status must not try to refresh the source's index.
          env: { ...gitEnv, ...trustEnv, GIT_OPTIONAL_LOCKS: '0' },
          sandbox: ctx.sandbox,
          mounts: { ro: [dir, ...ro], rw: [home] },
          pidFile,
        },
        discard,
        signal,
      );
    const header = await buildHeader({
      inCheckout: quiet(src, []),
      inSource: source.kind === 'local' ? quiet(source.path, [source.path]) : undefined,
      repoRef: spec.repoRef,
      shownUrl,
      commitSha,
    });
    for (const l of header) log.line(l);
    await replay();
    await git(`git checkout ${commitSha.slice(0, 12)}`, ['checkout', '--quiet', '--detach', commitSha]);
    return { commitSha, shownUrl };
  } finally {
    if (trust) await rm(trust, { force: true });
  }

  async function cloneAndResolve(source: RepoSource): Promise<string> {
    if (source.kind === 'local') {
      // --no-local: objects are copied through git's transport, never hard-linked to the source repository's files.
      await git(
        `git clone ${source.path}`,
        ['clone', '--quiet', '--no-checkout', '--no-local', '--', source.path, src],
        dir,
        trustEnv,
        [source.path],
      );
    } else {
      // The credential goes to git in files removed after the clone (see localCloneAuth), never in argv or the URL.
      const auth = await localCloneAuth(dir, source.url, ctx.credential, user);
      try {
        await git(
          `git clone ${shownUrl}`,
          [...auth.options, 'clone', '--quiet', '--no-checkout', '--', auth.url, src],
          dir,
          auth.env,
        );
      } finally {
        await auth.cleanup();
      }
    }
    for (const candidate of refCandidates(spec.repoRef)) {
      try {
        return (
          await git(`git rev-parse ${candidate}`, ['rev-parse', '--verify', '--quiet', `${candidate}^{commit}`])
        ).trim();
      } catch {
        // try the next interpretation of the ref
      }
    }
    throw new StepError(`repo_ref "${spec.repoRef}" is not a branch, tag or commit of ${shownUrl}`);
  }
}

/** True when `path` resolves (symlinks followed) inside the real path of `root`. */
export async function insideReal(path: string, root: string): Promise<boolean> {
  const [p, r] = await Promise.all([realpath(path).catch(() => ''), realpath(root).catch(() => '')]);
  if (!p || !r) return false;
  const rel = relative(r, p);
  return rel === '' || (!rel.startsWith(`..${sep}`) && rel !== '..' && !isAbsolute(rel));
}

/** A real folder, not a symlink to one (paths a workspace could have replaced are checked before the runtime uses them). */
export async function isRealDir(path: string): Promise<boolean> {
  const st = await lstat(path).catch(() => undefined);
  return !!st && st.isDirectory() && !st.isSymbolicLink();
}

/** Makes node_modules/.cache an empty real folder (it becomes a writable mount point over read-only node_modules). */
export async function resetCacheDir(nodeModules: string): Promise<void> {
  const cacheDir = join(nodeModules, '.cache');
  if (!(await isRealDir(cacheDir))) await rm(cacheDir, { recursive: true, force: true });
  await mkdir(cacheDir, { recursive: true });
}

/**
 * What a build_command or an agent server may touch: its checkout and the deployment's home, writable;
 * node_modules that share files with the install cache, read-only (a write would change every revision linked to
 * them), with an empty writable node_modules/.cache for the tools that keep caches there.
 */
export function revisionMounts(
  checkout: string,
  home: string,
  sharedNodeModules?: string,
  extraRw: string[] = [],
): Omit<Mounts, 'cwd'> {
  return {
    rw: [checkout, home, ...extraRw],
    ...(sharedNodeModules ? { roOver: [sharedNodeModules], tmpfs: [join(sharedNodeModules, '.cache')] } : {}),
  };
}

/** git reads no system or user configuration and may use only the transports the URL needs. */
function gitEnvironment(env: Record<string, string>, source: RepoSource): Record<string, string> {
  return {
    ...env,
    GIT_TERMINAL_PROMPT: '0',
    GIT_CONFIG_NOSYSTEM: '1',
    GIT_CONFIG_GLOBAL: '/dev/null',
    GIT_PROTOCOL_FROM_USER: '0',
    GIT_ALLOW_PROTOCOL: source.kind === 'local' ? 'file' : 'https:http:ssh:git',
  };
}

function gitProtocolArgs(source: RepoSource): string[] {
  const allowed = source.kind === 'local' ? ['file'] : ['https', 'http', 'ssh', 'git'];
  return ['-c', 'protocol.allow=never', ...allowed.flatMap((p) => ['-c', `protocol.${p}.allow=always`])];
}

type Confined = (
  step: Omit<Step, 'env' | 'sandbox' | 'mounts' | 'pidFile'> & { mounts?: Omit<Mounts, 'cwd'> },
) => Promise<string>;

/** npm ci, or node_modules linked from this deployment's cached install. Returns node_modules when shared. */
async function npmCi(
  deploymentId: string,
  cwd: string,
  ctx: BuildContext,
  confined: Confined,
): Promise<string | undefined> {
  const { cache, log, signal } = ctx;
  const args = ['ci', '--prefer-offline', '--no-audit', '--no-fund'];
  const nodeModules = join(cwd, 'node_modules');
  // package.json is part of the key: npm ci refuses a lock file that disagrees with it, and so must we.
  const key = cache
    ? installKey(
        deploymentId,
        await readFile(join(cwd, 'package.json')),
        await readFile(join(cwd, 'package-lock.json')),
      )
    : '';
  const cached = cache ? join(cache.dir, key) : '';
  const own = (label: string, a: string[]) =>
    runStepIn(
      {
        label,
        command: tool('cp') ?? 'cp',
        args: a,
        cwd,
        env: childEnv({ base: ctx.baseEnv, home: ctx.home, npmCache: '' }),
      },
      log,
      signal,
    );
  if (cache && existsSync(cached)) {
    // Whatever the repository put there (a symlink could send cp elsewhere) goes first.
    await rm(nodeModules, { recursive: true, force: true });
    await own(
      `npm ci skipped: node_modules linked from the install cache (same package.json and lock, ${key.slice(0, 12)})`,
      ['-al', cached, nodeModules],
    );
    const now = new Date();
    await utimes(cached, now, now).catch(() => undefined); // least recently used goes first
    await resetCacheDir(nodeModules);
    return nodeModules;
  }
  await confined({ label: `npm ${args.join(' ')}`, command: tool('npm') ?? 'npm', args, cwd });
  // Install scripts ran in there: publish only a real folder, never a link they made.
  if (!cache || !(await isRealDir(nodeModules))) return undefined;
  // Publish atomically: a half-copied tree must never be found by another build.
  await mkdir(cache.dir, { recursive: true });
  await chmod(cache.dir, 0o700).catch(() => undefined);
  const tmp = `${cached}.tmp-${process.pid}-${Date.now()}`;
  try {
    await resetCacheDir(nodeModules);
    await own('cp -al node_modules (install cache)', ['-al', nodeModules, tmp]);
    // Its owner first: an entry is never found without it (deleting the deployment removes its entries).
    await writeFile(ownerFile(cached), deploymentId);
    await rename(tmp, cached);
    await cache.onPublished?.(cached);
    return nodeModules;
  } catch {
    await rm(tmp, { recursive: true, force: true });
    return undefined;
  }
}

// A build's first step: the source into the checkout, as sandboxed steps. A git repository is cloned and the ref
// resolved to a commit (git reads no configuration of the machine and may use only the transports the URL needs);
// an uploaded source tarball is extracted, its hash standing for the commit.
import { chmod, copyFile, mkdir, rm, writeFile } from 'node:fs/promises';
import { dirname, join } from 'node:path';
import { localCloneAuth } from '../../../git/clone-auth.ts';
import { redactUrl } from '../../../git/redact.ts';
import { checkRepoUrl, RepoUrlRefused, type RepoSource } from '../../../git/repo-url.ts';
import type { BuildSpec } from '../types.ts';
import type { BuildContext, Confined } from './build-context.ts';
import { buildHeader } from './build-source.ts';
import { runStep as runStepIn, StepError } from './exec.ts';
import { LogWriter } from './logs.ts';
import { tool } from './tools.ts';

/** Candidate git refs for a user-given repo_ref, most specific first (branches are remote-tracking after clone). */
function refCandidates(ref: string): string[] {
  if (ref.startsWith('refs/heads/')) return [`refs/remotes/origin/${ref.slice('refs/heads/'.length)}`];
  if (ref.startsWith('refs/')) return [ref];
  return [`refs/remotes/origin/${ref}`, `refs/tags/${ref}`, ref];
}

/**
 * internal_source: the uploaded tarball (checked when it was uploaded) is extracted into the checkout by tar, as a
 * sandboxed step like git's clone: it may write only the checkout and reads only the archive. Its hash stands for
 * the commit (a rebuild extracts the same bytes).
 */
export async function extractArchive(
  sha256: string,
  src: string,
  ctx: BuildContext,
  confined: Confined,
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
export async function cloneRepo(
  spec: BuildSpec,
  ctx: BuildContext,
  at: { dir: string; src: string; env: Record<string, string>; pidFile: string },
  confined: Confined,
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

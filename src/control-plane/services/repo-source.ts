// The part of repo_url the control plane can check against the machine it runs on. Where builds run in the same
// process (agentplane dev), a local path is held to the local runtime's rules before anything is stored: absolute,
// under --allow-local-repos, outside the data directory, an existing git repository with a commit at repo_ref. A
// repo_url or ref that can never build is a 422 that names it, not a deployment that fails a second later.
import { execFile, spawn } from 'node:child_process';
import { existsSync, statSync } from 'node:fs';
import { join } from 'node:path';
import { promisify } from 'node:util';
import type { ValidationIssue } from '../../lib/errors.ts';
import { nearMatches } from '../../lib/near-names.ts';
import { redactUrl } from '../../git/redact.ts';
import { checkRepoUrl, RepoUrlRefused, type RepoPolicy } from '../../git/repo-url.ts';

const LOC = ['body', 'source_config', 'repo_url'];
const REF_LOC = ['body', 'source_revision_config', 'repo_ref'];
const run = promisify(execFile);

/** A folder git can clone: a working tree (.git folder or file) or a bare repository (HEAD and objects). */
function isGitRepository(path: string): boolean {
  if (existsSync(join(path, '.git'))) return true;
  try {
    return statSync(join(path, 'objects')).isDirectory() && statSync(join(path, 'HEAD')).isFile();
  } catch {
    return false;
  }
}

/**
 * Problems of `repoUrl` against the local runtime's policy; none when there is no such policy here (the builds run
 * elsewhere: a Kubernetes build job, or a listener with its own --allow-local-repos, judges what it clones).
 */
export async function localRepoIssues(
  repoUrl: string | null | undefined,
  policy: RepoPolicy | undefined,
  repoRef?: string | null,
  remote: { anonymous: boolean; timeoutMs?: number } = { anonymous: false },
): Promise<ValidationIssue[]> {
  if (!repoUrl || !policy) return [];
  try {
    const source = await checkRepoUrl(repoUrl, policy);
    if (source.kind !== 'local') {
      // Asked without credentials (none are needed, or the integration's stay with the build): a repository that
      // wants them just does not answer, and the build says the rest.
      return remote.anonymous && repoRef ? await remoteRefIssues(source.url, repoRef, remote.timeoutMs ?? 10_000) : [];
    }
    if (!isGitRepository(source.path)) {
      return [{ loc: LOC, msg: `local repository ${repoUrl} is not a git repository`, type: 'value_error' }];
    }
    return await refIssues(source.path, repoUrl, repoRef ?? undefined);
  } catch (err) {
    if (err instanceof RepoUrlRefused) return [{ loc: LOC, msg: err.message, type: 'value_error' }];
    throw err;
  }
}

type GitAnswer = { ok: boolean; exit: unknown; out: string };

/**
 * Whether the repository has a commit at `ref` as the build resolves it (a branch, a tag or a commit; HEAD when
 * none). Only a certain "no" is a problem: git failing for another reason (ownership, a broken repository) is left
 * to the build, which says it in full.
 */
async function refIssues(path: string, repoUrl: string, ref: string | undefined): Promise<ValidationIssue[]> {
  // The repository's own configuration is read, never run: no fsmonitor hook, no system or user settings.
  const git = (args: string[]) =>
    run('git', ['-c', 'core.fsmonitor=false', '-C', path, ...args], {
      timeout: 10_000,
      env: { PATH: process.env.PATH ?? '', GIT_CONFIG_NOSYSTEM: '1', GIT_CONFIG_GLOBAL: '/dev/null' },
    }).then(
      (r): GitAnswer => ({ ok: true, exit: 0, out: r.stdout }),
      (err: { code?: unknown; stdout?: string }): GitAnswer => ({ ok: false, exit: err.code, out: err.stdout ?? '' }),
    );
  const listed = await git(['for-each-ref', '--format=%(refname)', 'refs/heads', 'refs/tags']);
  if (!listed.ok) return [];
  const refs = listed.out.split('\n').filter(Boolean);
  const commitAt = async (candidate: string) => {
    const r = await git(['rev-parse', '--verify', '--quiet', '--end-of-options', `${candidate}^{commit}`]);
    // Exit 1 with --quiet: no such commit; anything else is not an answer.
    return r.ok ? true : r.exit === 1 ? false : undefined;
  };
  if (!refs.length && (await commitAt('HEAD')) === false) {
    return [
      {
        loc: LOC,
        msg: `local repository ${repoUrl} has no commits yet: commit your project first (git add -A && git commit)`,
        type: 'value_error',
      },
    ];
  }
  if (!ref) return [];
  const candidates = ref.startsWith('refs/') ? [ref] : [`refs/heads/${ref}`, `refs/tags/${ref}`, ref];
  for (const c of candidates) {
    const found = await commitAt(c);
    if (found !== false) return [];
  }
  return [unknownRef(ref, refs, `a branch, tag or commit of ${repoUrl}`)];
}

/** The issue of a ref that is none of `refs`: the near names (a typo), else the branches there are. */
function unknownRef(ref: string, refs: string[], what: string): ValidationIssue {
  const names = refs.map((r) => r.replace(/^refs\/(heads|tags)\//, ''));
  const near = nearMatches(ref.replace(/^refs\/(heads|tags)\//, ''), names);
  const branches = refs.filter((r) => r.startsWith('refs/heads/')).map((r) => r.slice('refs/heads/'.length));
  const hint = near.length
    ? ` (did you mean ${near.map((n) => `"${n}"`).join(' or ')}?)`
    : branches.length
      ? `; its branches: ${branches.slice(0, 8).join(', ')}${branches.length > 8 ? ', ...' : ''}`
      : '';
  return { loc: REF_LOC, msg: `"${ref}" is not ${what}${hint}`, type: 'value_error' };
}

/**
 * `git ls-remote` of a remote repository, bounded: no prompt, no credential helper, no configuration of this
 * machine, at most `timeoutMs` (then its whole process group is killed, helpers included). Undefined when it did
 * not answer; else its branch and tag names.
 */
async function remoteRefs(url: string, timeoutMs: number): Promise<string[] | undefined> {
  const allow = ['https', 'http', 'ssh', 'git'].flatMap((p) => ['-c', `protocol.${p}.allow=always`]);
  const child = spawn(
    'git',
    ['-c', 'protocol.allow=never', ...allow, '-c', 'credential.helper=', 'ls-remote', '--heads', '--tags', '--', url],
    {
      detached: true,
      stdio: ['ignore', 'pipe', 'ignore'],
      env: {
        PATH: process.env.PATH ?? '',
        HOME: process.env.HOME ?? '/',
        GIT_TERMINAL_PROMPT: '0',
        GIT_CONFIG_NOSYSTEM: '1',
        GIT_CONFIG_GLOBAL: '/dev/null',
        GIT_SSH_COMMAND: 'ssh -o BatchMode=yes',
      },
    },
  );
  let out = '';
  child.stdout.on('data', (d: Buffer) => {
    if (out.length < 4 * 1024 * 1024) out += d.toString();
  });
  const timer = setTimeout(() => {
    try {
      process.kill(-child.pid!, 'SIGKILL');
    } catch {
      // already gone
    }
  }, timeoutMs);
  const code = await new Promise<number | null>((resolve) => {
    child.once('error', () => resolve(null));
    child.once('close', (c) => resolve(c));
  });
  clearTimeout(timer);
  if (code !== 0) return undefined;
  return out
    .split('\n')
    .map((l) => l.split('\t')[1] ?? '')
    .filter((r) => /^refs\/(heads|tags)\//.test(r) && !r.endsWith('^{}'));
}

async function remoteRefIssues(url: string, ref: string, timeoutMs: number): Promise<ValidationIssue[]> {
  // A commit id cannot be listed (only tips are); the build checks it.
  if (/^[0-9a-f]{7,64}$/i.test(ref)) return [];
  const refs = await remoteRefs(url, timeoutMs);
  if (!refs) return [];
  const shown = redactUrl(url);
  if (!refs.length) {
    return [
      { loc: LOC, msg: `repository ${shown} has no branches or tags yet: push a commit first`, type: 'value_error' },
    ];
  }
  const wanted = ref.startsWith('refs/') ? [ref] : [`refs/heads/${ref}`, `refs/tags/${ref}`];
  if (wanted.some((w) => refs.includes(w))) return [];
  return [unknownRef(ref, refs, `a branch or tag of ${shown}`)];
}

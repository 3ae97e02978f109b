// The part of repo_url the control plane can check against the machine it runs on. Where builds run in the same
// process (agentplane dev), a local path is held to the local runtime's rules before anything is stored: absolute,
// under --allow-local-repos, outside the data directory, an existing git repository with a commit at repo_ref. A
// repo_url or ref that can never build is a 422 that names it, not a deployment that fails a second later.
import { execFile } from 'node:child_process';
import { existsSync, statSync } from 'node:fs';
import { join } from 'node:path';
import { promisify } from 'node:util';
import type { ValidationIssue } from '../../lib/errors.ts';
import { nearMatches } from '../../lib/near-names.ts';
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
): Promise<ValidationIssue[]> {
  if (!repoUrl || !policy) return [];
  try {
    const source = await checkRepoUrl(repoUrl, policy);
    if (source.kind !== 'local') return [];
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
  const names = refs.map((r) => r.replace(/^refs\/(heads|tags)\//, ''));
  const near = nearMatches(ref.replace(/^refs\/(heads|tags)\//, ''), names);
  const branches = refs.filter((r) => r.startsWith('refs/heads/')).map((r) => r.slice('refs/heads/'.length));
  const hint = near.length
    ? ` (did you mean ${near.map((n) => `"${n}"`).join(' or ')}?)`
    : branches.length
      ? `; its branches: ${branches.slice(0, 8).join(', ')}${branches.length > 8 ? ', ...' : ''}`
      : '';
  return [
    {
      loc: REF_LOC,
      msg: `"${ref}" is not a branch, tag or commit of ${repoUrl}${hint}`,
      type: 'value_error',
    },
  ];
}

// The part of repo_url the control plane can check against the machine it runs on. Where builds run in the same
// process (agentplane dev), a local path is held to the local runtime's rules before anything is stored: absolute,
// under --allow-local-repos, outside the data directory, an existing git repository. A repo_url that can never
// build is a 422 that names it, not a deployment that fails later.
import { existsSync, statSync } from 'node:fs';
import { join } from 'node:path';
import type { ValidationIssue } from '../../lib/errors.ts';
import { checkRepoUrl, RepoUrlRefused, type RepoPolicy } from '../../git/repo-url.ts';

const LOC = ['body', 'source_config', 'repo_url'];

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
): Promise<ValidationIssue[]> {
  if (!repoUrl || !policy) return [];
  try {
    const source = await checkRepoUrl(repoUrl, policy);
    if (source.kind === 'local' && !isGitRepository(source.path)) {
      return [{ loc: LOC, msg: `local repository ${repoUrl} is not a git repository`, type: 'value_error' }];
    }
    return [];
  } catch (err) {
    if (err instanceof RepoUrlRefused) return [{ loc: LOC, msg: err.message, type: 'value_error' }];
    throw err;
  }
}

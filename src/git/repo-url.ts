// Which repo_url values the local runtime clones. A workspace controls repo_url: a local path could name another
// workspace's checkout or the control plane's files, and git's transport syntax ("ext::sh -c ...") runs commands.
import { realpath } from 'node:fs/promises';
import { isAbsolute, relative, sep } from 'node:path';
import { fileURLToPath } from 'node:url';

export type RepoSource =
  | { kind: 'remote'; url: string }
  /** A local repository: `path` is its real path (symlinks resolved). */
  | { kind: 'local'; path: string };

export type RepoPolicy = {
  /** Real paths of the folders local repositories may come from. */
  allowedRoots: string[];
  /** Never cloned from, even when under an allowed root. */
  forbiddenRoots: string[];
};

export class RepoUrlRefused extends Error {}

const REMOTE = /^(https?|ssh|git):\/\/[^\s]+$/i;
/** scp-like ssh address: user@host:path (git reads "host:path" without "/" before the colon as ssh). */
const SCP = /^[A-Za-z0-9._~-]+@[A-Za-z0-9.-]+:[^\s]*$/;
/** git's "<transport>::<address>" form, which selects a remote helper (ext:: runs any command). */
const HELPER = /^[A-Za-z][A-Za-z0-9+.-]*::/;

function within(path: string, root: string): boolean {
  const rel = relative(root, path);
  return rel === '' || (!rel.startsWith(`..${sep}`) && rel !== '..' && !isAbsolute(rel));
}

/** Classifies repo_url, or throws RepoUrlRefused with a message fit for the revision's status (no credentials). */
export async function checkRepoUrl(repoUrl: string, policy: RepoPolicy): Promise<RepoSource> {
  const url = repoUrl.trim();
  if (!url || url.startsWith('-')) throw new RepoUrlRefused('repo_url must be a git URL or an absolute path');
  if (/[\0\r\n]/.test(url)) throw new RepoUrlRefused('repo_url contains control characters');
  if (HELPER.test(url))
    throw new RepoUrlRefused('repo_url uses a git remote helper ("<transport>::"), which is not allowed');
  if (REMOTE.test(url) || SCP.test(url)) {
    if (/^(ssh|git):\/\/-|@-/i.test(url)) throw new RepoUrlRefused('repo_url host must not start with "-"');
    return { kind: 'remote', url };
  }
  let path: string;
  if (/^file:\/\//i.test(url)) {
    try {
      path = fileURLToPath(url);
    } catch {
      throw new RepoUrlRefused('repo_url is not a valid file:// URL');
    }
  } else if (isAbsolute(url)) {
    path = url;
  } else if (/^[A-Za-z][A-Za-z0-9+.-]*:/.test(url)) {
    throw new RepoUrlRefused('repo_url scheme is not allowed (use https, http, ssh, git or an allowed local path)');
  } else {
    throw new RepoUrlRefused('a local repo_url must be an absolute path');
  }
  let real: string;
  try {
    real = await realpath(path);
  } catch {
    throw new RepoUrlRefused(`local repository ${path} does not exist`);
  }
  const forbidden = await Promise.all(policy.forbiddenRoots.map((r) => realpath(r).catch(() => r)));
  if (forbidden.some((root) => within(real, root))) {
    throw new RepoUrlRefused(
      `local repository ${path} is inside the agentplane data directory, which is never cloned from`,
    );
  }
  if (!policy.allowedRoots.some((root) => within(real, root))) {
    const roots = policy.allowedRoots.length ? policy.allowedRoots.join(', ') : 'none';
    throw new RepoUrlRefused(`local repository ${path} is outside the allowed roots (--allow-local-repos: ${roots})`);
  }
  return { kind: 'local', path: real };
}

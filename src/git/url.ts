// Reading git clone URLs: a scheme URL (https, ssh://, git://, ...) or git's scp-like `[user@]host:path`. One
// parser for every place that needs a URL's host or repository path (integration hosts, credential scopes, push
// webhooks, the local runtime's clone): they must all read a URL the same way, or a credential could go to one
// host while another was checked.

const SCHEME_URL = /^[a-z][a-z0-9+.-]*:\/\//i;
/** scp-like: no "/" before the colon, and not "scheme://" (git reads these as ssh). */
const SCP = /^(?:[^@/:]+@)?([^/:]+):(?!\/\/)([\s\S]*)$/;

type GitUrlParts = {
  /** `https:`, `ssh:`...; undefined for an scp-like address. */
  protocol?: string;
  /** As written in the URL (with port); not yet lower-cased. */
  host: string;
  path: string;
};

function gitUrlParts(url: string): GitUrlParts | undefined {
  if (SCHEME_URL.test(url)) {
    let u: URL;
    try {
      u = new URL(url);
    } catch {
      return undefined;
    }
    return { protocol: u.protocol, host: u.host, path: u.pathname };
  }
  const scp = SCP.exec(url);
  return scp ? { host: scp[1]!, path: scp[2]! } : undefined;
}

/** Host of a clone URL (any scheme URL, or scp-like user@host:path), lower case, with port; else undefined. */
export function repoHostOf(repoUrl: string): string | undefined {
  return gitUrlParts(repoUrl)?.host.toLowerCase() || undefined;
}

/**
 * `host/path` of a git URL (https, http, ssh://, git://, or scp-like `user@host:path`), lower-case host, no `.git`
 * suffix, no user; undefined when it cannot be read safely (then no credential is used).
 */
export function repositoryPath(url: string): string | undefined {
  const parts = gitUrlParts(url);
  if (!parts) return undefined;
  const { protocol, host, path } = parts;
  if (protocol !== undefined && !['https:', 'http:', 'ssh:', 'git:'].includes(protocol)) return undefined;
  // An scp-like path must be one non-empty line.
  if (protocol === undefined && !/^.+$/.test(path)) return undefined;
  // Encoded characters or dot segments could make the server read another path than the one matched here.
  if (path.includes('%') || path.includes('\\') || path.split('/').some((s) => s === '.' || s === '..'))
    return undefined;
  const segments = path
    .replace(/\.git\/?$/, '')
    .split('/')
    .filter(Boolean);
  if (!host || !segments.length) return undefined;
  return [host.toLowerCase(), ...segments].join('/');
}

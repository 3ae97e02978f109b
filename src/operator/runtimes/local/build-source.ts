// What a build says first: the commit it builds, and for a local repository what it leaves out (uncommitted edits,
// a checkout of another commit than repo_ref names). Without it, a user building from a working folder learns only
// from the running agent that the last edit is not in it.

/** Runs git (confined, quietly) and resolves with its stdout; rejects when git fails. */
export type QuietGit = (args: string[]) => Promise<string>;

const short = (sha: string) => sha.slice(0, 12);

/**
 * The build log's opening lines: `building <commit> "<subject>" (<ref> of <repo>)`, then one warning a line.
 * `inSource` runs git in the local source repository; undefined for a remote one. Whatever git cannot tell (a bare
 * repository has no working tree, an unborn HEAD no commit) is left unsaid rather than failing the build.
 */
export async function buildHeader(opts: {
  inCheckout: QuietGit;
  inSource?: QuietGit;
  repoRef: string;
  shownUrl: string;
  commitSha: string;
}): Promise<string[]> {
  const { inCheckout, inSource, repoRef, shownUrl, commitSha } = opts;
  const subject = (await inCheckout(['log', '-1', '--format=%s', commitSha]).catch(() => '')).trim();
  const lines = [
    `building ${short(commitSha)}${subject ? ` ${JSON.stringify(subject)}` : ''} (${repoRef} of ${shownUrl})`,
  ];
  if (!inSource) return lines;
  const [head, headRef, status] = await Promise.all([
    inSource(['rev-parse', '--verify', '--quiet', 'HEAD']).then(
      (s) => s.trim(),
      () => '',
    ),
    inSource(['rev-parse', '--symbolic-full-name', 'HEAD']).then(
      (s) => s.trim(),
      () => '',
    ),
    inSource(['status', '--porcelain', '--untracked-files=normal']).catch(() => undefined),
  ]);
  if (headRef === 'HEAD' && head) {
    lines.push(
      `warning: ${shownUrl} has a detached HEAD at ${short(head)}: the build is of ${repoRef} ` +
        (head === commitSha
          ? '(the same commit), not of what is checked out'
          : `(${short(commitSha)}), not of ${short(head)}`),
    );
  } else if (head && head !== commitSha && headRef.startsWith('refs/heads/')) {
    const branch = headRef.slice('refs/heads/'.length);
    lines.push(
      `warning: ${shownUrl} has ${branch} checked out at ${short(head)}; the build is of ${repoRef} (${short(commitSha)})`,
    );
  }
  const changed = (status ?? '')
    .split('\n')
    .filter(Boolean)
    .map((l) => l.slice(3));
  if (changed.length) {
    const shown = changed.slice(0, 5).join(', ') + (changed.length > 5 ? `, and ${changed.length - 5} more` : '');
    lines.push(
      `warning: ${shownUrl} has uncommitted changes (${shown}); only commits are built: commit them and redeploy`,
    );
  }
  return lines;
}

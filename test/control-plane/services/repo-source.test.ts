// repo_url rules checked before anything is stored: the shape everywhere (a relative path can never build), and,
// where builds run on this machine (dev), a local path against the local runtime's own rules. Real folders and real
// git repositories made here.
import { execFileSync, spawn, type ChildProcess } from 'node:child_process';
import { createServer, type Server } from 'node:net';
import { mkdirSync, mkdtempSync, realpathSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { repoUrlProblem } from '../../../src/api/input-rules.ts';
import { localRepoIssues } from '../../../src/control-plane/services/repo-source.ts';
import type { RepoPolicy } from '../../../src/git/repo-url.ts';

let tmp: string;
let policy: RepoPolicy;

beforeAll(() => {
  tmp = realpathSync(mkdtempSync(join(tmpdir(), 'ap-repo-source-')));
  for (const d of ['allowed/repo', 'allowed/plain', 'outside/repo', 'data/repo'])
    mkdirSync(join(tmp, d), { recursive: true });
  for (const d of ['allowed/repo', 'allowed/empty', 'outside/repo', 'data/repo'])
    execFileSync('git', ['init', '--quiet', '--initial-branch', 'main', join(tmp, d)]);
  const git = (...args: string[]) =>
    execFileSync('git', [
      '-c',
      'user.name=t',
      '-c',
      'user.email=t@example.com',
      '-C',
      join(tmp, 'allowed/repo'),
      ...args,
    ]);
  git('commit', '--quiet', '--allow-empty', '-m', 'first');
  git('tag', 'v1.0.0');
  for (const b of ['develop', 'feature/login', 'release-2026']) git('branch', b);
  execFileSync('git', ['clone', '--quiet', '--bare', join(tmp, 'allowed/repo'), join(tmp, 'allowed/bare.git')]);
  policy = { allowedRoots: [join(tmp, 'allowed'), join(tmp, 'data')], forbiddenRoots: [join(tmp, 'data')] };
});

afterAll(() => rmSync(tmp, { recursive: true, force: true }));

describe('repo_url shape (every control plane)', () => {
  it.each([
    'https://github.com/acme/agent.git',
    'http://127.0.0.1:9/team/agent.git',
    'ssh://git@github.com/acme/agent.git',
    'git://example.com/agent.git',
    'git@github.com:acme/agent.git',
    'github.com:acme/agent.git',
    'file:///srv/repos/agent',
    '/srv/repos/agent',
  ])('accepts %s', (url) => {
    expect(repoUrlProblem(url)).toBeUndefined();
  });

  it.each([
    ['.', /"\." is a relative path: repo_url must be a git URL .* or the absolute path of a local git repository/],
    ['agent-repo', /"agent-repo" is a relative path/],
    ['./agent', /"\.\/agent" is a relative path/],
    ['../agent', /is a relative path/],
    ['ftp://example.com/agent.git', /scheme "ftp:\/\/" is not one git clones from here/],
  ])('refuses %s', (url, message) => {
    expect(repoUrlProblem(url)).toMatch(message);
  });
});

describe('local repo_url against the local runtime (dev)', () => {
  const msgs = async (url: string) => (await localRepoIssues(url, policy)).map((i) => `${i.loc.join('.')}: ${i.msg}`);

  it('accepts a git repository (working tree or bare) under an allowed root, and any remote URL', async () => {
    expect(await msgs(join(tmp, 'allowed/repo'))).toEqual([]);
    expect(await msgs(`file://${join(tmp, 'allowed/repo')}`)).toEqual([]);
    expect(await msgs(join(tmp, 'allowed/bare.git'))).toEqual([]);
    expect(await msgs('https://github.com/acme/agent.git')).toEqual([]);
    expect(await msgs('git@github.com:acme/agent.git')).toEqual([]);
  });

  it('names the field and the problem for each kind of local path that can never build', async () => {
    const at = 'body.source_config.repo_url: ';
    expect(await msgs(join(tmp, 'outside/repo'))).toEqual([
      `${at}local repository ${join(tmp, 'outside/repo')} is outside the allowed roots (--allow-local-repos: ${policy.allowedRoots.join(', ')})`,
    ]);
    expect(await msgs(join(tmp, 'allowed/nope'))).toEqual([
      `${at}local repository ${join(tmp, 'allowed/nope')} does not exist`,
    ]);
    expect(await msgs(join(tmp, 'allowed/plain'))).toEqual([
      `${at}local repository ${join(tmp, 'allowed/plain')} is not a git repository`,
    ]);
    expect(await msgs(join(tmp, 'data/repo'))).toEqual([
      `${at}local repository ${join(tmp, 'data/repo')} is inside the agentplane data directory, which is never cloned from`,
    ]);
    expect(await msgs('.')).toEqual([`${at}a local repo_url must be an absolute path`]);
  });

  it('refuses a repository without commits, at create rather than a second later in the build', async () => {
    expect(await msgs(join(tmp, 'allowed/empty'))).toEqual([
      `body.source_config.repo_url: local repository ${join(tmp, 'allowed/empty')} has no commits yet: commit your project first (git add -A && git commit)`,
    ]);
    execFileSync('git', ['init', '--quiet', '--bare', join(tmp, 'allowed/empty.git')]);
    expect(await msgs(join(tmp, 'allowed/empty.git'))).toEqual([
      expect.stringContaining(`${join(tmp, 'allowed/empty.git')} has no commits yet`),
    ]);
  });

  it('accepts a branch, a tag or a commit of a local repository; refuses any other ref, naming it and near matches', async () => {
    const repo = join(tmp, 'allowed/repo');
    const ref = async (r: string, url = repo) =>
      (await localRepoIssues(url, policy, r)).map((i) => `${i.loc.join('.')}: ${i.msg}`);
    const sha = execFileSync('git', ['-C', repo, 'rev-parse', 'HEAD']).toString().trim();
    for (const ok of ['main', 'refs/heads/main', 'develop', 'feature/login', 'v1.0.0', 'refs/tags/v1.0.0', sha])
      expect(await ref(ok), ok).toEqual([]);
    expect(await ref(sha.slice(0, 10))).toEqual([]);
    expect(await ref('main', join(tmp, 'allowed/bare.git'))).toEqual([]);

    const at = 'body.source_revision_config.repo_ref: ';
    expect(await ref('mian')).toEqual([`${at}"mian" is not a branch, tag or commit of ${repo} (did you mean "main"?)`]);
    expect(await ref('refs/heads/devlop')).toEqual([
      `${at}"refs/heads/devlop" is not a branch, tag or commit of ${repo} (did you mean "develop"?)`,
    ]);
    expect(await ref('v1.0.1')).toEqual([
      `${at}"v1.0.1" is not a branch, tag or commit of ${repo} (did you mean "v1.0.0"?)`,
    ]);
    expect(await ref('production')).toEqual([
      `${at}"production" is not a branch, tag or commit of ${repo}; its branches: develop, feature/login, main, release-2026`,
    ]);
    // A commit id the repository does not have, and a tree that is not a commit.
    expect(await ref('0123456789abcdef0123456789abcdef01234567')).toEqual([
      expect.stringContaining('"0123456789abcdef0123456789abcdef01234567" is not a branch, tag or commit'),
    ]);
    const tree = execFileSync('git', ['-C', repo, 'rev-parse', 'HEAD^{tree}']).toString().trim();
    expect(await ref(tree)).toEqual([expect.stringContaining(`"${tree}" is not a branch, tag or commit`)]);
  });

  it('checks nothing where builds run elsewhere (no local policy: Kubernetes, listeners)', async () => {
    expect(await localRepoIssues(join(tmp, 'outside/repo'), undefined)).toEqual([]);
  });
});

describe('remote repo_url refs (dev), asked with a bounded git ls-remote', () => {
  let daemon: ChildProcess | undefined;
  let silent: Server | undefined;
  let base: string;
  const port = () =>
    new Promise<number>((res) => {
      const probe = createServer().listen(0, '127.0.0.1', () => {
        const p = (probe.address() as { port: number }).port;
        probe.close(() => res(p));
      });
    });

  beforeAll(async () => {
    // A real git server (git daemon) serving the repository above, and an empty one.
    execFileSync('git', ['init', '--quiet', '--bare', join(tmp, 'served', 'empty.git')]);
    execFileSync('git', ['clone', '--quiet', '--bare', join(tmp, 'allowed/repo'), join(tmp, 'served', 'agent.git')]);
    const p = await port();
    daemon = spawn(
      'git',
      [
        'daemon',
        '--reuseaddr',
        '--export-all',
        `--base-path=${join(tmp, 'served')}`,
        '--listen=127.0.0.1',
        `--port=${p}`,
      ],
      { stdio: 'ignore' },
    );
    base = `git://127.0.0.1:${p}`;
    for (let i = 0; i < 200; i++) {
      try {
        execFileSync('git', ['ls-remote', `${base}/agent.git`], { stdio: 'ignore' });
        break;
      } catch {
        await new Promise((r) => setTimeout(r, 50));
      }
    }
  });
  afterAll(() => {
    daemon?.kill();
    silent?.close();
  });

  const ref = async (url: string, r: string, timeoutMs?: number) =>
    (await localRepoIssues(url, policy, r, { anonymous: true, timeoutMs })).map((i) => `${i.loc.join('.')}: ${i.msg}`);

  it('accepts a branch or tag the server lists, refuses another naming the near one, and an empty repository', async () => {
    expect(await ref(`${base}/agent.git`, 'main')).toEqual([]);
    expect(await ref(`${base}/agent.git`, 'v1.0.0')).toEqual([]);
    expect(await ref(`${base}/agent.git`, 'refs/heads/develop')).toEqual([]);
    expect(await ref(`${base}/agent.git`, 'feature/logn')).toEqual([
      `body.source_revision_config.repo_ref: "feature/logn" is not a branch or tag of ${base}/agent.git (did you mean "feature/login"?)`,
    ]);
    expect(await ref(`${base}/empty.git`, 'main')).toEqual([
      `body.source_config.repo_url: repository ${base}/empty.git has no branches or tags yet: push a commit first`,
    ]);
    // With the integration's credentials (not anonymous) nothing is asked here: the build says it.
    expect(await localRepoIssues(`${base}/agent.git`, policy, 'nope', { anonymous: false })).toEqual([]);
  });

  it('a server that never answers does not hold the request: the check gives up and leaves it to the build', async () => {
    // Accepts the connection and says nothing, as a stuck host would.
    silent = createServer(() => undefined).listen(0, '127.0.0.1');
    await new Promise((r) => silent!.once('listening', r));
    const url = `git://127.0.0.1:${(silent.address() as { port: number }).port}/agent.git`;
    expect(await ref(url, 'main', 500)).toEqual([]);
    // Nothing of it is left running.
    const left = execFileSync('ps', ['-eo', 'args'], { encoding: 'utf8' })
      .split('\n')
      .filter((l) => l.includes(url));
    expect(left).toEqual([]);
  });
});

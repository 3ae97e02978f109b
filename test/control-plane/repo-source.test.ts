// repo_url rules checked before anything is stored: the shape everywhere (a relative path can never build), and,
// where builds run on this machine (dev), a local path against the local runtime's own rules. Real folders and real
// git repositories made here.
import { execFileSync } from 'node:child_process';
import { mkdirSync, mkdtempSync, realpathSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { repoUrlProblem } from '../../src/control-plane/services/input-rules.ts';
import { localRepoIssues } from '../../src/control-plane/services/repo-source.ts';
import type { RepoPolicy } from '../../src/git/repo-url.ts';

let tmp: string;
let policy: RepoPolicy;

beforeAll(() => {
  tmp = realpathSync(mkdtempSync(join(tmpdir(), 'ap-repo-source-')));
  for (const d of ['allowed/repo', 'allowed/plain', 'outside/repo', 'data/repo'])
    mkdirSync(join(tmp, d), { recursive: true });
  for (const d of ['allowed/repo', 'outside/repo', 'data/repo']) execFileSync('git', ['init', '--quiet', join(tmp, d)]);
  execFileSync('git', ['init', '--quiet', '--bare', join(tmp, 'allowed/bare.git')]);
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

  it('checks nothing where builds run elsewhere (no local policy: Kubernetes, listeners)', async () => {
    expect(await localRepoIssues(join(tmp, 'outside/repo'), undefined)).toEqual([]);
  });
});

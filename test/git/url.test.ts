// The one git URL reader: the host an integration's credential is matched against (control plane checks, the local
// clone) and the repository path credential scopes and push webhooks compare.
import { describe, expect, it } from 'vitest';
import { repoHostOf, repositoryPath } from '../../src/git/url.ts';

describe('repoHostOf', () => {
  it.each([
    ['https://GitHub.com/acme/agent.git', 'github.com'],
    ['http://git.example:8080/acme/agent', 'git.example:8080'],
    ['ssh://git@Git.Example:2222/acme/agent.git', 'git.example:2222'],
    ['git@GitHub.com:acme/agent.git', 'github.com'],
    ['github.com:acme/agent.git', 'github.com'],
    ['github.com:', 'github.com'],
    ['file:///srv/repo', undefined],
    ['/srv/repo', undefined],
    ['./repo', undefined],
    ['https://[bad/x', undefined],
  ])('%s → %s', (url, host) => {
    expect(repoHostOf(url)).toBe(host);
  });
});

describe('repositoryPath', () => {
  it.each([
    ['github.com:', undefined],
    ['git@github.com:acme/a\ngent.git', undefined],
    ['https://github.com/acme/a%0agent.git', undefined],
    ['ftp://github.com/acme/agent.git', undefined],
    ['git@GitHub.com:acme/agent.git', 'github.com/acme/agent'],
  ])('%s → %s', (url, path) => {
    expect(repositoryPath(url)).toBe(path);
  });
});

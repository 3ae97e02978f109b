// The pure input rules and URL redaction, row by row.
import { describe, expect, it } from 'vitest';
import {
  DEFAULT_INPUT_POLICY,
  customHostProblem,
  gitRefProblem,
  labelKeyProblem,
  relativePathProblem,
  repoUrlProblem,
  resourceBoundProblems,
} from '../../src/api/input-rules.ts';
import { customUrlHost } from '../../src/resources/index.ts';
import { redactUrl, redactUrlsIn } from '../../src/lib/redact.ts';

describe('repoUrlProblem', () => {
  it.each([
    ['https://github.com/acme/agent.git', false],
    ['git@github.com:acme/agent.git', false],
    ['ssh://git@github.com/acme/agent.git', false],
    ['ssh://github.com:2222/acme/agent.git', false],
    ['/srv/repos/agent', false],
    ['file:///srv/repos/agent', false],
    ['https://user:token@github.com/acme/agent.git', true],
    ['https://token@github.com/acme/agent.git', true],
    ['HTTP://u:p@host/x', true],
    ['ssh://git:pw@github.com/acme/agent.git', true],
    ['git:pw@github.com:acme/agent.git', true],
    ['-uhack', true],
    ['ext::sh -c id', true],
    ['fd::17', true],
    ['https://github.com/a b', true],
  ])('%s -> refused: %s', (url, refused) => {
    expect(Boolean(repoUrlProblem(url))).toBe(refused);
  });

  it('credential problems point at integrations', () => {
    expect(repoUrlProblem('https://u:p@github.com/x')).toMatch(/Integrations/);
  });
});

describe('gitRefProblem', () => {
  it.each([
    ['main', false],
    ['refs/heads/feature/x', false],
    ['refs/tags/v1.0.0', false],
    ['deadbeefdeadbeefdeadbeefdeadbeefdeadbeef', false],
    ['-b', true],
    ['--upload-pack=x', true],
    ['a..b', true],
    ['a b', true],
    ['a~1', true],
    ['a^', true],
    ['a:b', true],
    ['HEAD@{0}', true],
    ['@', true],
    ['/main', true],
    ['main/', true],
    ['main.lock', true],
    ['feature/.hidden', true],
    ['a//b', true],
  ])('%s -> refused: %s', (ref, refused) => {
    expect(Boolean(gitRefProblem(ref))).toBe(refused);
  });
});

describe('relativePathProblem', () => {
  it.each([
    ['langgraph.json', false],
    ['agents/chat/langgraph.json', false],
    ['./langgraph.json', false],
    ['..', true],
    ['a/../../b', true],
    ['a\\..\\b', true],
    ['/etc/passwd', true],
    ['C:/x', true],
    ['a\u0000b', true],
  ])('%s -> refused: %s', (p, refused) => {
    expect(Boolean(relativePathProblem(p))).toBe(refused);
  });
});

describe('labelKeyProblem', () => {
  it.each([
    ['app', false],
    ['app.kubernetes.io/name', false],
    ['team.example.com/owner', false],
    ['agentplane.dev/tenant', true],
    ['x.agentplane.dev/anything', true],
    ['Bad_Prefix/x', true],
    ['a/b/c', true],
    ['-a', true],
    ['', true],
    ['x'.repeat(64), true],
  ])('%s -> refused: %s', (k, refused) => {
    expect(Boolean(labelKeyProblem(k))).toBe(refused);
  });
});

describe('custom hosts', () => {
  const policy = { allowedCustomDomains: ['agents.example.com'], publicHost: 'api.agents.example.com' };
  it.each([
    ['https://bot.agents.example.com', 'bot.agents.example.com', undefined],
    ['BOT.Agents.example.com.', 'bot.agents.example.com', undefined],
    ['http://a.b.agents.example.com/path?q', 'a.b.agents.example.com', undefined],
    ['agents.example.com', 'agents.example.com', /not under an allowed custom domain/],
    ['evilagents.example.com', 'evilagents.example.com', /not under/],
    ['api.agents.example.com', 'api.agents.example.com', /own host/],
  ])('%s -> host %s', (url, host, problem) => {
    const r = customUrlHost(url);
    expect(r).toEqual({ host });
    const p = customHostProblem(host, policy);
    if (problem) expect(p).toMatch(problem);
    else expect(p).toBeUndefined();
  });

  it.each([
    'ftp://x.example.com',
    'https://u:p@x.example.com',
    'https://x.example.com:444',
    'localhost',
    '10.0.0.1',
    'https://[::1]/',
    'a b.example.com',
  ])('%s is not a custom URL', (url) => {
    expect(customUrlHost(url)).toHaveProperty('problem');
  });

  it('no domains: refused; * : any host but the control plane', () => {
    expect(customHostProblem('a.example.com', { allowedCustomDomains: [] })).toMatch(/not enabled/);
    expect(customHostProblem('a.example.com', { allowedCustomDomains: ['*'] })).toBeUndefined();
    expect(customHostProblem('cp.example.com', { allowedCustomDomains: ['*'], publicHost: 'cp.example.com' })).toMatch(
      /own host/,
    );
  });
});

describe('resourceBoundProblems', () => {
  it('names each field over its bound with the bound and the flag', () => {
    expect(
      resourceBoundProblems({ min_scale: 1, max_scale: 10, cpu: 4, memory_mb: 8192 }, DEFAULT_INPUT_POLICY),
    ).toEqual([]);
    expect(resourceBoundProblems({ min_scale: 100000, cpu: 1e9, memory_limit_mb: 8193 }, DEFAULT_INPUT_POLICY)).toEqual(
      [
        ['min_scale', 'min_scale must be at most 10 replicas on this control plane (--max-scale), got 100000'],
        ['cpu', 'cpu must be at most 4 CPU cores on this control plane (--max-cpu), got 1000000000'],
        [
          'memory_limit_mb',
          'memory_limit_mb must be at most 8192 MB on this control plane (--max-memory-mb), got 8193',
        ],
      ],
    );
  });

  it('names the floor of memory_limit_mb: what an agent server holds by itself', () => {
    expect(resourceBoundProblems({ memory_mb: 128, memory_limit_mb: 256 }, DEFAULT_INPUT_POLICY)).toEqual([
      [
        'memory_limit_mb',
        'memory_limit_mb must be at least 512 MB (an agent server alone holds about 250 MB), got 256',
      ],
    ]);
    expect(resourceBoundProblems({ memory_limit_mb: 512 }, DEFAULT_INPUT_POLICY)).toEqual([]);
  });
});

describe('redactUrl', () => {
  it.each([
    ['https://user:tok@github.com/a/b.git', 'https://***@github.com/a/b.git'],
    ['https://tok@github.com/a', 'https://***@github.com/a'],
    ['ssh://git:pw@host/x', 'ssh://git:***@host/x'],
    ['https://u:p@ss@host/x', 'https://***@host/x'],
    ['ssh://git:p@ss@host/x', 'ssh://git:***@host/x'],
    ['ssh://git@host/x', 'ssh://git@host/x'],
    ['git@github.com:o/r.git', 'git@github.com:o/r.git'],
    ['u:p@host:o/r', 'u:***@host:o/r'],
    ['https://github.com/a/b', 'https://github.com/a/b'],
    ['/srv/repo', '/srv/repo'],
  ])('%s -> %s', (url, shown) => {
    expect(redactUrl(url)).toBe(shown);
  });

  it('masks every URL in a line of text', () => {
    expect(redactUrlsIn("fatal: unable to access 'https://a:b@h/r/' (ssh://c:d@e/f)")).toBe(
      "fatal: unable to access 'https://***@h/r/' (ssh://c:***@e/f)",
    );
  });
});

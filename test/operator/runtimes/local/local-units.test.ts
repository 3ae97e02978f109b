// The local runtime's isolation rules as pure functions: environment allow-list, URL redaction, repo_url policy,
// sandbox mount order, build and cache retention, log caps.
import { existsSync, mkdirSync, mkdtempSync, rmSync, symlinkSync, utimesSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { Readable } from 'node:stream';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { childEnv, envProblem } from '../../../../src/operator/runtimes/local/env.ts';
import { failureLine, StepError } from '../../../../src/operator/runtimes/local/exec.ts';
import {
  buildsToRemove,
  cacheEvictions,
  trimInstallCache,
} from '../../../../src/operator/runtimes/local/housekeeping.ts';
import { LogBudget, LogWriter } from '../../../../src/operator/runtimes/local/logs.ts';
import { redactText, redactUrl, splitCredentials } from '../../../../src/git/redact.ts';
import { checkRepoUrl } from '../../../../src/git/repo-url.ts';
import { bwrapArgs, bwrapEnvArgs } from '../../../../src/operator/runtimes/local/sandbox.ts';
import { findInPath } from '../../../../src/operator/runtimes/local/tools.ts';
import { reservedEnvName } from '../../../../src/lib/reserved-env.ts';

describe('childEnv (allow-list)', () => {
  const base = {
    PATH: '/usr/bin:/bin',
    HOME: '/root',
    LANG: 'C.UTF-8',
    LC_ALL: 'C.UTF-8',
    TZ: 'UTC',
    HTTPS_PROXY: 'http://proxy:3128',
    no_proxy: 'localhost',
    AGENTPLANE_BOOTSTRAP_API_KEY: 'admin-key-0123456789',
    AGENTPLANE_DATABASE_URL: 'postgres://postgres@127.0.0.1/postgres',
    AWS_SECRET_ACCESS_KEY: 'aws',
    NODE_OPTIONS: '--require /evil.js',
    SSH_AUTH_SOCK: '/tmp/ssh-agent.sock',
    npm_config_userconfig: '/root/.npmrc',
  };
  const rows: { name: string; extra?: Record<string, string>; has: Record<string, string | undefined> }[] = [
    {
      name: 'PATH, locale, time zone and proxies pass',
      has: {
        PATH: '/usr/bin:/bin',
        LANG: 'C.UTF-8',
        LC_ALL: 'C.UTF-8',
        TZ: 'UTC',
        HTTPS_PROXY: 'http://proxy:3128',
        no_proxy: 'localhost',
      },
    },
    { name: "HOME and the npm cache are the deployment's", has: { HOME: '/d/home', npm_config_cache: '/d/home/.npm' } },
    {
      name: "agentplane's own secrets never pass",
      has: { AGENTPLANE_BOOTSTRAP_API_KEY: undefined, AGENTPLANE_DATABASE_URL: undefined },
    },
    {
      name: 'other credentials and runtime hooks never pass',
      has: {
        AWS_SECRET_ACCESS_KEY: undefined,
        NODE_OPTIONS: undefined,
        SSH_AUTH_SOCK: undefined,
        npm_config_userconfig: undefined,
      },
    },
    { name: "the deployment's secrets are added", extra: { OPENAI_API_KEY: 'sk-1' }, has: { OPENAI_API_KEY: 'sk-1' } },
  ];
  for (const row of rows) {
    it(row.name, () => {
      const env = childEnv({ base, home: '/d/home', npmCache: '/d/home/.npm', extra: row.extra });
      for (const [k, v] of Object.entries(row.has)) expect([k, env[k]]).toEqual([k, v]);
      expect(Object.keys(env).filter((k) => k.startsWith('AGENTPLANE'))).toEqual([]);
    });
  }
  it('has a PATH even when the dev process has none', () => {
    expect(childEnv({ base: {}, home: '/h', npmCache: '/c' }).PATH).toMatch(/\/usr\/bin/);
  });

  it.each([
    [{ A: 'ok' }, undefined],
    [{ A: 'a\0b' }, /A contains a NUL/],
    [{ BIG: 'x'.repeat(200 * 1024) }, /BIG is too large/],
    [{ 'BAD=NAME': 'x' }, /name .* is not valid/],
    [
      Object.fromEntries(Array.from({ length: 20 }, (_, i) => [`V${i}`, 'x'.repeat(100 * 1024)])),
      /environment is too large/,
    ],
  ])('envProblem(%#)', (env, expected) => {
    const problem = envProblem(env as Record<string, string>);
    if (expected) expect(problem).toMatch(expected);
    else expect(problem).toBeUndefined();
    expect(problem ?? '').not.toContain('xxxx'); // names the variable, never shows the value
  });
});

describe('redaction', () => {
  it.each([
    ['https://alice:tok3n@github.com/a/b.git', 'https://***@github.com/a/b.git'],
    ['https://ghp_abc@github.com/a/b.git', 'https://***@github.com/a/b.git'],
    ['https://github.com/a/b.git', 'https://github.com/a/b.git'],
    ['git@github.com:a/b.git', 'git@github.com:a/b.git'],
    ['/srv/repos/x', '/srv/repos/x'],
  ])('redactUrl(%s)', (url, shown) => expect(redactUrl(url)).toBe(shown));

  it('redacts every URL inside a line, as git prints them', () => {
    expect(redactText("fatal: unable to access 'https://u:p4ss@h/x.git/': 403 and http://v:q@i/y")).toBe(
      "fatal: unable to access 'https://***@h/x.git/': 403 and http://***@i/y",
    );
    expect(new StepError('git clone https://u:p4ss@h/x failed').message).not.toContain('p4ss');
    expect(failureLine('fatal: repository https://u:p4ss@h/x not found')).not.toContain('p4ss');
  });

  it('splits credentials out of the URL git gets', () => {
    expect(splitCredentials('https://alice:p%40ss@h/x.git')).toEqual({
      url: 'https://h/x.git',
      username: 'alice',
      password: 'p@ss',
    });
    expect(splitCredentials('https://h/x.git')).toEqual({ url: 'https://h/x.git' });
    expect(splitCredentials('ssh://git@h/x.git')).toEqual({ url: 'ssh://git@h/x.git' });
  });
});

describe('checkRepoUrl', () => {
  let root: string;
  beforeAll(() => {
    root = mkdtempSync(join(tmpdir(), 'ap-repo-url-'));
    for (const d of ['allowed/repo', 'outside/repo', 'data/runtime/deployments/other/revisions/r1/src'])
      mkdirSync(join(root, d), { recursive: true });
    // A link inside the allowed root pointing at another deployment's checkout in the data dir.
    symlinkSync(join(root, 'data/runtime/deployments/other/revisions/r1/src'), join(root, 'allowed/sneaky'));
    mkdirSync(join(root, 'allowed/data-link-parent'), { recursive: true });
  });
  afterAll(() => rmSync(root, { recursive: true, force: true }));
  const policy = () => ({
    allowedRoots: [join(root, 'allowed'), join(root, 'data')],
    forbiddenRoots: [join(root, 'data')],
  });

  it.each([
    ['https://github.com/a/b.git', 'remote'],
    ['http://127.0.0.1:9/x.git', 'remote'],
    ['ssh://git@github.com/a/b.git', 'remote'],
    ['git@github.com:a/b.git', 'remote'],
  ])('accepts remote %s', async (url, kind) => {
    expect((await checkRepoUrl(url, policy())).kind).toBe(kind);
  });

  it('accepts a local path or file:// URL under an allowed root, by real path', async () => {
    expect(await checkRepoUrl(join(root, 'allowed/repo'), policy())).toEqual({
      kind: 'local',
      path: join(root, 'allowed/repo'),
    });
    expect(await checkRepoUrl(`file://${join(root, 'allowed/repo')}`, policy())).toMatchObject({ kind: 'local' });
  });

  it.each([
    ['ext::sh -c touch% /tmp/pwned', /remote helper/],
    ['fd::3', /remote helper/],
    ['-uhelp', /git URL or an absolute path/],
    ['--upload-pack=touch /tmp/pwned', /git URL or an absolute path/],
    ['ssh://-oProxyCommand=touch%20x/a', /must not start with "-"/],
    ['ftp://h/x', /scheme is not allowed/],
    ['relative/path', /absolute path/],
    ['https://h/x\nfoo', /control characters/],
  ])('refuses %s', async (url, why) => {
    await expect(checkRepoUrl(url, policy())).rejects.toThrow(why);
  });

  it('refuses local repos outside the allowed roots, in the data dir, and through symlinks into it', async () => {
    await expect(checkRepoUrl(join(root, 'outside/repo'), policy())).rejects.toThrow(/outside the allowed roots/);
    await expect(checkRepoUrl(`file://${join(root, 'outside/repo')}`, policy())).rejects.toThrow(
      /outside the allowed roots/,
    );
    await expect(checkRepoUrl(join(root, 'data/runtime/deployments/other/revisions/r1/src'), policy())).rejects.toThrow(
      /data directory/,
    );
    await expect(checkRepoUrl(join(root, 'allowed/sneaky'), policy())).rejects.toThrow(/data directory/);
    await expect(checkRepoUrl(join(root, 'allowed/../outside/repo'), policy())).rejects.toThrow(
      /outside the allowed roots/,
    );
    await expect(checkRepoUrl('/etc', { allowedRoots: [], forbiddenRoots: [] })).rejects.toThrow(
      /allowed roots \(--allow-local-repos: none\)/,
    );
  });
});

describe('bwrapArgs', () => {
  const base = { hidden: ['/srv/app/.agentplane'], shared: ['/srv/app', '/srv/app/node_modules'] };
  const args = bwrapArgs(
    base,
    {
      rw: ['/srv/app/.agentplane/runtime/deployments/d/revisions/r1'],
      roOver: ['/srv/app/.agentplane/runtime/deployments/d/revisions/r1/src/node_modules'],
      tmpfs: ['/srv/app/.agentplane/runtime/deployments/d/revisions/r1/src/node_modules/.cache'],
      cwd: '/x',
    },
    ['--ro-bind', '/usr', '/usr'],
  );
  const at = (...seq: string[]) => args.findIndex((_, i) => seq.every((s, j) => args[i + j] === s));

  it('isolates PID, IPC, UTS and mounts; keeps the network; drops capabilities', () => {
    for (const flag of ['--unshare-all', '--share-net', '--die-with-parent', '--new-session'])
      expect(args).toContain(flag);
    expect(at('--cap-drop', 'ALL')).toBeGreaterThan(-1);
    expect(at('--proc', '/proc')).toBeGreaterThan(-1);
    expect(at('--tmpfs', '/tmp')).toBeGreaterThan(-1);
    expect(args.at(-1)).toBe('--');
  });

  it('hides the data dir after binding the package that contains it, then binds the revision on top', () => {
    const pkg = at('--ro-bind', '/srv/app', '/srv/app');
    const hide = at('--tmpfs', '/srv/app/.agentplane');
    const rev = at('--bind', '/srv/app/.agentplane/runtime/deployments/d/revisions/r1');
    const nm = at('--ro-bind', '/srv/app/.agentplane/runtime/deployments/d/revisions/r1/src/node_modules');
    const cache = at('--tmpfs', '/srv/app/.agentplane/runtime/deployments/d/revisions/r1/src/node_modules/.cache');
    expect(pkg).toBeGreaterThan(-1);
    expect([pkg < hide, hide < rev, rev < nm, nm < cache]).toEqual([true, true, true, true]);
    expect(args.filter((a) => a.startsWith('/srv/app/.agentplane')).every((a) => !a.endsWith('control-plane'))).toBe(
      true,
    );
  });

  it('with a user: no user namespace, setpriv to that uid inside, and 0755 parents made before each mount', () => {
    const user = { uid: 65534, gid: 65534, setpriv: '/usr/bin/setpriv' };
    const data = '/var/lib/ap/runtime/deployments/d/data';
    const as = bwrapArgs(
      { hidden: ['/var/lib/ap'], shared: ['/opt/agentplane/src'] },
      { rw: [data], cwd: data },
      ['--ro-bind', '/usr', '/usr'],
      { user },
    );
    const pos = (...seq: string[]) => as.findIndex((_, i) => seq.every((s, j) => as[i + j] === s));
    expect(as).not.toContain('--unshare-all');
    expect(as).not.toContain('--unshare-user');
    expect(as).toContain('--unshare-pid');
    expect(as.slice(as.indexOf('--') + 1)).toEqual([
      '/usr/bin/setpriv',
      '--reuid=65534',
      '--regid=65534',
      '--clear-groups',
      '--inh-caps=-all',
      '--bounding-set=-all',
      '--no-new-privs',
      '--',
    ]);
    // bwrap would copy a 0700 source parent's mode: every folder above a mount is made 0755 first, once, and
    // nothing inside a host mount (/usr) or already a mount point (the hidden data dir).
    const dirs = as.flatMap((a, i) => (a === '--dir' ? [as[i + 1]] : []));
    expect(dirs).toEqual([
      '/opt',
      '/opt/agentplane',
      '/var',
      '/var/lib',
      '/var/lib/ap/runtime',
      '/var/lib/ap/runtime/deployments',
      '/var/lib/ap/runtime/deployments/d',
    ]);
    expect(pos('--perms', '0755', '--dir', '/var/lib/ap/runtime/deployments/d')).toBeLessThan(
      pos('--bind', data, data),
    );
    expect(pos('--tmpfs', '/var/lib/ap')).toBeLessThan(pos('--dir', '/var/lib/ap/runtime'));
  });
});

describe('the launch chain: programs by absolute path, secrets only for the confined process', () => {
  it('finds programs in absolute PATH entries only (an empty entry or "." would be the working folder)', () => {
    const dir = mkdtempSync(join(tmpdir(), 'ap-path-'));
    try {
      writeFileSync(join(dir, 'bwrap'), '#!/bin/sh\n', { mode: 0o755 });
      writeFileSync(join(dir, 'plain'), 'not executable', { mode: 0o644 });
      expect(findInPath('bwrap', `:.:${dir}`)).toBe(join(dir, 'bwrap'));
      expect(findInPath('plain', dir)).toBeUndefined();
      expect(findInPath('bwrap', '.:bin')).toBeUndefined();
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  });

  it('hands bwrap the environment through --args (not argv), cleared first, values kept byte for byte', () => {
    expect(bwrapArgs({ hidden: [], shared: [] }, { cwd: '/' }, [], { argsFd: 5 }).slice(0, 2)).toEqual(['--args', '5']);
    const text = bwrapEnvArgs({ PATH: '/home/x/bin', ODD: 'a b\n"c"=' }).toString();
    expect(text.split('\0')).toEqual([
      '--clearenv',
      '--setenv',
      'PATH',
      '/home/x/bin',
      '--setenv',
      'ODD',
      'a b\n"c"=',
      '',
    ]);
  });

  it.each([
    ['LD_PRELOAD', true],
    ['LD_', true],
    ['GCONV_PATH', true],
    ['BASH_ENV', true],
    ['ENV', true],
    ['IFS', true],
    ['NODE_OPTIONS', true],
    ['PATH', false],
    ['OPENAI_API_KEY', false],
    ['LDAP_URL', false],
    ['constructor', false],
    ['__proto__', false],
  ])('reservedEnvName(%s) refuses: %s', (name, refused) => {
    expect(reservedEnvName(name) !== undefined).toBe(refused);
    if (refused) expect(reservedEnvName(name)).toContain(`secret ${name} is reserved`);
  });
});

describe('retention', () => {
  it.each([
    { keep: 2, protect: [], want: ['r1', 'r2'] },
    { keep: 2, protect: ['r1'], want: ['r2'] },
    { keep: 0, protect: ['r4'], want: ['r3', 'r2', 'r1'] },
    { keep: 10, protect: [], want: [] },
  ])('buildsToRemove keep=$keep protect=$protect', ({ keep, protect, want }) => {
    const builds = [1, 2, 3, 4].map((n) => ({ revision: `r${n}`, builtAt: n * 1000 }));
    expect(buildsToRemove(builds, keep, new Set(protect)).sort()).toEqual([...want].sort());
  });

  it.each([
    { max: 100, keep: undefined, want: [] },
    { max: 60, keep: undefined, want: ['old'] },
    { max: 30, keep: undefined, want: ['old', 'mid'] },
    { max: 30, keep: 'old', want: ['mid', 'new'] },
  ])('cacheEvictions max=$max keep=$keep', ({ max, keep, want }) => {
    const entries = [
      { name: 'new', bytes: 30, usedAt: 3 },
      { name: 'old', bytes: 30, usedAt: 1 },
      { name: 'mid', bytes: 30, usedAt: 2 },
    ];
    expect(cacheEvictions(entries, max, keep)).toEqual(want);
  });
});

describe('trimInstallCache', () => {
  it('evicts least recently used entries beyond the bound, never the fresh one', async () => {
    const dir = mkdtempSync(join(tmpdir(), 'ap-cache-'));
    try {
      const names = ['a', 'b', 'c'].map((c) => c.repeat(32));
      names.forEach((name, i) => {
        mkdirSync(join(dir, name, 'pkg'), { recursive: true });
        writeFileSync(join(dir, name, 'pkg', 'index.js'), Buffer.alloc(200 * 1024));
        utimesSync(join(dir, name), new Date(1000 * (i + 1)), new Date(1000 * (i + 1))); // a oldest, c newest
      });
      // Bound for about two entries; the oldest (a) is "fresh" here, so b goes instead.
      const evicted = await trimInstallCache(dir, join(dir, names[0]!), 450 * 1024);
      expect(evicted).toEqual([names[1]]);
      expect(existsSync(join(dir, names[0]!))).toBe(true);
      expect(existsSync(join(dir, names[1]!))).toBe(false);
      expect(existsSync(join(dir, names[2]!))).toBe(true);
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  });
});

describe('LogWriter caps', () => {
  it('stores at most the cap, says so once, keeps the tail, cuts endless lines and redacts', async () => {
    const stored: string[] = [];
    const sink = { append: async (_r: unknown, _t: unknown, lines: string[]) => void stored.push(...lines) };
    const budget = new LogBudget({ maxLines: 100, maxBytes: 1_000_000 });
    const log = new LogWriter(
      sink,
      { namespace: 'n', deployment: 'd', deploymentId: 'd', revision: 'r' },
      'build',
      budget,
    );
    const lines = Array.from({ length: 5000 }, (_, i) => `line ${i} https://u:s3cret@h/x`);
    await log.follow(Readable.from([`${lines.join('\n')}\n`, 'y'.repeat(100_000)]));
    await log.flush();
    expect(stored.length).toBe(101);
    expect(stored.at(-1)).toMatch(/log truncated/);
    expect(stored.join('\n')).not.toContain('s3cret');
    expect(log.tail.at(-1)!.length).toBeLessThan(9000);
    expect(log.tail.some((l) => l.startsWith('line 4999'))).toBe(true);
    // a second writer of the same revision log shares the budget
    new LogWriter(sink, { namespace: 'n', deployment: 'd', deploymentId: 'd', revision: 'r' }, 'build', budget).line(
      'more',
    );
    await new Promise((r) => setTimeout(r, 150));
    expect(stored.length).toBe(101);
  });
});

import { resolve } from 'node:path';
import { describe, expect, it } from 'vitest';
import { parseDevConfig } from '../../src/dev/config.ts';
import { UsageError } from '../../src/lib/cli-args.ts';

describe('agentplane dev flags', () => {
  it('uses defaults, then environment, then flags', () => {
    expect(parseDevConfig([], {})).toMatchObject({
      host: '127.0.0.1',
      port: 8080,
      dataDir: resolve('.agentplane'),
      databaseUrl: undefined,
    });
    const env = {
      AGENTPLANE_PORT: '9000',
      AGENTPLANE_DATA_DIR: '/tmp/x',
      AGENTPLANE_DATABASE_URL: 'postgres://u@h:5432/db',
    };
    expect(parseDevConfig([], env)).toMatchObject({
      port: 9000,
      dataDir: '/tmp/x',
      databaseUrl: 'postgres://u@h:5432/db',
    });
    expect(parseDevConfig(['--port', '0', '--data-dir', '/tmp/y'], env)).toMatchObject({ port: 0, dataDir: '/tmp/y' });
    expect(parseDevConfig(['--help'], {})).toBeNull();
    // PORT as the other commands read it (and platforms set it); AGENTPLANE_PORT first when both are set.
    expect(parseDevConfig([], { PORT: '9100' })).toMatchObject({ port: 9100 });
    expect(parseDevConfig([], { PORT: '9100', AGENTPLANE_PORT: '9000' })).toMatchObject({ port: 9000 });
  });

  it('parses the isolation flags: sandbox, local repo roots (default: the current directory), retention, deadline', () => {
    expect(parseDevConfig([], {})).toMatchObject({
      sandbox: 'auto',
      allowLocalRepos: [process.cwd()],
      buildTimeoutSecs: 1800,
      keepBuilds: 5,
      installCacheMaxMb: 2048,
    });
    const env = { AGENTPLANE_SANDBOX: 'none', AGENTPLANE_ALLOW_LOCAL_REPOS: '/srv/a, /srv/b' };
    expect(parseDevConfig([], env)).toMatchObject({ sandbox: 'none', allowLocalRepos: ['/srv/a', '/srv/b'] });
    expect(
      parseDevConfig(
        [
          '--sandbox',
          'bwrap',
          '--allow-local-repos',
          '/x',
          '--keep-builds',
          '0',
          '--build-timeout',
          '60',
          '--install-cache-max-mb',
          '10',
        ],
        env,
      ),
    ).toMatchObject({
      sandbox: 'bwrap',
      allowLocalRepos: ['/x'],
      keepBuilds: 0,
      buildTimeoutSecs: 60,
      installCacheMaxMb: 10,
    });
    expect(() => parseDevConfig(['--sandbox', 'docker'], {})).toThrow(/--sandbox/);
    expect(() => parseDevConfig(['--keep-builds', '-1'], {})).toThrow(/--keep-builds/);
  });

  it('serves deployments on ports of their own: a range (default 8100-8999) or auto', () => {
    expect(parseDevConfig([], {})!.agentPorts).toEqual({ from: 8100, to: 8999 });
    expect(parseDevConfig(['--agent-ports', 'auto'], {})!.agentPorts).toBe('auto');
    expect(parseDevConfig([], { AGENTPLANE_AGENT_PORTS: '9000-9009' })!.agentPorts).toEqual({ from: 9000, to: 9009 });
    for (const bad of ['9009-9000', '0-10', '8100-70000', '8100', 'many', '8100-8200-8300'])
      expect(() => parseDevConfig(['--agent-ports', bad], {})).toThrow(/--agent-ports/);
  });

  it('rejects bad values naming the flag', () => {
    expect(() => parseDevConfig(['--port', '70000'], {})).toThrow(/--port/);
    expect(() => parseDevConfig(['--database-url', 'not a url'], {})).toThrow(/--database-url/);
    expect(() => parseDevConfig(['--health-timeout', '-1'], {})).toThrow(/--health-timeout/);
    // Root is what the sandbox's own uid exists to avoid.
    expect(() => parseDevConfig(['--sandbox-uid', '0'], {})).toThrow(/--sandbox-uid/);
    expect(() => parseDevConfig(['--sandbox-uid', 'nobody'], {})).toThrow(/--sandbox-uid/);
    expect(parseDevConfig([], {})).toMatchObject({ sandboxUid: 65534 });
    expect(parseDevConfig(['--sandbox-uid', '61000'], {})).toMatchObject({ sandboxUid: 61000 });
    expect(() => parseDevConfig(['--bogus'], {})).toThrow(UsageError);
    expect(() => parseDevConfig([], { AGENTPLANE_BOOTSTRAP_API_KEY: 'short' })).toThrow(/AGENTPLANE_BOOTSTRAP_API_KEY/);
  });

  it('parses build slots, memory limits and quotas, naming the flag of a bad value', () => {
    expect(parseDevConfig([], {})).toMatchObject({
      maxConcurrentBuilds: 2,
      defaultMemoryLimitMb: 2048,
      quotas: { deployments: 25, revisionsPerHour: 60 },
    });
    expect(parseDevConfig([], {})!.maxBuildsPerWorkspace).toBeUndefined();
    expect(parseDevConfig([], {})!.cgroupParent).toBeUndefined();
    expect(
      parseDevConfig(
        ['--max-concurrent-builds', '4', '--max-builds-per-workspace', '3', '--default-memory-limit-mb', '0'],
        { AGENTPLANE_CGROUP_PARENT: '/sys/fs/cgroup/agentplane', AGENTPLANE_QUOTA_DEPLOYMENTS: '2' },
      ),
    ).toMatchObject({
      maxConcurrentBuilds: 4,
      maxBuildsPerWorkspace: 3,
      defaultMemoryLimitMb: 0,
      cgroupParent: '/sys/fs/cgroup/agentplane',
      quotas: { deployments: 2 },
    });
    expect(() => parseDevConfig(['--max-concurrent-builds', '0'], {})).toThrow(/--max-concurrent-builds/);
    expect(() => parseDevConfig(['--max-builds-per-workspace', 'x'], {})).toThrow(/--max-builds-per-workspace/);
    expect(() => parseDevConfig(['--default-memory-limit-mb', '-5'], {})).toThrow(/--default-memory-limit-mb/);
    expect(() => parseDevConfig(['--default-memory-limit-mb', '256'], {})).toThrow(
      /--default-memory-limit-mb: must be 0 \(none\) or at least 512/,
    );
    expect(() => parseDevConfig(['--max-processes', '-1'], {})).toThrow(/--max-processes/);
    expect(() => parseDevConfig(['--disk-limit-mb', 'lots'], {})).toThrow(/--disk-limit-mb/);
    expect(() => parseDevConfig(['--quota-revisions-per-hour', '-1'], {})).toThrow(/--quota-revisions-per-hour/);
  });

  it('reads --agent-executor-threads (unset: each agent server chooses), naming the flag of a bad value', () => {
    expect(parseDevConfig([], {})!.agentExecutorThreads).toBeUndefined();
    expect(parseDevConfig(['--agent-executor-threads', '0'], {})!.agentExecutorThreads).toBe(0);
    expect(parseDevConfig([], { AGENTPLANE_AGENT_EXECUTOR_THREADS: '2' })!.agentExecutorThreads).toBe(2);
    for (const bad of ['-1', '65', 'two', '1.5'])
      expect(() => parseDevConfig(['--agent-executor-threads', bad], {})).toThrow(/--agent-executor-threads/);
  });
});

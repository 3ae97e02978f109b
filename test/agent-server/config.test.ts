// Flags win over environment variables, which win over defaults; bad values are usage errors naming the flag.
import { fstatSync, mkdtempSync, openSync, rmSync, writeFileSync } from 'node:fs';
import os, { tmpdir } from 'node:os';
import { join } from 'node:path';
import v8 from 'node:v8';
import { describe, expect, it } from 'vitest';
import { parseAgentServerConfig } from '../../src/agent-server/config.ts';
import { defaultPostgresPoolMaxSize, executorYoungMb, postgresPoolSizes } from '../../src/agent-server/sizing.ts';
import { UsageError } from '../../src/lib/cli-args.ts';

describe('agent-server config', () => {
  it('uses the documented defaults', () => {
    const c = parseAgentServerConfig([], {}, '/srv/app')!;
    expect(c).toEqual({
      configPath: '/srv/app/langgraph.json',
      host: '127.0.0.1',
      port: 8000,
      databaseUrl: undefined,
      dataDir: '/srv/app/.agentplane/agent-server',
      jobsPerWorker: 10,
      // From the usable cores (table below).
      postgresPoolMaxSize: expect.any(Number),
      jobTimeoutSecs: 3600,
      shutdownGraceSecs: 20,
      leaseSecs: 30,
      databaseWaitSecs: 60,
      executorThreads: os.availableParallelism() > 1 ? 1 : 0,
      executorIdleSecs: 30,
      // Sized from this process's memory budget (its own table is in executor-young-generation.test.ts).
      executorYoungMb: executorYoungMb(
        v8.getHeapStatistics().heap_size_limit,
        process.constrainedMemory(),
        os.totalmem(),
      ),
      logLevel: 'info',
      streamRetentionSecs: 600,
      streamStallSecs: 60,
      webhookAllow: [],
      cronPollMs: 1000,
      langsmith: null,
    });
    // Stream events on Redis: --redis-url or REDIS_URI (the platform's name); anything but redis(s):// is refused.
    expect(parseAgentServerConfig([], { REDIS_URI: 'redis://r:6379/2' })!.redisUrl).toBe('redis://r:6379/2');
    expect(parseAgentServerConfig(['--redis-url', 'rediss://u:p@r:6380'], { REDIS_URI: 'redis://x' })!.redisUrl).toBe(
      'rediss://u:p@r:6380',
    );
    expect(() => parseAgentServerConfig(['--redis-url', 'http://r:6379'], {})).toThrow(/--redis-url: must start with/);
    // A supervisor's held listening socket: --listen-fd, a flag only (no variable a deployment's secrets could set),
    // never one of the standard streams.
    expect(parseAgentServerConfig(['--listen-fd', '4'], {})!.listenFd).toBe(4);
    expect(parseAgentServerConfig([], { LISTEN_FD: '4', AGENTPLANE_LISTEN_FD: '4' })!.listenFd).toBeUndefined();
    expect(() => parseAgentServerConfig(['--listen-fd', '1'], {})).toThrow(/--listen-fd/);
    // LangSmith (feedback events) as the langsmith client reads it.
    expect(parseAgentServerConfig([], { LANGSMITH_API_KEY: 'k1' })!.langsmith).toEqual({
      apiKey: 'k1',
      endpoint: 'https://api.smith.langchain.com',
    });
    expect(
      parseAgentServerConfig([], { LANGCHAIN_API_KEY: 'k2', LANGSMITH_ENDPOINT: 'https://eu.api.smith.langchain.com' })!
        .langsmith,
    ).toEqual({ apiKey: 'k2', endpoint: 'https://eu.api.smith.langchain.com' });
    expect(() => parseAgentServerConfig([], { LANGSMITH_API_KEY: 'k', LANGSMITH_ENDPOINT: 'ftp://x' })).toThrow(
      /LANGSMITH_ENDPOINT/,
    );
    expect(parseAgentServerConfig(['--stream-retention', '30'], { AGENTPLANE_STREAM_STALL_SECS: '5' })!).toMatchObject({
      streamRetentionSecs: 30,
      streamStallSecs: 5,
    });
    expect(() => parseAgentServerConfig(['--stream-retention', '0'], {})).toThrow(/--stream-retention/);
    expect(parseAgentServerConfig(['--webhook-allow', 'hooks.example.com, *.corp.example'], {})!.webhookAllow).toEqual([
      'hooks.example.com',
      '*.corp.example',
    ]);
    expect(() => parseAgentServerConfig(['--webhook-allow', 'http://x/'], {})).toThrow(/--webhook-allow/);
    // The URL A2A agent cards name: an http(s) URL, flag or AGENTPLANE_PUBLIC_AGENT_URL.
    expect(parseAgentServerConfig([], { AGENTPLANE_PUBLIC_AGENT_URL: 'https://a.example.com/api' })!.publicUrl).toBe(
      'https://a.example.com/api',
    );
    expect(() => parseAgentServerConfig(['--public-url', 'javascript:alert(1)'], {})).toThrow(/--public-url/);
    expect(() => parseAgentServerConfig(['--public-url', 'https://a.example.com/?x=1'], {})).toThrow(/--public-url/);
    expect(parseAgentServerConfig(['--executor-threads', '0'], {})!.executorThreads).toBe(0);
    expect(parseAgentServerConfig([], { AGENTPLANE_EXECUTOR_THREADS: '2' })!.executorThreads).toBe(2);
  });

  it("sizes the Postgres pools from the process's budget (LANGGRAPH_POSTGRES_POOL_MAX_SIZE)", () => {
    // Twice the usable cores, within 4..20; a CPU quota counts rounded up.
    expect([0.5, 1, 1.5, 2, 3, 8, 10, 64].map(defaultPostgresPoolMaxSize)).toEqual([4, 4, 4, 4, 6, 16, 20, 20]);
    // This process's (its usable cores depend on the machine and its cgroup).
    expect([4, 6, 8, 10, 12, 14, 16, 18, 20]).toContain(parseAgentServerConfig([], {})!.postgresPoolMaxSize);
    // The platform's variable, and the flag over it; fewer than 2 or not a whole number is a usage error.
    expect(parseAgentServerConfig([], { LANGGRAPH_POSTGRES_POOL_MAX_SIZE: '7' })!.postgresPoolMaxSize).toBe(7);
    expect(
      parseAgentServerConfig(['--postgres-pool-max-size', '3'], { LANGGRAPH_POSTGRES_POOL_MAX_SIZE: '7' })!
        .postgresPoolMaxSize,
    ).toBe(3);
    for (const bad of ['1', '0', '2.5', 'many'])
      expect(() => parseAgentServerConfig([], { LANGGRAPH_POSTGRES_POOL_MAX_SIZE: bad })).toThrow(
        /--postgres-pool-max-size \(LANGGRAPH_POSTGRES_POOL_MAX_SIZE\)/,
      );
    // Shared out evenly between the HTTP thread and the executor threads, the HTTP thread taking the remainder;
    // at least one each, even when the budget is smaller than the threads.
    expect(postgresPoolSizes(4, 1)).toEqual({ main: 2, executor: 2 });
    expect(postgresPoolSizes(5, 1)).toEqual({ main: 3, executor: 2 });
    expect(postgresPoolSizes(2, 1)).toEqual({ main: 1, executor: 1 });
    expect(postgresPoolSizes(10, 3)).toEqual({ main: 4, executor: 2 });
    expect(postgresPoolSizes(6, 0)).toEqual({ main: 6, executor: 6 });
    expect(postgresPoolSizes(2, 4)).toEqual({ main: 1, executor: 1 });
  });

  it('reads the environment and lets flags override it', () => {
    const env = {
      PORT: '9001',
      POSTGRES_URI: 'postgres://a@h/db',
      N_JOBS_PER_WORKER: '3',
      BG_JOB_TIMEOUT_SECS: '5',
      LOG_LEVEL: 'DEBUG',
    };
    const fromEnv = parseAgentServerConfig([], env, '/x')!;
    expect(fromEnv).toMatchObject({
      port: 9001,
      databaseUrl: 'postgres://a@h/db',
      jobsPerWorker: 3,
      jobTimeoutSecs: 5,
      logLevel: 'debug',
    });
    const both = parseAgentServerConfig(
      ['--port', '7000', '--database-url', 'postgresql://b@h/db2', '--config', 'g/lg.json'],
      { ...env, DATABASE_URI: 'postgres://ignored@h/x' },
      '/x',
    )!;
    expect(both).toMatchObject({ port: 7000, databaseUrl: 'postgresql://b@h/db2', configPath: '/x/g/lg.json' });
    // DATABASE_URI is read before POSTGRES_URI.
    expect(
      parseAgentServerConfig([], { DATABASE_URI: 'postgres://first@h/a', POSTGRES_URI: 'postgres://second@h/b' })!
        .databaseUrl,
    ).toBe('postgres://first@h/a');
  });

  it("reads langgraph.json's env (object or .env file) under the process's own variables and the flags", () => {
    const dir = mkdtempSync(join(tmpdir(), 'ap-config-env-'));
    try {
      const json = (env: unknown) =>
        writeFileSync(join(dir, 'langgraph.json'), JSON.stringify({ graphs: { a: './a.ts:graph' }, env }));
      json({
        LANGGRAPH_CONFIG: '{"a": {"configurable": {"model": "m1"}}}',
        N_JOBS_PER_WORKER: 4,
        LOG_LEVEL: 'debug',
        PORT: '9100',
        AGENTPLANE_GRAPH_CONFIG: '/elsewhere/langgraph.json',
      });
      const c = parseAgentServerConfig([], { LOG_LEVEL: 'warn' }, dir)!;
      expect(c).toMatchObject({
        configPath: join(dir, 'langgraph.json'),
        graphDefaults: { a: { configurable: { model: 'm1' } } },
        jobsPerWorker: 4,
        logLevel: 'warn',
        port: 9100,
      });
      expect(parseAgentServerConfig(['--port', '9200', '--jobs-per-worker', '2'], {}, dir)).toMatchObject({
        port: 9200,
        jobsPerWorker: 2,
      });
      writeFileSync(join(dir, 'server.env'), 'N_JOBS_PER_WORKER=6\nREDIS_URI=redis://r:6379/1\n');
      json('./server.env');
      expect(parseAgentServerConfig([], {}, dir)).toMatchObject({ jobsPerWorker: 6, redisUrl: 'redis://r:6379/1' });
      // Bad values from the file are usage errors naming the flag, as from the environment.
      json({ N_JOBS_PER_WORKER: 'many' });
      expect(() => parseAgentServerConfig([], {}, dir)).toThrow(/--jobs-per-worker/);
      // An unreadable env file is reported when the graphs load; here it is only skipped.
      json('./missing.env');
      expect(parseAgentServerConfig([], {}, dir)!.jobsPerWorker).toBe(10);
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  });

  it('rejects bad values and unknown flags with a usage error naming the flag', () => {
    expect(() => parseAgentServerConfig(['--port', 'eighty'], {})).toThrow(/--port/);
    expect(() => parseAgentServerConfig(['--jobs-per-worker', '0'], {})).toThrow(/--jobs-per-worker/);
    expect(() => parseAgentServerConfig(['--executor-threads', '-1'], {})).toThrow(/--executor-threads/);
    expect(() => parseAgentServerConfig(['--database-url', 'mysql://x'], {})).toThrow(/--database-url/);
    expect(() => parseAgentServerConfig(['--bogus'], {})).toThrow(UsageError);
    expect(parseAgentServerConfig(['--help'], {})).toBeNull();
  });
});

describe('--secrets-fd', () => {
  /** A descriptor to read `text` from (a file: the reading is the same as from the runtime's pipe). */
  function fdWith(text: string): number {
    const dir = mkdtempSync(join(tmpdir(), 'ap-secrets-fd-'));
    writeFileSync(join(dir, 's'), text);
    const fd = openSync(join(dir, 's'), 'r');
    rmSync(dir, { recursive: true, force: true });
    return fd;
  }

  it('configures the server from the descriptor and leaves the environment it was given untouched', () => {
    const env: NodeJS.ProcessEnv = { OWN: '1' };
    const fd = fdWith(JSON.stringify({ LANGGRAPH_AES_KEY: 'k'.repeat(32), DATABASE_URI: 'postgres://u:pw@h/db' }));
    const c = parseAgentServerConfig(['--secrets-fd', String(fd)], env)!;
    expect(c.databaseUrl).toBe('postgres://u:pw@h/db');
    expect(c.dataKeyring).toBeDefined();
    expect(env).toEqual({ OWN: '1' });
    expect(() => fstatSync(fd)).toThrow(/EBADF/); // closed once read
  });

  it.each([
    ['not json', /--secrets-fd: not a JSON object/],
    ['["a"]', /--secrets-fd: not a JSON object of variable names to strings/],
    ['{"A": 1}', /--secrets-fd: not a JSON object of variable names to strings/],
    ['{"BAD NAME": "x"}', /--secrets-fd: not a JSON object of variable names to strings/],
  ])('refuses %s, naming the flag', (text, message) => {
    expect(() => parseAgentServerConfig(['--secrets-fd', String(fdWith(text))], {})).toThrow(message);
  });

  it('refuses a descriptor that is not one', () => {
    expect(() => parseAgentServerConfig(['--secrets-fd', '1'], {})).toThrow(UsageError);
    expect(() => parseAgentServerConfig(['--secrets-fd', '987654'], {})).toThrow(/--secrets-fd 987654: EBADF/);
  });
});

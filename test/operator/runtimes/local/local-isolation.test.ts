// Attacks on the local runtime by a workspace: what its build steps and agent server can see and do. Real git
// repositories, real npm, real bubblewrap (the sandbox cases are skipped where bwrap does not work), real agent
// servers. Each case would pass for the attacker on a runtime without allow-listed environment and sandbox.
import { execFileSync, spawnSync } from 'node:child_process';
import {
  chmodSync,
  existsSync,
  mkdirSync,
  mkdtempSync,
  readdirSync,
  readFileSync,
  readlinkSync,
  realpathSync,
  rmSync,
  statSync,
  writeFileSync,
} from 'node:fs';
import { createServer, type Server } from 'node:http';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { pino } from 'pino';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { LocalRuntime, PACKAGE_DIR } from '../../../../src/operator/runtimes/local/index.ts';
import { detectSandbox, sharedTrees, type Sandbox } from '../../../../src/operator/runtimes/local/sandbox.ts';
import type {
  BuildSpec,
  BuildStatus,
  LogType,
  RevisionLogSink,
  RevisionRef,
  ServerStatus,
} from '../../../../src/operator/runtimes/types.ts';
import { fullGc } from '../../../support/gc.ts';
import { hasTool } from '../../../support/system-tools.ts';
import { makeExampleRepo, type ExampleRepo } from '../../helpers/example-repo.ts';

// bubblewrap must be installed (CI installs it); where the kernel refuses its namespaces, the sandbox cases skip.
const BWRAP =
  hasTool('bwrap', 'the sandbox cases of test/operator/runtimes/local/local-isolation.test.ts') &&
  spawnSync('bwrap', ['--unshare-all', '--share-net', '--ro-bind', '/', '/', 'true']).status === 0;

class MemoryLogs implements RevisionLogSink {
  lines = new Map<string, string[]>();
  async append(ref: RevisionRef, type: LogType, lines: string[]) {
    const k = `${ref.deploymentId}/${ref.revision}/${type}`;
    this.lines.set(k, [...(this.lines.get(k) ?? []), ...lines]);
  }
  of(ref: RevisionRef, type: LogType): string[] {
    return this.lines.get(`${ref.deploymentId}/${ref.revision}/${type}`) ?? [];
  }
  all(): string {
    return [...this.lines.values()].flat().join('\n');
  }
}

const A = {
  namespace: 'default',
  deployment: 'alpha',
  deploymentId: 'dep-a',
  tenantId: 'tenant-a',
  access: 'public' as const,
};
const B = {
  namespace: 'default',
  deployment: 'beta',
  deploymentId: 'dep-b',
  tenantId: 'tenant-b',
  access: 'public' as const,
};
const SECRET_A = 'secret-of-alpha-7c1e';
const ADMIN_KEY = 'leaky-admin-key-0123456789';

let root: string;
let repos: string;
let dataRoot: string;
let repo: ExampleRepo;
let logs: MemoryLogs;
let logged = '';
let sandbox: Sandbox;
let runtime: LocalRuntime;
const saved = { key: process.env.AGENTPLANE_BOOTSTRAP_API_KEY, db: process.env.AGENTPLANE_DATABASE_URL };

function newRuntime(extra: Partial<ConstructorParameters<typeof LocalRuntime>[0]> = {}): LocalRuntime {
  return new LocalRuntime({
    agentExecutorThreads: 0,
    dataDir: join(dataRoot, 'runtime'),
    protectedDirs: [dataRoot],
    allowLocalRepos: [repos],
    logs,
    logger: pino(
      { level: 'debug' },
      {
        write: (s: string) => {
          logged += s;
        },
      },
    ),
    sandbox,
    keepBuilds: 1,
    maxStepOutputBytes: 1024 * 1024,
    logLimits: { maxLines: 2000, maxBytes: 256 * 1024 },
    healthTimeoutMs: 60_000,
    stopGraceMs: 2000,
    ...extra,
  });
}

// The limit is a deadline for a build or start that hangs, not a speed check: a build's real npm ci in the sandbox took
// over 90 s when the suite ran with 0.83 cores' worth of CPU (scripts/cpu-quota.sh), the slow hours' throughput.
async function settle<T extends { phase: string }>(
  ask: () => Promise<T>,
  phases: string[],
  limitMs = 240_000,
): Promise<T> {
  const until = Date.now() + limitMs;
  for (;;) {
    const s = await ask();
    if (phases.includes(s.phase)) return s;
    if (Date.now() > until) throw new Error(`still ${s.phase}`);
    await new Promise((r) => setTimeout(r, 100));
  }
}

function spec(dep: typeof A, revision: string, more: Partial<BuildSpec> = {}): BuildSpec {
  return { ...dep, revision, repoUrl: repo.path, repoRef: 'main', graphConfigPath: 'langgraph.json', ...more };
}
const build = (s: BuildSpec, rt = runtime): Promise<BuildStatus> => settle(() => rt.build(s), ['Succeeded', 'Failed']);
const deploy = (dep: typeof A, revision: string, env: Record<string, string>): Promise<ServerStatus> =>
  settle(() => runtime.deploy({ ...dep, revision, graphConfigPath: 'langgraph.json', env }), ['Ready', 'Failed']);

/** Environments of live processes holding `marker`, as NAME=value lists. */
function environsWith(marker: string): string[][] {
  const out: string[][] = [];
  for (const pid of readdirSync('/proc').filter((p) => /^\d+$/.test(p))) {
    try {
      const vars = readFileSync(`/proc/${pid}/environ`, 'utf8').split('\0');
      if (vars.some((v) => v.includes(marker))) out.push(vars);
    } catch {
      // gone
    }
  }
  return out;
}

beforeAll(async () => {
  root = mkdtempSync(join(tmpdir(), 'ap-isolation-'));
  // Shared read-only below (as a checkout is, 0755): as root, the sandbox's user (uid 65534) must be able to read it.
  chmodSync(root, 0o755);
  repos = join(root, 'repos');
  dataRoot = join(root, 'data');
  mkdirSync(join(dataRoot, 'control-plane'), { recursive: true });
  writeFileSync(join(dataRoot, 'control-plane', 'store.db'), 'CONTROL-PLANE-DB-CONTENT');
  repo = makeExampleRepo(repos);
  logs = new MemoryLogs();
  // What an operator typically has in the dev process's environment.
  process.env.AGENTPLANE_BOOTSTRAP_API_KEY = ADMIN_KEY;
  process.env.AGENTPLANE_DATABASE_URL = 'postgres://postgres:pg-superuser-pw@127.0.0.1:5432/postgres';
  // `root` holds the data dir and is mounted read-only like agentplane's own folder, as when the data dir is
  // ./.agentplane inside the checkout: the data dir must still be hidden.
  sandbox = BWRAP
    ? (await detectSandbox('bwrap', { hidden: [dataRoot], shared: [...sharedTrees(PACKAGE_DIR), root] })).sandbox
    : (await detectSandbox('none', { hidden: [], shared: [] })).sandbox;
  runtime = newRuntime();
});

afterAll(async () => {
  await runtime?.shutdown();
  for (const [k, v] of [
    ['AGENTPLANE_BOOTSTRAP_API_KEY', saved.key],
    ['AGENTPLANE_DATABASE_URL', saved.db],
  ] as const) {
    if (v === undefined) delete process.env[k];
    else process.env[k] = v;
  }
  rmSync(root, { recursive: true, force: true });
});

describe('local runtime isolation', () => {
  it("gives build steps and agent servers no AGENTPLANE_* variable and no other deployment's secret", async () => {
    const a1 = spec(A, 'a-r1', { buildCommand: 'env | sort' });
    expect(await build(a1)).toMatchObject({ phase: 'Succeeded' });
    const buildLog = logs.of(a1, 'build').join('\n');
    expect(buildLog).toContain(`HOME=${join(dataRoot, 'runtime/deployments/dep-a/home')}`);
    expect(buildLog).not.toMatch(/^AGENTPLANE_/m);
    expect(buildLog).not.toContain(ADMIN_KEY);
    expect(buildLog).not.toContain('pg-superuser-pw');

    expect(await deploy(A, 'a-r1', { SECRET_A })).toEqual({ phase: 'Ready' });
    const envs = environsWith(SECRET_A);
    expect(envs.length).toBeGreaterThan(0);
    for (const vars of envs) {
      expect(vars.filter((v) => v.startsWith('AGENTPLANE_'))).toEqual([]);
      expect(vars).toContain(`HOME=${join(dataRoot, 'runtime/deployments/dep-a/home')}`);
    }

    // Another deployment's build step sees nothing of A's secret.
    const b0 = spec(B, 'b-r0', { installCommand: 'env | sort' });
    expect(await build(b0)).toMatchObject({ phase: 'Succeeded' });
    const bLog = logs.of(b0, 'build').join('\n');
    expect(bLog).not.toContain(SECRET_A);
    expect(bLog).not.toContain(ADMIN_KEY);
  }, 300_000);

  it.skipIf(!BWRAP)(
    'keeps a sandboxed build step away from other processes, the data dir, the control plane store and other deployments',
    async () => {
      const depA = join(dataRoot, 'runtime/deployments/dep-a');
      const attack = [
        `echo "PIDS=[$(ls /proc | grep -E '^[0-9]+$' | wc -l)]"`,
        `(cat /proc/${process.pid}/environ >/dev/null 2>&1 && echo "TEST=LEAKED") || echo "TEST=hidden"`,
        `(cat /proc/[0-9]*/environ 2>/dev/null | tr '\\0' '\\n' | grep -q ${SECRET_A.slice(0, 12)} && echo "A-ENV=LEAKED") || echo "A-ENV=hidden"`,
        `echo "ROOT=[$(ls -A ${dataRoot} | tr '\\n' ' ')]"`,
        `echo "DEPLOYMENTS=[$(ls -A ${dataRoot}/runtime/deployments | tr '\\n' ' ')]"`,
        `cat ${dataRoot}/control-plane/store.db 2>&1 | head -c 200; echo`,
        `cat ${depA}/revisions/a-r1/src/package.json 2>&1 | head -c 200; echo`,
        `ls ${dataRoot}/runtime/install-cache 2>&1 | head -c 200; echo`,
        `echo "KEY=[$AGENTPLANE_BOOTSTRAP_API_KEY]"`,
        `echo "PKG=[$(ls -A ${PACKAGE_DIR} | tr '\n' ' ')]"`,
        `echo "DIST=[$(ls -A ${PACKAGE_DIR}/dist 2>/dev/null | tr '\n' ' ')]"`,
        'echo ATTACK-DONE',
      ].join('; ');
      const b1 = spec(B, 'b-r1', { installCommand: attack });
      expect(await build(b1)).toMatchObject({ phase: 'Succeeded' });
      const out = logs.of(b1, 'build').slice(1).join('\n'); // line 0 echoes the command itself
      expect(out).toContain('ATTACK-DONE');
      expect(out).toContain('TEST=hidden');
      expect(out).toContain('A-ENV=hidden');
      expect(Number(/PIDS=\[(\d+)\]/.exec(out)![1])).toBeLessThan(10); // only the sandbox's own processes
      expect(out).toContain('ROOT=[runtime ]'); // only the path to its own folders
      expect(out).toContain('DEPLOYMENTS=[dep-b ]');
      expect(out).not.toContain('CONTROL-PLANE-DB-CONTENT');
      expect(out).not.toContain('agentplane-example-agent');
      expect(out).toContain('KEY=[]');
      // Not agentplane's whole checkout (.env, data): its code, dependencies and, when built, the bundle of its code
      // (dist/cli, not the console build next to it).
      const bundled = existsSync(join(PACKAGE_DIR, 'dist/cli'));
      expect(out).toContain(
        bundled ? 'PKG=[bin dist node_modules package.json src ]' : 'PKG=[bin node_modules package.json src ]',
      );
      expect(out).toContain(bundled ? 'DIST=[cli ]' : 'DIST=[]');
      // A's server still runs: it was there to be found.
      expect(environsWith(SECRET_A).length).toBeGreaterThan(0);
    },
    60_000,
  );

  it.skipIf(!BWRAP)(
    'does not let build_command change node_modules shared with the install cache',
    async () => {
      const target = 'node_modules/zod/package.json';
      const a2 = spec(A, 'a-r2', {
        repoRef: 'v2',
        buildCommand: `(echo pwned >> ${target} && echo WROTE-SHARED) || echo WRITE-REFUSED; echo x > node_modules/.cache/probe && echo CACHE-WRITABLE`,
      });
      expect(await build(a2)).toMatchObject({ phase: 'Succeeded' });
      const out = logs
        .of(a2, 'build')
        .filter((l) => !l.startsWith('$ (echo'))
        .join('\n'); // not the command's echo
      expect(out).toContain('npm ci skipped');
      expect(out).toContain('WRITE-REFUSED');
      expect(out).not.toContain('WROTE-SHARED');
      expect(out).toContain('CACHE-WRITABLE');
      const r1 = join(dataRoot, 'runtime/deployments/dep-a/revisions/a-r1/src', target);
      const r2 = join(dataRoot, 'runtime/deployments/dep-a/revisions/a-r2/src', target);
      expect(statSync(r1).ino).toBe(statSync(r2).ino); // really shared: hard links
      expect(readFileSync(r1, 'utf8')).not.toContain('pwned');
    },
    60_000,
  );

  it.skipIf(!BWRAP)(
    'keeps the build marker out of reach and refuses a graph folder that is a symlink out of the repository',
    async () => {
      const b5 = spec(B, 'b-marker', {
        installCommand: `echo '{"commitSha":"x","sharedNodeModules":"/etc"}' > ../build.json; echo tried`,
      });
      expect(await build(b5)).toMatchObject({ phase: 'Succeeded', commitSha: repo.sha('main') });
      const marker = JSON.parse(
        readFileSync(join(dataRoot, 'runtime/deployments/dep-b/revisions/b-marker/build.json'), 'utf8'),
      );
      expect(marker).toEqual({ commitSha: repo.sha('main') });

      const evil = join(repos, 'evil');
      mkdirSync(evil, { recursive: true });
      const sh = (cmd: string) =>
        execFileSync('sh', ['-c', cmd], {
          cwd: evil,
          env: {
            ...process.env,
            GIT_AUTHOR_NAME: 't',
            GIT_AUTHOR_EMAIL: 't@e',
            GIT_COMMITTER_NAME: 't',
            GIT_COMMITTER_EMAIL: 't@e',
          },
        });
      sh(
        `git init -q -b main && ln -s ${join(dataRoot, 'runtime/deployments/dep-a/revisions/a-r1/src')} agent && git add agent && git commit -qm link`,
      );
      const status = await build(spec(B, 'b-symlink', { repoUrl: evil, graphConfigPath: 'agent/langgraph.json' }));
      expect(status).toMatchObject({ phase: 'Failed', message: expect.stringMatching(/leads out of the repository/) });
    },
    60_000,
  );

  it('refuses local repositories outside the allowed roots, inside the data dir, and git transport tricks', async () => {
    const elsewhere = makeExampleRepo(join(root, 'elsewhere'));
    const pwned = join(root, 'pwned');
    const cases: [string, RegExp][] = [
      [elsewhere.path, /outside the allowed roots/],
      [`file://${elsewhere.path}`, /outside the allowed roots/],
      [join(dataRoot, 'runtime/deployments/dep-a/revisions/a-r1/src'), /data directory/],
      [`ext::sh -c touch% ${pwned}`, /remote helper/],
      ['--upload-pack=touch /tmp/x', /git URL or an absolute path/],
    ];
    for (const [i, [repoUrl, why]] of cases.entries()) {
      const status = await build(spec(B, `b-url${i}`, { repoUrl }));
      expect(status).toMatchObject({ phase: 'Failed', message: expect.stringMatching(why) });
    }
    expect(existsSync(pwned)).toBe(false);
  }, 60_000);

  it('keeps repo_url credentials out of logs, status messages, dev logs and argv, yet gives them to git', async () => {
    const token = 'tok-9f8e7d6c5b4a3';
    let authorization: string | undefined;
    let psDuringClone = '';
    const server: Server = createServer((req, res) => {
      if (!req.headers.authorization) {
        res.writeHead(401, { 'WWW-Authenticate': 'Basic realm="git"' }).end();
        return;
      }
      authorization = req.headers.authorization;
      psDuringClone = execFileSync('ps', ['-eo', 'args'], { encoding: 'utf8' });
      res.writeHead(404).end();
    });
    await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
    const { port } = server.address() as { port: number };
    try {
      const b2 = spec(B, 'b-cred', { repoUrl: `http://alice:${token}@127.0.0.1:${port}/team/agent.git` });
      const status = await build(b2);
      expect(status.phase).toBe('Failed');
      expect(authorization).toBe(`Basic ${Buffer.from(`alice:${token}`).toString('base64')}`);
      expect(psDuringClone).toContain('git');
      expect(psDuringClone).not.toContain(token);
      expect(JSON.stringify(status)).not.toContain(token);
      expect(JSON.stringify(status)).toContain('http://***@127.0.0.1');
      expect(logs.of(b2, 'build').join('\n')).toContain('***@127.0.0.1');
      expect(logs.all()).not.toContain(token);
      expect(logged).not.toContain(token);
    } finally {
      server.close();
    }
  }, 60_000);

  it("runs none of a workspace's programs outside the sandbox when its secret PATH leads to them", async () => {
    // The attack: the workspace's code writes programs named like the launch chain's into its writable home, and
    // its secret PATH points there. Each one, if ever run by the runtime, proves it by writing outside the sandbox
    // what the platform's environment holds.
    // On A, whose install is cached: only the planting and the launch matter here, not another npm ci.
    const home = join(dataRoot, 'runtime/deployments/dep-a/home');
    const escaped = join(root, 'escaped');
    const plant = ['sh', 'setpriv', 'bwrap', 'node', 'env', 'git', 'npm']
      .map(
        (name) =>
          `printf '#!/bin/sh\\necho "${name} ran: $(cat /proc/${process.pid}/environ | tr "\\\\0" " ")" >> ${escaped}\\nexit 1\\n' > "$HOME/bin/${name}"; chmod +x "$HOME/bin/${name}"`,
      )
      .join('; ');
    const planted = spec(A, 'a-path', { buildCommand: `mkdir -p "$HOME/bin"; ${plant}` });
    expect(await build(planted)).toMatchObject({ phase: 'Succeeded' });
    expect(readdirSync(join(home, 'bin')).sort()).toEqual(['bwrap', 'env', 'git', 'node', 'npm', 'setpriv', 'sh']);

    const marker = 'path-marker-5b1d';
    const status = await deploy(A, 'a-path', { PATH: `${join(home, 'bin')}:/usr/bin:/bin`, MARKER: marker });
    expect(existsSync(escaped) ? readFileSync(escaped, 'utf8') : '').toBe('');
    expect(status).toEqual({ phase: 'Ready' });
    // The deployment's variables reach the agent process, and no process of the launch chain (sh, setpriv, bwrap).
    const holders = environsWith(marker);
    expect(holders.length).toBeGreaterThan(0);
    for (const vars of holders) expect(vars).toContain(`PATH=${join(home, 'bin')}:/usr/bin:/bin`);
    const exes = readdirSync('/proc')
      .filter((p) => /^\d+$/.test(p))
      .filter((pid) => {
        try {
          return readFileSync(`/proc/${pid}/environ`, 'utf8').split('\0').includes(`MARKER=${marker}`);
        } catch {
          return false;
        }
      })
      .map((pid) => {
        try {
          return readlinkSync(`/proc/${pid}/exe`);
        } catch {
          return '?';
        }
      });
    expect(exes).toContain(realpathSync(process.execPath));
    for (const name of ['sh', 'setpriv', 'bwrap']) {
      const found = spawnSync('sh', ['-c', `command -v ${name}`], { encoding: 'utf8' }).stdout.trim();
      if (found) expect(exes).not.toContain(realpathSync(found));
    }
    await runtime.stop({ ...A, revision: 'a-path' });
  }, 120_000);

  it('refuses secrets that the loader or a shell would obey before the sandbox (LD_PRELOAD and the like)', async () => {
    // Stored before the control plane refused these names, or pushed by a listener: the runtime refuses them too.
    const cases = [
      ['LD_PRELOAD', join(dataRoot, 'runtime/deployments/dep-a/home/evil.so')],
      ['LD_LIBRARY_PATH', join(dataRoot, 'runtime/deployments/dep-a/home')],
      ['NODE_OPTIONS', '--require /tmp/evil.js'],
      ['BASH_ENV', '/tmp/evil.sh'],
    ];
    // The first on a revision built to start (A's, its install cached); the others on revisions never built: the
    // refusal comes before the build is looked for, and creates nothing.
    expect(await build(spec(A, 'a-reserved-0'))).toMatchObject({ phase: 'Succeeded' });
    for (const [i, [name, value]] of cases.entries()) {
      const revision = `a-reserved-${i}`;
      const status = await settle(
        () => runtime.deploy({ ...A, revision, graphConfigPath: 'langgraph.json', env: { OK: '1', [name!]: value! } }),
        ['Ready', 'Failed'],
        20_000,
      );
      expect(status).toMatchObject({ phase: 'Failed', message: expect.stringContaining(`secret ${name} is reserved`) });
      await runtime.stop({ ...A, revision });
      if (i > 0) expect(existsSync(join(dataRoot, 'runtime/deployments/dep-a/revisions', revision))).toBe(false);
    }
  }, 90_000);

  it('ends DEPLOY_FAILED at once for a secret with NUL or of 200 KiB, and for a server that cannot start', async () => {
    const nul = await settle(
      () => runtime.deploy({ ...B, revision: 'b-r0', graphConfigPath: 'langgraph.json', env: { BAD: 'a\0b' } }),
      ['Ready', 'Failed'],
      5000,
    );
    expect(nul).toMatchObject({ phase: 'Failed', message: expect.stringMatching(/BAD contains a NUL/) });
    const huge = await settle(
      () =>
        runtime.deploy({
          ...B,
          revision: 'b-r1',
          graphConfigPath: 'langgraph.json',
          env: { HUGE: 'x'.repeat(200 * 1024) },
        }),
      ['Ready', 'Failed'],
      5000,
    );
    expect(huge).toMatchObject({ phase: 'Failed', message: expect.stringMatching(/HUGE is too large/) });
    expect(huge.phase === 'Failed' && huge.message).not.toContain('xxxx');
    // Files gone under a built revision: the start fails and says so, once.
    const b3 = spec(B, 'b-r3', { installCommand: 'true' });
    expect(await build(b3)).toMatchObject({ phase: 'Succeeded' });
    rmSync(join(dataRoot, 'runtime/deployments/dep-b/revisions/b-r3/src'), { recursive: true, force: true });
    const gone = await settle(
      () => runtime.deploy({ ...B, revision: 'b-r3', graphConfigPath: 'langgraph.json', env: {} }),
      ['Ready', 'Failed'],
      20_000,
    );
    expect(gone.phase).toBe('Failed');
  }, 60_000);

  it('fails an install that prints without end, with a capped log and bounded memory', async () => {
    const before = process.memoryUsage().rss;
    for (const [revision, installCommand] of [
      ['b-yes', 'yes'],
      ['b-line', "yes | tr -d '\\n'"],
    ] as const) {
      const s = spec(B, revision, { installCommand });
      const status = await build(s);
      expect(status).toMatchObject({ phase: 'Failed', message: expect.stringMatching(/printed more than 1 MiB/) });
      const stored = logs.of(s, 'build');
      expect(stored.length).toBeLessThanOrEqual(2002);
      expect(stored.join('\n').length).toBeLessThan(300 * 1024);
      if (revision === 'b-yes') expect(stored.some((l) => l.includes('[log truncated'))).toBe(true);
    }
    expect(process.memoryUsage().rss - before).toBeLessThan(150 * 1024 * 1024);

    const quick = newRuntime({ buildTimeoutMs: 3000 });
    try {
      const slow = spec(B, 'b-slow', { installCommand: 'sleep 60' });
      expect(await quick.build(slow)).toMatchObject({ phase: 'Running' });
      // A collection while the step runs must not lose the deadline (it did with AbortSignal.any over
      // AbortSignal.timeout on Node 20: this build then succeeded after 60 s, once in a CI run). On a loaded
      // machine the clone alone may outlast the deadline, so the wait for the install step also ends when the
      // build does; either way the build must end Failed on its deadline, never Succeeded.
      const terminal = (p: string) => p === 'Succeeded' || p === 'Failed';
      while (!logs.of(slow, 'build').includes('$ sleep 60') && !terminal((await quick.build(slow)).phase)) {
        await new Promise((r) => setTimeout(r, 20));
      }
      fullGc();
      const status = await build(slow, quick);
      expect(status).toMatchObject({ phase: 'Failed', message: expect.stringMatching(/build deadline/) });
    } finally {
      await quick.shutdown();
    }
  }, 90_000);

  it('removes old build folders beyond keep-builds and builds a removed revision again on redeploy', async () => {
    expect(await build(spec(A, 'a-r3', { repoRef: 'v2' }))).toMatchObject({ phase: 'Succeeded' });
    expect(await build(spec(A, 'a-r4', { repoRef: 'v2' }))).toMatchObject({ phase: 'Succeeded' });
    const ref = (revision: string) => ({ ...A, revision });
    expect(await runtime.hasBuild(ref('a-r3'))).toBe(false); // beyond keep-builds=1
    expect(await runtime.hasBuild(ref('a-r4'))).toBe(true); // newest
    expect(await runtime.hasBuild(ref('a-r1'))).toBe(true); // serving
    expect(await deploy(A, 'a-r3', {})).toEqual({ phase: 'Ready' });
    expect(await runtime.hasBuild(ref('a-r3'))).toBe(true);
    expect(logs.of(ref('a-r3'), 'build').filter((l) => l.startsWith('$ git clone')).length).toBe(2);
    await runtime.stop(ref('a-r3'));
  }, 90_000);
});

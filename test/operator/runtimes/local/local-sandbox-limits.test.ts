// A workspace's graph attacks the machine it shares, without a delegated cgroup (the limits every machine can
// hold): it fills the sandbox's /tmp (a tmpfs, memory no process is charged for), starts processes without end, and
// fills its home folder. Real git repository, real npm, real bubblewrap where it works, real agent server called
// through the SDK; each attack must end with the server killed and a status reason naming the limit.
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { Client } from '@langchain/langgraph-sdk';
import type { FastifyInstance } from 'fastify';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { silentLogger } from '../../../../src/lib/logger.ts';
import { LocalRuntime, PACKAGE_DIR } from '../../../../src/operator/runtimes/local/index.ts';
import { detectSandbox, sharedTrees, type Sandbox } from '../../../../src/operator/runtimes/local/sandbox.ts';
import type { LogType, RevisionLogSink, RevisionRef, ServerStatus } from '../../../../src/operator/runtimes/types.ts';
import { makeExampleRepo, type ExampleRepo } from '../../helpers/example-repo.ts';
import { BWRAP, addGraphBranch, settle, startProxy } from '../../helpers/sandbox-graph.ts';

// The graph starts the attack in the background and answers at once, as hostile code would. The attack is the
// revision's (its ATTACK variable), not the run's: the kill may come before the run is recorded as done, and the next
// revision's server, on the same deployment's storage, then takes the run up again (runs survive crashes). Read from
// the run's input, the fork bomb would start again inside the disk-filler and be what kills it.
const HOSTILE = `import { spawn } from 'node:child_process';
import { Annotation, StateGraph } from '@langchain/langgraph';

const State = Annotation.Root({ started: Annotation<boolean> });
const SCRIPTS: Record<string, string> = {
  tmp: 'dd if=/dev/zero of=/tmp/fill bs=1M count=1200 2>/dev/null; sleep 600',
  fork: 'for i in $(seq 400); do sleep 600 & done; wait',
  disk: 'fallocate -l 3G "$HOME/fill" 2>/dev/null || dd if=/dev/zero of="$HOME/fill" bs=1M count=3072 2>/dev/null; sleep 600',
};

export const graph = new StateGraph(State)
  .addNode('launch', () => {
    spawn('sh', ['-c', SCRIPTS[process.env.ATTACK!]!], { stdio: 'ignore', detached: false });
    return { started: true };
  })
  .addEdge('__start__', 'launch')
  .compile();
`;

class MemoryLogs implements RevisionLogSink {
  lines = new Map<string, string[]>();
  async append(ref: RevisionRef, type: LogType, lines: string[]) {
    const k = `${ref.revision}/${type}`;
    this.lines.set(k, [...(this.lines.get(k) ?? []), ...lines]);
  }
  text(revision: string, type: LogType): string {
    return (this.lines.get(`${revision}/${type}`) ?? []).join('\n');
  }
}

let tmp: string;
let repo: ExampleRepo;
let logs: MemoryLogs;
let sandbox: Sandbox;
let runtime: LocalRuntime;
let app: FastifyInstance;

beforeAll(async () => {
  tmp = mkdtempSync(join(tmpdir(), 'ap-sandbox-limits-'));
  repo = makeExampleRepo(tmp);
  addGraphBranch(repo, 'hostile', 'hostile', HOSTILE, 'a graph that attacks the machine');
  logs = new MemoryLogs();
  sandbox = (await detectSandbox('auto', { hidden: [join(tmp, 'data')], shared: sharedTrees(PACKAGE_DIR) })).sandbox;
  runtime = new LocalRuntime({
    agentExecutorThreads: 0,
    dataDir: join(tmp, 'data'),
    logs,
    logger: silentLogger(),
    healthTimeoutMs: 90_000,
    stopGraceMs: 2000,
    sandbox,
    allowLocalRepos: [tmp],
    // No cgroup: the limits every machine can hold.
    limits: { maxProcesses: 64, diskLimitMb: 2048, watchIntervalMs: 200, diskWatchIntervalMs: 500 },
  });
  const proxy = await startProxy(() => runtime);
  app = proxy.app;
  runtime.setBaseUrl(proxy.url);
});

afterAll(async () => {
  await runtime?.shutdown();
  await app?.close();
  rmSync(tmp, { recursive: true, force: true });
});

// A failed attempt's deployment is removed and the retry gets a new one: a killed disk-filler leaves its gigabytes in
// the deployment's folders, and the next server would be killed for them before it is healthy.
let generation = 1;
const deployment = () => ({
  namespace: 'default',
  deployment: `hostile-${generation}`,
  deploymentId: `dep-hostile-${generation}`,
  tenantId: 't1',
});

/** Builds and serves a revision of the hostile branch, runs the attack, and returns the status it ends in. */
async function attack(
  revision: string,
  kind: string,
  memoryLimitMb?: number,
): Promise<{ status: ServerStatus; log: string }> {
  const dep = deployment();
  try {
    return await attackOn(dep, revision, kind, memoryLimitMb);
  } catch (err) {
    generation++;
    await runtime.cleanup(dep);
    throw err;
  }
}

async function attackOn(
  dep: ReturnType<typeof deployment>,
  revision: string,
  kind: string,
  memoryLimitMb: number | undefined,
): Promise<{ status: ServerStatus; log: string }> {
  const build = { ...dep, revision, repoUrl: repo.path, repoRef: 'hostile', graphConfigPath: 'langgraph.json' };
  const built = await settle(
    () => runtime.build(build),
    (s) => s.phase === 'Succeeded' || s.phase === 'Failed',
  );
  expect(built).toMatchObject({ phase: 'Succeeded' });
  const spec = {
    ...dep,
    revision,
    graphConfigPath: 'langgraph.json',
    env: { ATTACK: kind },
    access: 'public' as const,
    ...(memoryLimitMb ? { resourceSpec: { memoryLimitMb } } : {}),
  };
  expect(
    await settle(
      () => runtime.deploy(spec),
      (s) => s.phase !== 'Starting',
    ),
  ).toEqual({ phase: 'Ready' });
  await runtime.route(dep, revision);
  const client = new Client({ apiUrl: await runtime.url(dep), callerOptions: { maxRetries: 0 } });
  // The kill may come before the answer is out (a quiet machine allocates 3 GB in milliseconds, and the watcher looks
  // every 500 ms): then the proxy says the server closed the connection, or is restarting. Either way the status
  // below must name the limit.
  try {
    expect(await client.runs.wait(null, 'hostile', { input: {} })).toMatchObject({ started: true });
  } catch (err) {
    expect(String(err)).toMatch(new RegExp(`HTTP 50[23]: .*Deployment ${dep.deploymentId}\\b`));
  }
  // Nothing asks the runtime to start it again meanwhile: the status stays the one the kill left.
  const status = await settle(
    async () => runtime.serverStatus({ ...dep, revision }) ?? { phase: 'Starting' as const },
    (s) => s.phase === 'Failed' || (s.phase === 'Starting' && !!s.trouble),
  );
  await runtime.stop({ ...dep, revision });
  return { status, log: logs.text(revision, 'deploy') };
}

describe('per-deployment limits without a cgroup', () => {
  // Unconfined, /tmp is the machine's own and not counted (docs/local-runtime.md says so).
  it.skipIf(!BWRAP)(
    'a graph that fills /tmp is killed as out of memory: /tmp counts against memory_limit_mb',
    async () => {
      const { status, log } = await attack('tmp-filler', 'tmp', 640);
      expect(log).toMatch(/resource limits: memory 640 MB/);
      expect(status).toMatchObject({
        phase: 'Starting',
        trouble: {
          reason: 'OOMKilled',
          message: expect.stringMatching(/\/tmp \d+ MB .*over the memory limit of 640 MB/),
        },
      });
    },
    240_000,
  );

  it('a graph that starts processes without end is killed at the process cap', async () => {
    const { status, log } = await attack('forker', 'fork');
    expect(log).toMatch(/processes 64/);
    expect(status).toMatchObject({
      phase: 'Starting',
      trouble: { reason: 'ProcessLimitExceeded', message: expect.stringMatching(/over the limit of 64/) },
    });
  }, 240_000);

  it('a graph that fills its home folder is killed at the disk limit', async () => {
    const { status, log } = await attack('disk-filler', 'disk');
    expect(log).toMatch(/disk 2048 MB/);
    expect(status).toMatchObject({
      phase: 'Starting',
      trouble: { reason: 'DiskLimitExceeded', message: expect.stringMatching(/more than 2048 MB/) },
    });
  }, 240_000);
});

// A workspace's graph looks for what the platform keeps from it: root-owned files it could read or overwrite when
// the platform runs as root (the sandbox's process used to be root in a user namespace mapped to root), the
// platform's own files and another deployment's data, and the secrets the agent server needs but graph code must
// not see (the data key, the database URL) in its environment and /proc/*/environ. Real git repository, real npm,
// real bubblewrap where it works, a real agent server called through the SDK, restarted on the same data.
import { spawnSync } from 'node:child_process';
import { chmodSync, mkdirSync, mkdtempSync, readFileSync, rmSync, statSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { Client } from '@langchain/langgraph-sdk';
import type { FastifyInstance } from 'fastify';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { silentLogger } from '../../../../src/lib/logger.ts';
import { LocalRuntime, PACKAGE_DIR } from '../../../../src/operator/runtimes/local/index.ts';
import { detectSandbox, sharedTrees, type Sandbox } from '../../../../src/operator/runtimes/local/sandbox.ts';
import type { RevisionLogSink } from '../../../../src/operator/runtimes/types.ts';
import { makeExampleRepo, type ExampleRepo } from '../../helpers/example-repo.ts';
import { BWRAP, addGraphBranch, settle as settleWhen, startProxy } from '../../helpers/sandbox-graph.ts';

// Tries every read and write it is given and reports what happened, with what the process can see of itself.
const PROBE = `import { appendFileSync, readFileSync, writeFileSync } from 'node:fs';
import { Annotation, StateGraph } from '@langchain/langgraph';

const State = Annotation.Root({
  reads: Annotation<string[]>,
  writes: Annotation<string[]>,
  report: Annotation<string>,
  runs: Annotation<number>({ reducer: (a, b) => a + b, default: () => 0 }),
});
const attempt = (f: () => unknown, keep = 64): string => {
  try {
    const out = f();
    return typeof out === 'string' ? 'read:' + out.slice(0, keep) : 'wrote';
  } catch (err) {
    return String((err as { code?: string }).code ?? err);
  }
};

export const graph = new StateGraph(State)
  .addNode('probe', (state) => ({
    runs: 1,
    report: JSON.stringify({
      uid: process.getuid?.(),
      status: readFileSync('/proc/self/status', 'utf8'),
      reads: Object.fromEntries((state.reads ?? []).map((p) => [p, attempt(() => readFileSync(p, 'utf8'))])),
      writes: Object.fromEntries(
        (state.writes ?? []).map((p) => [p, attempt(() => (appendFileSync(p, 'pwned\\n'), undefined))]),
      ),
      env: process.env,
      self: attempt(() => readFileSync('/proc/self/environ', 'latin1'), 1 << 20),
      pid1: attempt(() => readFileSync('/proc/1/environ', 'latin1'), 1 << 20),
    }),
  }))
  .addEdge('__start__', 'probe')
  .compile();
`;

const ROOT = process.getuid?.() === 0;
if (!ROOT || !BWRAP) console.log('local-sandbox-user: the unprivileged-uid cases need root and bubblewrap; skipped');

const DATA_KEY = 'k'.repeat(8) + 'data-key-of-the-platform';
const PREVIOUS_KEY = 'p'.repeat(8) + 'older-key-of-the-platfor';

const logLines: string[] = [];
const logs: RevisionLogSink = { append: async (_ref, _type, lines) => void logLines.push(...lines) };

let tmp: string;
let repo: ExampleRepo;
let sandbox: Sandbox;
let runtime: LocalRuntime;
let app: FastifyInstance;
let proxyUrl: string;

const dep = { namespace: 'default', deployment: 'probe', deploymentId: 'dep-probe', tenantId: 't1' };
const dataDir = () => join(tmp, 'data', 'runtime');
const depData = () => join(dataDir(), 'deployments', dep.deploymentId, 'data');

const settle = <T extends { phase: string }>(ask: () => Promise<T>, phases: string[]): Promise<T> =>
  settleWhen(
    ask,
    (s) => phases.includes(s.phase),
    120_000,
    () => logLines.slice(-30).join('\n'),
  );

function newRuntime(): LocalRuntime {
  return new LocalRuntime({
    agentExecutorThreads: 0,
    dataDir: dataDir(),
    logs,
    logger: silentLogger(),
    healthTimeoutMs: 120_000,
    stopGraceMs: 2000,
    sandbox,
    allowLocalRepos: [tmp],
    dataKeys: async () => ({ LANGGRAPH_AES_KEY: DATA_KEY, AGENTPLANE_AES_PREVIOUS_KEYS: PREVIOUS_KEY }),
  });
}

async function serve(rt: LocalRuntime): Promise<Client> {
  const revision = 'probe-r1';
  const built = await settle(
    () => rt.build({ ...dep, revision, repoUrl: repo.path, repoRef: 'probe', graphConfigPath: 'langgraph.json' }),
    ['Succeeded', 'Failed'],
  );
  expect(built).toMatchObject({ phase: 'Succeeded' });
  const spec = {
    ...dep,
    revision,
    graphConfigPath: 'langgraph.json',
    env: { OWN_SECRET: 'own' },
    access: 'public' as const,
  };
  const status = await settle(() => rt.deploy(spec), ['Ready', 'Failed']);
  expect(status, logLines.slice(-30).join('\n')).toEqual({ phase: 'Ready' });
  await rt.route(dep, revision);
  return new Client({ apiUrl: await rt.url(dep), callerOptions: { maxRetries: 0 } });
}

type Report = {
  uid: number;
  status: string;
  reads: Record<string, string>;
  writes: Record<string, string>;
  env: Record<string, string>;
  self: string;
  pid1: string;
};

async function probe(
  client: Client,
  threadId: string,
  reads: string[] = [],
  writes: string[] = [],
): Promise<{ report: Report; runs: number }> {
  const out = (await client.runs.wait(threadId, 'probe', { input: { reads, writes } })) as {
    report: string;
    runs: number;
  };
  return { report: JSON.parse(out.report) as Report, runs: out.runs };
}

beforeAll(async () => {
  tmp = mkdtempSync(join(tmpdir(), 'ap-sandbox-user-'));
  repo = makeExampleRepo(tmp);
  addGraphBranch(repo, 'probe', 'probe', PROBE, 'a graph that looks around');
  // The platform's own files beside the runtime's folder, as `agentplane dev` lays them out, and another
  // deployment's data.
  mkdirSync(join(tmp, 'data', 'control-plane'), { recursive: true });
  writeFileSync(join(tmp, 'data', 'control-plane', 'secret.key'), 'SECRET-KEY-OF-THE-PLATFORM', { mode: 0o600 });
  writeFileSync(join(tmp, 'data', 'control-plane', 'control-plane.db'), 'CONTROL-PLANE-DB', { mode: 0o600 });
  mkdirSync(join(dataDir(), 'deployments', 'dep-other', 'data'), { recursive: true });
  writeFileSync(join(dataDir(), 'deployments', 'dep-other', 'data', 'agent.db'), 'OTHER-DEPLOYMENT-DATA');
  sandbox = (await detectSandbox('auto', { hidden: [join(tmp, 'data')], shared: sharedTrees(PACKAGE_DIR) })).sandbox;
  ({ app, url: proxyUrl } = await startProxy(() => runtime));
  runtime = newRuntime();
  runtime.setBaseUrl(proxyUrl);
}, 60_000);

afterAll(async () => {
  await runtime?.shutdown();
  await app?.close();
  rmSync(tmp, { recursive: true, force: true });
});

describe('what graph code can reach of the machine and of its own server', () => {
  it('finds no data key or database URL in its environment, /proc/self/environ or /proc/1/environ', async () => {
    const client = await serve(runtime);
    const thread = await client.threads.create();
    const { report } = await probe(client, thread.thread_id);
    expect(report.env.OWN_SECRET).toBe('own'); // the workspace's own secrets are its graphs'
    expect(report.self).toMatch(/^read:/);
    for (const seen of [JSON.stringify(report.env), report.self, report.pid1]) {
      expect(seen).not.toContain(DATA_KEY);
      expect(seen).not.toContain(PREVIOUS_KEY);
      expect(seen).not.toContain('LANGGRAPH_AES_KEY');
    }
    // Nor does any process on the machine hold the key in its environment (the launch chain included).
    const holders = spawnSync('sh', ['-c', `grep -l -a -- '${DATA_KEY}' /proc/[0-9]*/environ 2>/dev/null`], {
      encoding: 'utf8',
    }).stdout.trim();
    expect(holders).toBe('');
    // The server did get the key: what the run stored is sealed with it.
    const sealed = spawnSync('grep', ['-r', '-l', '-a', 'apenc1:', depData()], { encoding: 'utf8' }).stdout;
    expect(sealed).not.toBe('');
  }, 300_000);

  it.skipIf(!ROOT || !BWRAP)(
    "as root, runs graphs as an unprivileged uid: root-owned files, the platform's and other deployments' are out of reach, its own data persists",
    async () => {
      const client = new Client({ apiUrl: await runtime.url(dep), callerOptions: { maxRetries: 0 } });
      const thread = await client.threads.create();
      // Root-owned files in the deployment's own writable folder (a 0600 one, a 0644 one, a 0755 folder), as the
      // platform or a build as root would leave them.
      const rootOnly = join(depData(), 'root-only');
      const rootFile = join(depData(), 'root-file');
      const rootDir = join(depData(), 'root-dir');
      writeFileSync(rootOnly, 'ROOT-ONLY-CONTENT', { mode: 0o600 });
      writeFileSync(rootFile, 'ROOT-FILE-CONTENT', { mode: 0o644 });
      mkdirSync(rootDir, { mode: 0o755 });
      chmodSync(rootOnly, 0o600);
      const { report, runs } = await probe(
        client,
        thread.thread_id,
        [
          '/etc/shadow',
          rootOnly,
          join(tmp, 'data', 'control-plane', 'secret.key'),
          join(tmp, 'data', 'control-plane', 'control-plane.db'),
          join(dataDir(), 'deployments', 'dep-other', 'data', 'agent.db'),
        ],
        [rootFile, join(rootDir, 'new-file'), '/etc/passwd', join(depData(), 'own-file')],
      );
      expect(runs).toBe(1);
      expect(report.uid).not.toBe(0);
      // No capability left anywhere (the ones bwrap kept to switch uid are gone), and no way to gain one.
      const field = (name: string) => new RegExp(`^${name}:[ \\t]*(.*)$`, 'm').exec(report.status)?.[1]?.trim();
      for (const set of ['CapInh', 'CapPrm', 'CapEff', 'CapBnd', 'CapAmb'])
        expect([set, field(set)]).toEqual([set, '0000000000000000']);
      expect(field('NoNewPrivs')).toBe('1');
      expect(field('Groups')).toBe(''); // no supplementary group
      for (const [path, result] of Object.entries(report.reads))
        expect([path, result]).toEqual([path, expect.stringMatching(/^E[A-Z]+$/)]);
      expect(report.reads['/etc/shadow']).toBe('EACCES');
      expect(report.reads[rootOnly]).toBe('EACCES');
      expect(report.writes).toEqual({
        [rootFile]: 'EACCES',
        [join(rootDir, 'new-file')]: 'EACCES',
        '/etc/passwd': expect.stringMatching(/^E(ACCES|ROFS)$/),
        [join(depData(), 'own-file')]: 'wrote', // its own folder stays its own
      });
      expect(readFileSync(rootFile, 'utf8')).toBe('ROOT-FILE-CONTENT');
      // What it wrote is owned by that uid on the host; the platform's folder above it stays root's.
      expect(statSync(join(depData(), 'own-file')).uid).toBe(report.uid);
      expect(statSync(dataDir()).uid).toBe(0);

      // Restarted on the same data (the platform restarts): the thread and its runs are still there, and it runs on.
      await runtime.shutdown();
      runtime = newRuntime();
      runtime.setBaseUrl(proxyUrl);
      const again = await serve(runtime);
      const state = await again.threads.getState<{ runs: number }>(thread.thread_id);
      expect(state.values.runs).toBe(1);
      expect((await probe(again, thread.thread_id)).runs).toBe(2);
    },
    300_000,
  );
});

// The build imports each graph module as the server's start would, in the sandbox, with the revision's secrets: an
// import-time throw is BUILD_FAILED once, in the user's terms; a graph that builds its client from a secret at
// import is not refused; and graph code that prints or throws its environment during the check shows neither the
// platform's keys nor the workspace's secret, in the build log or the revision's status. Real git repository, real
// bubblewrap when the machine has it.
import { execFileSync, spawnSync } from 'node:child_process';
import { chmodSync, mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { silentLogger } from '../../../../src/lib/logger.ts';
import { LocalRuntime, PACKAGE_DIR } from '../../../../src/operator/runtimes/local/index.ts';
import { detectSandbox, sharedTrees } from '../../../../src/operator/runtimes/local/sandbox.ts';
import type { BuildStatus } from '../../../../src/operator/runtimes/types.ts';
import { hasTool } from '../../../support/system-tools.ts';
import { makeExampleRepo, type ExampleRepo } from '../../helpers/example-repo.ts';
import { LINKED_INSTALL } from '../../../support/linked-install.ts';
import { until } from '../../helpers/local-serve.ts';

const BWRAP =
  hasTool('bwrap', 'the sandboxed import check of test/operator/runtimes/local/local-import-check.test.ts') &&
  spawnSync('bwrap', ['--unshare-all', '--share-net', '--ro-bind', '/', '/', 'true']).status === 0;

const SECRET = 'sk-workspace-secret-0123456789';
const PLATFORM = 'platform-admin-key-abcdefghij';
const AES = 'platform-aes-key-0123456789abcdef';

let tmp: string;
let repo: ExampleRepo;
let runtime: LocalRuntime;
const logs = new Map<string, string[]>();

/** A branch of the example agent whose graph module starts with `lines` (run when it is imported). */
function branch(name: string, lines: string) {
  const git = (...args: string[]) =>
    execFileSync('git', args, {
      cwd: repo.path,
      env: {
        ...process.env,
        GIT_AUTHOR_NAME: 't',
        GIT_AUTHOR_EMAIL: 't@e',
        GIT_COMMITTER_NAME: 't',
        GIT_COMMITTER_EMAIL: 't@e',
      },
    });
  git('checkout', '--quiet', '-b', name, 'main');
  const file = join(repo.path, 'src/agent.ts');
  writeFileSync(file, lines + readFileSync(file, 'utf8'));
  git('commit', '--quiet', '-am', name);
}

beforeAll(async () => {
  tmp = mkdtempSync(join(tmpdir(), 'ap-import-check-'));
  // Shared read-only into the sandbox: as root, its user (uid 65534) must be able to read the repository.
  chmodSync(tmp, 0o755);
  repo = makeExampleRepo(tmp);
  // The real-model pattern: a client constructed at import from a secret, which throws without it.
  branch('needs-key', "if (!process.env.OPENAI_API_KEY) throw new Error('OPENAI_API_KEY is not set');\n");
  // The attacker's graph: prints its environment while imported, then throws it.
  branch(
    'snoop',
    "console.log('ENV', JSON.stringify(process.env));\nthrow new Error('ENV ' + JSON.stringify(process.env));\n",
  );
  const dataDir = join(tmp, 'data');
  mkdirSync(dataDir);
  const sandbox = BWRAP
    ? (await detectSandbox('bwrap', { hidden: [dataDir], shared: [...sharedTrees(PACKAGE_DIR), tmp] })).sandbox
    : undefined;
  runtime = new LocalRuntime({
    agentExecutorThreads: 0,
    dataDir,
    logs: {
      append: async (ref, type, lines) =>
        void logs.set(`${ref.revision}/${type}`, [...(logs.get(`${ref.revision}/${type}`) ?? []), ...lines]),
    },
    logger: silentLogger(),
    allowLocalRepos: [tmp],
    // The platform's own keys are in its environment; no build step may see them.
    baseEnv: { ...process.env, AGENTPLANE_ADMIN_KEY: PLATFORM, LANGGRAPH_AES_KEY: AES },
    ...(sandbox ? { sandbox } : {}),
  });
}, 60_000);

afterAll(async () => {
  await runtime?.shutdown();
  if (tmp) rmSync(tmp, { recursive: true, force: true });
});

function buildOf(name: string, ref: string, env: Record<string, string>): Promise<BuildStatus> {
  const spec = {
    namespace: 'default',
    deployment: name,
    deploymentId: `dep-${name}`,
    tenantId: `t-${name}`,
    revision: `${name}-r1`,
    repoUrl: repo.path,
    repoRef: ref,
    graphConfigPath: 'langgraph.json',
    // The install is not the subject (test/operator/runtimes/local/local-runtime.test.ts has the real npm ci): the check imports
    // the graphs through agentplane's own packages, linked.
    installCommand: LINKED_INSTALL,
  };
  return until(
    `the build of ${name}`,
    async () => {
      const s = await runtime.build(spec, { serverEnv: async () => env });
      return s.phase === 'Running' ? undefined : s;
    },
    280_000,
  );
}

describe('the build imports the graphs with the revision secrets', () => {
  it('an import-time throw fails the build in the user terms; with its secret the same graph builds; nothing leaks', async () => {
    const [withKey, withoutKey, snoop] = await Promise.all([
      buildOf('keyed', 'needs-key', { OPENAI_API_KEY: SECRET }),
      buildOf('keyless', 'needs-key', {}),
      buildOf('snoop', 'snoop', { OPENAI_API_KEY: SECRET }),
    ]);
    expect(withKey, logs.get('keyed-r1/build')?.join('\n')).toMatchObject({ phase: 'Succeeded' });
    expect(withoutKey).toEqual({
      phase: 'Failed',
      message: 'graph "agent": importing src/agent.ts failed: src/agent.ts:1:40: OPENAI_API_KEY is not set',
    });
    expect(snoop).toMatchObject({
      phase: 'Failed',
      message: expect.stringMatching(/^graph "agent": importing src\/agent\.ts failed: src\/agent\.ts:2:7: ENV /),
    });
    const everything = JSON.stringify([...logs.values(), withKey, withoutKey, snoop]);
    expect(everything).toContain('import the graphs');
    for (const leak of [SECRET, PLATFORM, AES]) expect(everything).not.toContain(leak);
    // The masked secret is still said to be there, as ***.
    expect((snoop as { message: string }).message).toContain('"OPENAI_API_KEY":"***"');
  }, 300_000);
});

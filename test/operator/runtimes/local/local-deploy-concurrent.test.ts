// Two deploy() calls for one revision at the same moment, as a reconcile and a change notification make them: one
// agent server starts, not two. Before, each call saw no server, each started one, and the one not recorded ran on
// unsupervised, holding the embedded data folder, while the recorded one waited for it until "did not answer /ok
// within 60 s" failed a first deploy (local-supervision.test.ts's first start, under load). A real build and real
// agent server processes.
import { execFileSync } from 'node:child_process';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, expect, it } from 'vitest';
import { silentLogger } from '../../../../src/lib/logger.ts';
import { LocalRuntime } from '../../../../src/operator/runtimes/local/index.ts';
import type { ServerSpec } from '../../../../src/operator/runtimes/types.ts';
import { makeExampleRepo } from '../../helpers/example-repo.ts';
import { LINKED_INSTALL } from '../../../support/linked-install.ts';
import { until } from '../../helpers/local-serve.ts';

const dep = { namespace: 'default', deployment: 'twice', deploymentId: 'dep-twice' };
const spec: ServerSpec = {
  ...dep,
  revision: 'twice-r1',
  graphConfigPath: 'langgraph.json',
  env: {},
  tenantId: 't1',
  access: 'public',
};

let tmp: string;
let runtime: LocalRuntime;
const deployLog: string[] = [];

beforeAll(() => {
  tmp = mkdtempSync(join(tmpdir(), 'ap-deploy-twice-'));
  runtime = new LocalRuntime({
    agentExecutorThreads: 0,
    dataDir: join(tmp, 'data'),
    logs: { append: async (_ref, type, lines) => void (type === 'deploy' && deployLog.push(...lines)) },
    logger: silentLogger(),
    stopGraceMs: 2_000,
    allowLocalRepos: [tmp],
  });
});

afterAll(async () => {
  await runtime?.shutdown();
  rmSync(tmp, { recursive: true, force: true });
});

/** This process's agent server children serving this test's checkout. */
function agentServers(): string[] {
  try {
    return execFileSync('ps', ['-o', 'pid=,args=', '--ppid', String(process.pid)], { encoding: 'utf8' })
      .split('\n')
      .filter((l) => l.includes(' agent-server ') && l.includes(tmp));
  } catch {
    return []; // ps exits 1 when nothing matches
  }
}

it('starts one agent server when two deploys of a revision come at once', async () => {
  const repo = makeExampleRepo(tmp);
  const build = {
    ...dep,
    revision: spec.revision,
    repoUrl: repo.path,
    repoRef: 'main',
    graphConfigPath: spec.graphConfigPath,
    // agentplane's own packages instead of an npm ci: the install is not what this test is about.
    installCommand: LINKED_INSTALL,
  };
  await runtime.build(build);
  await until('the build', async () => (await runtime.build(build)).phase === 'Succeeded');

  const both = await Promise.all([runtime.deploy(spec), runtime.deploy(spec)]);
  expect(both.map((s) => s.phase)).toEqual(['Starting', 'Starting']);
  expect(agentServers()).toHaveLength(1);
  const ready = await until('the server', async () => {
    const s = await runtime.deploy(spec);
    return s.phase === 'Ready' || s.phase === 'Failed' ? s : undefined;
  });
  expect(ready, deployLog.join('\n')).toEqual({ phase: 'Ready' });
  expect(deployLog.filter((l) => l.startsWith('starting agent server on'))).toHaveLength(1);
  expect(agentServers()).toHaveLength(1);
  expect(runtime.pids()).toHaveLength(1);
});

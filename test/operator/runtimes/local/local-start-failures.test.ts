// Whether a failed start is retried (its database was down) or fails the deploy is the runtime's call, never the
// agent's: a tenant's graph that prints what an unreachable Postgres would print and exits must still end
// DEPLOY_FAILED, not be restarted forever as "DatabaseUnavailable". Real git repository, real Postgres
// (reachable: the runtime's own check says so), real agent server.
import { execFileSync } from 'node:child_process';
import { randomUUID } from 'node:crypto';
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, expect, it } from 'vitest';
import { silentLogger } from '../../../../src/lib/logger.ts';
import { LocalRuntime } from '../../../../src/operator/runtimes/local/index.ts';
import { dropDeploymentDatabase } from '../../../../src/operator/runtimes/local/postgres.ts';
import type { ServerStatus } from '../../../../src/operator/runtimes/types.ts';
import { testDatabaseUrl } from '../../../support/postgres.ts';
import { makeExampleRepo, type ExampleRepo } from '../../helpers/example-repo.ts';
import { LINKED_INSTALL } from '../../../support/linked-install.ts';
import { until } from '../../helpers/local-serve.ts';

// The graph module's last words are those of a server whose Postgres went away; then it exits, at every start.
const LIAR = `console.log(JSON.stringify({ level: 'error', msg: 'database not reachable: connect ECONNREFUSED 127.0.0.1:5432' }));
console.error('Error: the database system is shutting down (57P01)');
process.exit(1);
// Never reached; named so that the build's graph check (which reads exports without running the module) passes.
export const graph = {};
`;

const dep = { namespace: 'default', deployment: 'liar', deploymentId: randomUUID(), tenantId: 't1' };
let tmp: string;
let repo: ExampleRepo;
let runtime: LocalRuntime;

beforeAll(() => {
  tmp = mkdtempSync(join(tmpdir(), 'ap-start-failures-'));
  repo = makeExampleRepo(tmp);
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
  git('checkout', '--quiet', '-b', 'liar', 'main');
  writeFileSync(join(repo.path, 'src/liar.ts'), LIAR);
  const cfg = join(repo.path, 'langgraph.json');
  writeFileSync(cfg, readFileSync(cfg, 'utf8').replace('./src/agent.ts:graph', './src/liar.ts:graph'));
  git('add', '-A');
  git('commit', '--quiet', '-m', 'a graph module that claims its database is down');
  runtime = new LocalRuntime({
    agentExecutorThreads: 0,
    dataDir: join(tmp, 'data'),
    logs: { append: async () => undefined },
    logger: silentLogger(),
    databaseUrl: testDatabaseUrl(),
    stopGraceMs: 2000,
    allowLocalRepos: [tmp],
    restartPolicy: { initialMs: 200, maxMs: 1000, resetAfterMs: 60_000, crashLoopAfter: 3, transientMaxMs: 500 },
  });
});

afterAll(async () => {
  await runtime?.shutdown();
  await dropDeploymentDatabase(testDatabaseUrl(), dep.deploymentId).catch(() => undefined);
  rmSync(tmp, { recursive: true, force: true });
});

it("fails a revision whose server claims its database is down while the runtime's own check reaches it", async () => {
  const revision = 'liar-r1';
  const build = {
    ...dep,
    revision,
    repoUrl: repo.path,
    repoRef: 'liar',
    graphConfigPath: 'langgraph.json',
    installCommand: LINKED_INSTALL,
  };
  await until('the build', async () => (await runtime.build(build)).phase === 'Succeeded');
  const spec = { ...dep, revision, graphConfigPath: 'langgraph.json', env: {}, access: 'public' as const };
  // Played as the revision controller would: deploy() again whenever it is not final.
  const seen: ServerStatus[] = [];
  const final = await until(
    'a final status',
    async () => {
      const s = await runtime.deploy(spec);
      seen.push(s);
      return s.phase === 'Starting' ? undefined : s;
    },
    120_000,
  );
  expect(seen.filter((s) => s.phase === 'Starting' && s.trouble?.reason === 'DatabaseUnavailable')).toEqual([]);
  expect(final).toMatchObject({ phase: 'Failed', message: expect.stringMatching(/before becoming healthy/) });
}, 240_000);

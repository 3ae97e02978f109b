// Deploy benchmark (not a test): `agentplane dev` as a real process, the example agent in a real git repo.
// Measures, with a warm npm cache:
//   - POST /v2/deployments -> revision DEPLOYED (clone, npm ci, agent-server start, traffic);
//   - PATCH to another ref with the same lock file -> new revision DEPLOYED (install cache hit, traffic switch);
//   - redeploy of a built revision -> it serves (no build; restart and switch only).
//
//   node --import tsx bench/deploy.ts [--rounds 3] [--database-url postgres://postgres@127.0.0.1:5432/postgres]
//
// Results go to stdout and bench/results/deploy.md (deploy-postgres.md with --database-url).
import { execFileSync } from 'node:child_process';
import { mkdtemp, rm, writeFile, mkdir } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { parseArgs } from 'node:util';
import { makeExampleRepo } from '../test/operator/helpers/example-repo.ts';
import { api, startDev, stopDev, type DevProcess } from '../test/dev/helpers.ts';

const root = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '..');
const { values: args } = parseArgs({
  options: { rounds: { type: 'string', default: '3' }, 'database-url': { type: 'string' } },
});
const resultsFile = path.join(root, `bench/results/${args['database-url'] ? 'deploy-postgres' : 'deploy'}.md`);
const rounds = Number(args.rounds);

type Log = { timestamp: string; message: string };

async function poll<T>(probe: () => Promise<T | undefined>, what: string): Promise<T> {
  const until = Date.now() + 300_000;
  for (;;) {
    const v = await probe();
    if (v !== undefined) return v;
    if (Date.now() > until) throw new Error(`timed out: ${what}`);
    await new Promise((r) => setTimeout(r, 25));
  }
}

function stats(xs: number[]): string {
  const s = [...xs].sort((a, b) => a - b);
  const med = s[Math.floor(s.length / 2)]!;
  return `${(med / 1000).toFixed(2)} s (min ${(s[0]! / 1000).toFixed(2)}, max ${(s.at(-1)! / 1000).toFixed(2)})`;
}

async function main(): Promise<void> {
  const loadAtStart = os.loadavg()[0]!;
  const tmp = await mkdtemp(path.join(os.tmpdir(), 'ap-bench-deploy-'));
  const repo = makeExampleRepo(tmp);
  // Warm the npm cache the way a developer's machine is after one install (not timed).
  execFileSync('npm', ['ci', '--prefer-offline', '--no-audit', '--no-fund'], { cwd: repo.path, stdio: 'ignore' });
  await rm(path.join(repo.path, 'node_modules'), { recursive: true, force: true });

  const extra = args['database-url'] ? ['--database-url', args['database-url']] : [];
  const dev: DevProcess = await startDev(path.join(tmp, 'data'), 0, extra);
  const cp = api(dev.url);
  const create: number[] = [];
  const patch: number[] = [];
  const redeploy: number[] = [];
  const phases: Record<string, number[]> = { clone: [], install: [], start: [] };

  const status = async (dep: string, rev: string) =>
    String((await cp.get(`/v2/deployments/${dep}/revisions/${rev}`)).body.status);
  const deployed = (dep: string, rev: string) =>
    poll(async () => {
      const s = await status(dep, rev);
      if (s.includes('FAILED')) throw new Error(`${rev} ${s}`);
      return s === 'DEPLOYED' ? true : undefined;
    }, `${rev} DEPLOYED`);
  const logs = async (dep: string, rev: string, type: string) =>
    (await cp.get(`/v2/deployments/${dep}/revisions/${rev}/logs?type=${type}&limit=1000&order=asc`)).body.logs as Log[];
  const at = (ls: Log[], prefix: string) => Date.parse(ls.find((l) => l.message.startsWith(prefix))!.timestamp);

  try {
    for (let i = 0; i < rounds; i++) {
      // Every round's first deployment runs npm ci (warm npm cache, empty install cache); the PATCH that follows
      // keeps the same lock file, so it links node_modules from the install cache.
      await rm(path.join(tmp, 'data', 'runtime', 'install-cache'), { recursive: true, force: true });
      let t = performance.now();
      const created = await cp.post('/v2/deployments', {
        name: `bench-${i}-${Date.now()}`,
        source: 'github',
        source_config: { repo_url: repo.path, deployment_type: 'dev' },
        source_revision_config: { repo_ref: 'main', graph_config_path: 'langgraph.json' },
        secrets: [],
      });
      if (created.status !== 201) throw new Error(`create: ${created.status} ${JSON.stringify(created.body)}`);
      const id = String(created.body.id);
      const r1 = String(created.body.latest_revision_id);
      await deployed(id, r1);
      create.push(performance.now() - t);
      const build = await logs(id, r1, 'build');
      const deploy = await poll(async () => {
        const ls = await logs(id, r1, 'deploy');
        return ls.some((l) => l.message.startsWith('agent server is healthy')) ? ls : undefined;
      }, 'deploy log');
      phases.clone!.push(at(build, '$ npm') - at(build, '$ git clone'));
      phases.install!.push(at(build, 'build complete') - at(build, '$ npm'));
      phases.start!.push(at(deploy, 'agent server is healthy') - at(deploy, 'starting agent server'));

      t = performance.now();
      await cp.patch(`/v2/deployments/${id}`, { source_revision_config: { repo_ref: 'v2' } });
      const r2 = String((await cp.get(`/v2/deployments/${id}`)).body.latest_revision_id);
      await deployed(id, r2);
      patch.push(performance.now() - t);

      t = performance.now();
      await cp.post(`/v2/deployments/${id}/revisions/${r1}/redeploy`);
      await poll(
        async () => ((await cp.get(`/v2/deployments/${id}`)).body.active_revision_id === r1 ? true : undefined),
        'redeploy',
      );
      await poll(
        async () => ((await fetch(`${dev.url}/deployments/${id}/ok`)).status === 200 ? true : undefined),
        'serving',
      );
      redeploy.push(performance.now() - t);

      await cp.delete(`/v2/deployments/${id}`);
      await poll(async () => ((await cp.get(`/v2/deployments/${id}`)).status === 404 ? true : undefined), 'deleted');
      console.log(
        `round ${i + 1}: create ${(create.at(-1)! / 1000).toFixed(2)} s, patch ${(patch.at(-1)! / 1000).toFixed(2)} s, redeploy ${(redeploy.at(-1)! / 1000).toFixed(2)} s`,
      );
    }
  } finally {
    await stopDev(dev);
    await rm(tmp, { recursive: true, force: true });
  }

  const mode = args['database-url'] ? 'Postgres (--database-url)' : 'embedded store';
  const report = [
    '# Deploy benchmark',
    '',
    `\`node --import tsx bench/deploy.ts --rounds ${rounds}${args['database-url'] ? ' --database-url ...' : ''}\` — ${new Date().toISOString().slice(0, 10)},`,
    `${os.cpus().length} CPUs (${os.cpus()[0]?.model.trim()}), Node ${process.version}, deployment data: ${mode}, warm npm cache.`,
    `1-minute load average at start ${loadAtStart.toFixed(1)}, at end ${os.loadavg()[0]!.toFixed(1)} (the machine is shared with other jobs).`,
    'Medians over the rounds (min, max). Targets from issue 4: POST -> DEPLOYED <= 30 s, redeploy of a built revision <= 2 s.',
    '',
    '| Measure | Time |',
    '|---|---|',
    `| POST /v2/deployments -> DEPLOYED | ${stats(create)} |`,
    `| &nbsp;&nbsp;git clone + checkout | ${stats(phases.clone!)} |`,
    `| &nbsp;&nbsp;npm ci --prefer-offline | ${stats(phases.install!)} |`,
    `| &nbsp;&nbsp;agent server start -> /ok | ${stats(phases.start!)} |`,
    `| PATCH repo_ref -> new revision DEPLOYED (clone, install cache hit, server start, switch) | ${stats(patch)} |`,
    `| redeploy of a built revision -> serving | ${stats(redeploy)} |`,
    '',
  ].join('\n');
  console.log(`\n${report}`);
  await mkdir(path.dirname(resultsFile), { recursive: true });
  await writeFile(resultsFile, report);
}

await main();

// A newcomer's second hour, against a real `agentplane dev` and real git repositories made here: a repo_url that
// can never build is a 422 that stores nothing; a deployment whose first build failed is fixed by PATCHing its
// repo_url (until something served); a graph with a syntax error or a missing import fails the build with one line
// naming file:line:column, said once by `deploy --wait`; deploy logs read as text; redeploy --wait shows progress;
// deleting a deployment removes its install cache.
import { execFile, execFileSync } from 'node:child_process';
import { existsSync, mkdirSync, mkdtempSync, readdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join, resolve } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { makeExampleRepo, type ExampleRepo } from '../operator/helpers/example-repo.ts';
import { API_KEY, TENANT, api, startDev, stopDev, waitFor, type DevProcess } from '../dev/helpers.ts';

const BIN = resolve(import.meta.dirname, '../../bin/agentplane.mjs');
const SYNTAX = 'graph "agent": src/agent.ts:1:16: Unexpected ";"';
const MISSING = 'graph "agent": src/agent.ts:1:8: cannot find module "no-such-package-xyz"';

let tmp: string;
let allowed: string;
let good: ExampleRepo;
let bad: ExampleRepo;
let dev: DevProcess;

function git(cwd: string, ...args: string[]): void {
  execFileSync('git', args, {
    cwd,
    env: {
      ...process.env,
      GIT_AUTHOR_NAME: 't',
      GIT_AUTHOR_EMAIL: 't@example.com',
      GIT_COMMITTER_NAME: 't',
      GIT_COMMITTER_EMAIL: 't@example.com',
    },
  });
}

/** Commits `firstLine` at the top of src/agent.ts on `branch` (made from main, or main itself). */
function breakAgent(repo: string, branch: string, firstLine: string): void {
  if (branch !== 'main') git(repo, 'checkout', '--quiet', '-b', branch, 'main');
  const file = join(repo, 'src', 'agent.ts');
  writeFileSync(file, `${firstLine}\n${readFileSync(file, 'utf8')}`);
  git(repo, 'commit', '--quiet', '-am', `break the agent on ${branch}`);
  git(repo, 'checkout', '--quiet', 'main');
}

type Result = { code: number; stdout: string; stderr: string };

function cli(args: string[]): Promise<Result> {
  return new Promise((res) => {
    execFile(
      process.execPath,
      [BIN, ...args],
      {
        cwd: tmp,
        env: { ...process.env, AGENTPLANE_URL: dev.url, AGENTPLANE_API_KEY: API_KEY, AGENTPLANE_TENANT: TENANT },
        maxBuffer: 16 * 1024 * 1024,
      },
      (err, stdout, stderr) => res({ code: err ? ((err as { code?: number }).code ?? 1) : 0, stdout, stderr }),
    );
  });
}

const count = (text: string, needle: string) => text.split(needle).length - 1;

async function revisionDone(depId: string, revId: string): Promise<Record<string, any>> {
  return waitFor(`revision ${revId} to finish`, async () => {
    const { body } = await api(dev.url).get(`/v2/deployments/${depId}/revisions/${revId}`);
    return /DEPLOYED|FAILED/.test(String(body.status)) ? body : undefined;
  });
}

beforeAll(async () => {
  tmp = mkdtempSync(join(tmpdir(), 'ap-source-fix-'));
  allowed = join(tmp, 'allowed');
  good = makeExampleRepo(join(allowed, 'good'));
  bad = makeExampleRepo(join(allowed, 'bad'));
  breakAgent(bad.path, 'main', 'const broken = ;');
  breakAgent(good.path, 'syntax', 'const broken = ;');
  breakAgent(good.path, 'missing-import', "import 'no-such-package-xyz';");
  mkdirSync(join(allowed, 'plain'));
  makeExampleRepo(join(tmp, 'outside'));
  dev = await startDev(join(tmp, 'data'), 0, ['--allow-local-repos', allowed]);
});

afterAll(async () => {
  if (dev) await stopDev(dev, 'SIGKILL');
  rmSync(tmp, { recursive: true, force: true });
});

describe('source fields, the build graph check and the CLI (agentplane dev)', () => {
  it('refuses repo_urls that can never build, fixes a failed first build, fails broken graphs once', async () => {
    const cp = api(dev.url);
    const body = (repoUrl: string) => ({
      name: 'fixme',
      source: 'github',
      source_config: { repo_url: repoUrl },
      source_revision_config: { repo_ref: 'main', graph_config_path: 'langgraph.json' },
    });

    // Each kind of repo_url that can never build: 422 naming the field and the problem; nothing stored.
    for (const [url, problem] of [
      ['.', /"\." is a relative path/],
      ['good/agent-repo', /is a relative path/],
      [join(tmp, 'outside', 'agent-repo'), /is outside the allowed roots \(--allow-local-repos: /],
      [join(allowed, 'nope'), /does not exist/],
      [join(allowed, 'plain'), /is not a git repository/],
    ] as const) {
      const res = await cp.post('/v2/deployments', body(url));
      expect(res.status, `${url}: ${JSON.stringify(res.body)}`).toBe(422);
      const detail = res.body.detail as { loc: string[]; msg: string }[];
      expect(detail.map((d) => d.loc.join('.'))).toContain('body.source_config.repo_url');
      expect(detail.map((d) => d.msg).join('; ')).toMatch(problem);
    }
    expect((await cp.get('/v2/deployments')).body.resources).toEqual([]);

    // A first build that fails on a syntax error: BUILD_FAILED with the one line naming file:line:column.
    const created = await cp.post('/v2/deployments', body(bad.path));
    expect(created.status).toBe(201);
    const depId = String(created.body.id);
    const first = await revisionDone(depId, String(created.body.latest_revision_id));
    expect(first).toMatchObject({ status: 'BUILD_FAILED', status_message: SYNTAX });

    // Nothing served yet: the source can be changed, the PATCH checks it like a create, and a new revision serves.
    const wrong = await cp.patch(`/v2/deployments/${depId}`, { source_config: { repo_url: join(allowed, 'plain') } });
    expect(wrong.status).toBe(422);
    expect(JSON.stringify(wrong.body)).toContain('is not a git repository');
    const fixed = await cp.patch(`/v2/deployments/${depId}`, { source_config: { repo_url: good.path } });
    expect(fixed.status, JSON.stringify(fixed.body)).toBe(200);
    expect(fixed.body.source_config.repo_url).toBe(good.path);
    const second = await revisionDone(depId, String(fixed.body.latest_revision_id));
    expect(second).toMatchObject({ status: 'DEPLOYED', revision_number: 2 });
    // Once something served, the source stays: the error says what to do instead.
    const late = await cp.patch(`/v2/deployments/${depId}`, { source_config: { repo_url: bad.path } });
    expect(late.status).toBe(400);
    expect(late.body.detail).toMatch(
      /source_config\.repo_url cannot be changed once .* delete the deployment and create it again/,
    );

    // deploy --wait on a syntax error: exit 1, the line said exactly once; a missing import fails the build too.
    const syntax = await cli(['deploy', '--name', 'fixme', '--ref', 'syntax', '--wait']);
    expect(syntax.code, syntax.stderr).toBe(1);
    expect(syntax.stderr).toMatch(/fixme revision 3: BUILD_FAILED/);
    expect(count(syntax.stderr, 'src/agent.ts:1:16')).toBe(1);
    expect(syntax.stderr).toContain(`deployment fixme revision 3 ended BUILD_FAILED: ${SYNTAX}`);
    const missing = await cli(['deploy', '--name', 'fixme', '--ref', 'missing-import', '--wait']);
    expect(missing.code, missing.stderr).toBe(1);
    expect(count(missing.stderr, 'no-such-package-xyz')).toBe(1);
    expect(missing.stderr).toContain(`deployment fixme revision 4 ended BUILD_FAILED: ${MISSING}`);

    // Deploy logs: the agent server's JSON lines read as "time LEVEL message fields"; --raw keeps them as stored.
    const [pretty, raw] = await Promise.all([
      cli(['revisions', 'logs', 'fixme', '2', '--type', 'deploy']),
      cli(['revisions', 'logs', 'fixme', '2', '--type', 'deploy', '--raw']),
    ]);
    expect(raw.stdout).toMatch(/^\{"level":"info",/m);
    expect(pretty.stdout).not.toMatch(/^\{"level"/m);
    expect(pretty.stdout).toMatch(/^\d\d:\d\d:\d\d INFO {2}\S/m);

    // redeploy --wait says what it is doing while the traffic moves.
    const v2 = await cli(['deploy', '--name', 'fixme', '--ref', 'v2', '--wait']);
    expect(v2.code, v2.stderr).toBe(0);
    const back = await cli(['revisions', 'redeploy', 'fixme', '2', '--wait']);
    expect(back.code, back.stderr).toBe(0);
    expect(back.stderr).toContain('fixme: sending the traffic to revision 2');
    expect(back.stderr).toMatch(/fixme revision 2: DEPLOYED \[\d+s\]/);
    expect(back.stdout).toMatch(/^deployment fixme serves revision 2 /);

    // get names the graphs served and their assistant ids, and the call example uses a real one.
    const shown = await cli(['deployments', 'get', 'fixme']);
    expect(shown.code, shown.stderr).toBe(0);
    expect(shown.stdout).toMatch(/^graphs:\s+agent \(assistant fe096781-5601-53d2-b2f6-0d3403f7e9ca\)$/m);
    expect(shown.stdout).toContain(`-d '{"assistant_id":"agent",`);

    // Deleting the deployment takes its install cache with it.
    const cache = join(tmp, 'data', 'runtime', 'install-cache');
    const entries = () => (existsSync(cache) ? readdirSync(cache).filter((n) => /^[0-9a-f]{32}$/.test(n)) : []);
    expect(entries().length).toBeGreaterThan(0);
    const del = await cli(['deployments', 'delete', 'fixme', '--wait']);
    expect(del.code, del.stderr).toBe(0);
    expect(entries()).toEqual([]);
  }, 900_000);
});

// `agentplane deploy|deployments|revisions` as a CI job runs them: child processes against a real `agentplane dev`,
// deploying a real git repository made from examples/agent, checked by exit code, output and the agent's answers.
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { Client } from '@langchain/langgraph-sdk';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { git, makeExampleRepo, type ExampleRepo } from '../operator/helpers/example-repo.ts';
import { TENANT, devCli, startDev, stopDev, workspaceKey, type CliResult, type DevProcess } from '../dev/helpers.ts';

let tmp: string;
let repo: ExampleRepo;
let dev: DevProcess;
let agentKey: string;

const cli = (args: string[], env: Record<string, string | undefined> = {}, cwd = tmp): Promise<CliResult> =>
  devCli(dev, args, { env, cwd });

async function ask(url: string, apiKey?: string): Promise<string> {
  const client = new Client({ apiUrl: url, apiKey, callerOptions: { maxRetries: 0 } });
  const thread = await client.threads.create();
  const values = (await client.runs.wait(thread.thread_id, 'agent', {
    input: { messages: [{ role: 'human', content: 'Ada' }] },
  })) as {
    messages: { content: unknown }[];
  };
  return String(values.messages.at(-1)!.content);
}

beforeAll(async () => {
  tmp = mkdtempSync(join(tmpdir(), 'ap-cli-'));
  repo = makeExampleRepo(tmp);
  // A branch whose langgraph.json the agent server refuses at start (graphs must be an object).
  git(repo.path, 'checkout', '--quiet', '-b', 'bad-config', 'main');
  // The graphs import (the build's check passes); the custom routes it names do not exist, which only a start finds.
  const config = { dependencies: ['.'], graphs: { agent: './src/agent.ts:graph' }, http: { app: './src/nope.ts:app' } };
  writeFileSync(join(repo.path, 'langgraph.json'), JSON.stringify(config));
  git(repo.path, 'commit', '--quiet', '-am', 'http.app names a file that does not exist');
  git(repo.path, 'checkout', '--quiet', 'main');
  dev = await startDev(join(tmp, 'data'));
  // Agents refuse the bootstrap key (it acts for every workspace): the agent is called with a key of the workspace.
  agentKey = await workspaceKey(dev.url);
});

afterAll(async () => {
  if (dev) await stopDev(dev, 'SIGKILL');
  rmSync(tmp, { recursive: true, force: true });
});

describe('agentplane deploy / deployments / revisions against agentplane dev', () => {
  it('deploys, updates from agentplane.yaml, fails with the log lines, lists, shows, redeploys and deletes', async () => {
    // Create and wait: exit 0 on DEPLOYED, a progress line per status, the build log streamed.
    const first = await cli([
      'deploy',
      '--name',
      'hello',
      '--repo-url',
      repo.path,
      '--ref',
      'main',
      '--secret',
      'SOME_TOKEN=s3cret',
      '--wait',
    ]);
    expect(first.code, first.stderr).toBe(0);
    expect(first.stderr).toContain('created deployment hello');
    expect(first.stderr).toMatch(/hello revision 1: BUILDING/);
    expect(first.stderr).toMatch(/hello revision 1: DEPLOYED/);
    expect(first.stderr).toContain(`  | $ git clone ${repo.path}`);
    expect(first.stderr).not.toContain('s3cret');
    expect(first.stdout).toMatch(/^hello revision 1 DEPLOYED: http:\/\/127\.0\.0\.1:\d+\n$/);

    // get --json: the API record; the agent answers at its URL with the tenant's key.
    const got = await cli(['deployments', 'get', 'hello', '--json']);
    expect(got.code, got.stderr).toBe(0);
    const dep = JSON.parse(got.stdout) as {
      id: string;
      url: string;
      name: string;
      secrets: { name: string }[];
      active_revision_id: string;
    };
    expect(dep).toMatchObject({ name: 'hello', secrets: [{ name: 'SOME_TOKEN' }] });
    // Read-only calls that do not depend on each other run at once (here and below).
    const [answer, shown] = await Promise.all([ask(dep.url, agentKey), cli(['deployments', 'get', dep.id])]);
    expect(answer).toBe('The greeting tool says: Hello, Ada!');
    expect(shown.stdout).toMatch(/^name:\s+hello$/m);
    expect(shown.stdout).toMatch(/^latest revision:\s+1 DEPLOYED/m);
    expect(shown.stdout).toMatch(/^health:\s+ready \(since /m);
    expect(shown.stdout).toContain(`API key of tenant ${TENANT}`);
    expect(shown.stdout).toContain(`curl -s -X POST ${dep.url}/runs/wait -H "X-Api-Key: $AGENTPLANE_API_KEY"`);

    // Update by name from a settings file (flags override it): a new revision on the same deployment, whose secret
    // (read from the environment) overrides the greeting of langgraph.json.
    writeFileSync(
      join(tmp, 'agentplane.yaml'),
      'name: hello\nrepo_url: agent-repo\nref: main\nsecrets_from_env: [AGENT_GREETING]\n',
    );
    // The file's secrets_from_env sends the environment: without a terminal it needs --trust-file.
    const untrusted = await cli(['deploy', '--ref', 'v2'], { AGENT_GREETING: 'Hej' });
    expect(untrusted).toMatchObject({ code: 2, stdout: '' });
    expect(untrusted.stderr).toContain('AGENT_GREETING (secrets_from_env)');
    const second = await cli(['deploy', '--ref', 'v2', '--wait', '--json', '--trust-file'], { AGENT_GREETING: 'Hej' });
    expect(second.code, second.stderr).toBe(0);
    expect(second.stderr).toContain('updated deployment hello');
    const out = JSON.parse(second.stdout) as {
      deployment: { id: string; url: string };
      revision: { revision_number: number; status: string; source_revision_config: { repo_ref: string } };
    };
    expect(out.deployment.id).toBe(dep.id);
    expect(out.revision).toMatchObject({
      revision_number: 2,
      status: 'DEPLOYED',
      source_revision_config: { repo_ref: 'v2' },
    });
    expect(await ask(dep.url, agentKey)).toBe('The greeting tool says: Hej, Ada!');
    // The file is read whenever present: its secrets_from_env must then be set.
    const unset = await cli(['deploy', '--ref', 'v2']);
    expect(unset).toMatchObject({ code: 2, stdout: '' });
    expect(unset.stderr.split('\n')[0]).toBe(
      'agentplane deploy: secrets_from_env AGENT_GREETING: the environment variable is not set',
    );
    rmSync(join(tmp, 'agentplane.yaml'));

    // A broken build: exit 1, the failing log lines as they ran and the status message once at the end (the build
    // log was streamed, so it is not repeated); the old revision keeps serving.
    const broken = await cli(['deploy', '--name', 'hello', '--ref', 'broken-install', '--wait']);
    expect(broken.code).toBe(1);
    expect(broken.stdout).toBe('');
    expect(broken.stderr).toMatch(/hello revision 3: BUILD_FAILED/);
    expect(broken.stderr).not.toContain('--- last lines of the build log ---');
    expect(broken.stderr).toMatch(
      /\ndeployment hello revision 3 ended BUILD_FAILED: npm ci [^\n]* exited with code 1: `npm ci` can only install packages when/,
    );
    expect(broken.stderr.split('exited with code 1').length).toBe(2);
    expect(broken.stderr).toMatch(/\n {2}\| \$ npm ci/); // streamed while it ran
    // A ref the repository lacks is refused at once (no revision), naming the ref and the one it was probably.
    const unknownRef = await cli(['deploy', '--name', 'hello', '--ref', 'bad-confg', '--wait']);
    expect(unknownRef.code).toBe(1);
    expect(unknownRef.stderr).toBe(
      'agentplane deploy: HTTP 422: body.source_revision_config.repo_ref: "bad-confg" is not a branch, tag or ' +
        `commit of ${repo.path} (did you mean "bad-config"?)\n`,
    );
    // The server cannot start: DEPLOY_FAILED with the agent server's own output.
    const noStart = await cli(['deploy', '--name', 'hello', '--ref', 'bad-config', '--wait']);
    expect(noStart.code).toBe(1);
    expect(noStart.stderr).toMatch(/hello revision 4: DEPLOY_FAILED/);
    expect(noStart.stderr).toContain('--- last lines of the deploy log ---');
    expect(noStart.stderr).toContain('http.app');

    // revisions list: newest first, the serving one starred; --json parses.
    const [stillServing, revs, revsJson] = await Promise.all([
      ask(dep.url, agentKey),
      cli(['revisions', 'list', 'hello']),
      cli(['revisions', 'list', 'hello', '--json']),
    ]);
    expect(stillServing).toBe('The greeting tool says: Hej, Ada!');
    expect(revs.code, revs.stderr).toBe(0);
    const lines = revs.stdout.trim().split('\n');
    expect(lines[0]).toMatch(/^REVISION\s+ID\s+STATUS\s+REF\s+COMMIT\s+CREATED\s+MESSAGE$/);
    expect(
      lines.slice(1, 5).map((l) =>
        l
          .split(/\s+/)
          .slice(0, 4)
          .filter((_, i) => i !== 1)
          .join(' '),
      ),
    ).toEqual(['4 DEPLOY_FAILED bad-config', '3 BUILD_FAILED broken-install', '2* DEPLOYED v2', '1 DEPLOYED main']);
    const revJson = JSON.parse(revsJson.stdout) as {
      revision_number: number;
      status: string;
      id: string;
    }[];
    expect(revJson.map((r) => r.revision_number)).toEqual([4, 3, 2, 1]);

    // revisions logs: the whole build log of revision 1, as lines; --json gives the entries.
    const [log1, log3Json] = await Promise.all([
      cli(['revisions', 'logs', 'hello', '1']),
      cli(['revisions', 'logs', 'hello', revJson[1]!.id, '--json']),
    ]);
    expect(log1.code, log1.stderr).toBe(0);
    // Its first line says what was built (main is checked out and clean: no warning follows).
    expect(log1.stdout.split('\n').slice(0, 2)).toEqual([
      `building ${repo.sha('main').slice(0, 12)} "agent greeting Hello" (main of ${repo.path})`,
      `$ git clone ${repo.path}`,
    ]);
    const log3 = JSON.parse(log3Json.stdout) as {
      type: string;
      message: string;
    }[];
    expect(log3.every((l) => l.type === 'build')).toBe(true);
    expect(log3.map((l) => l.message).join('\n')).toContain('npm ci');

    // Redeploy revision 1 without a rebuild, with its own settings and secrets; --wait returns once it serves.
    const back = await cli(['revisions', 'redeploy', 'hello', '1', '--wait']);
    expect(back.code, back.stderr).toBe(0);
    expect(back.stdout).toBe(`deployment hello serves revision 1 (${revJson[3]!.id})\n`);
    expect(await ask(dep.url, agentKey)).toBe('The greeting tool says: Hello, Ada!');

    // list: table and JSON.
    const [listed, listedJson] = await Promise.all([
      cli(['deployments', 'list']),
      cli(['deployments', 'list', '--json']),
    ]);
    expect(listed.stdout).toMatch(
      new RegExp(`^hello\\s+${dep.id}\\s+serving rev 1\\s+bad-config\\s+${dep.url.replace(/\./g, '\\.')}$`, 'm'),
    );
    expect((JSON.parse(listedJson.stdout) as { id: string }[]).map((d) => d.id)).toEqual([dep.id]);

    // Errors: one line with the HTTP status and detail (exit 1); usage errors exit 2.
    const [badKey, unknown, invalid, noTenant] = await Promise.all([
      cli(['deployments', 'list'], { AGENTPLANE_API_KEY: 'not-a-key-0123456789' }),
      cli(['revisions', 'list', 'nope']),
      cli(['deploy', '--name', 'other', '--repo-url', repo.path, '--ref', 'main', '--config-path', '../x.json']),
      cli(['deployments', 'list'], { AGENTPLANE_TENANT: '' }),
    ]);
    expect(badKey).toMatchObject({
      code: 1,
      stdout: '',
      stderr: 'agentplane deployments list: HTTP 401: Invalid API key.\n',
    });
    expect(unknown).toMatchObject({
      code: 1,
      stderr: 'agentplane revisions list: no deployment named or with id "nope"\n',
    });
    expect(invalid.code).toBe(1);
    expect(invalid.stderr).toMatch(
      /^agentplane deploy: HTTP 422: body\.source_revision_config\.graph_config_path: must not contain "\.\." segments\n$/,
    );
    // The bootstrap key acts for every workspace: it must name one (a key of one workspace need not).
    expect(noTenant.code).toBe(1);
    expect(noTenant.stderr).toBe(
      'agentplane deployments list: HTTP 403: Missing tenant (X-Tenant-Id header): this API key acts for every workspace; name one.\n',
    );

    // Delete --wait: gone from the API and from the deployment URL.
    const del = await cli(['deployments', 'delete', 'hello', '--wait']);
    expect(del).toMatchObject({ code: 0, stdout: `deleted deployment hello (${dep.id})\n` });
    expect(JSON.parse((await cli(['deployments', 'list', '--json'])).stdout)).toEqual([]);
    // Its origin closes with it (another dev process may take the freed port later: then it is not this agent).
    const after = await fetch(`${dep.url}/assistants/search`, {
      method: 'POST',
      headers: { 'X-Api-Key': agentKey, 'content-type': 'application/json' },
      body: '{}',
    }).then(
      (r) => r.status,
      () => 'closed',
    );
    expect(after).not.toBe(200);
  }, 480_000);
});

// A repository that carries an agentplane.yaml asking to publish its deployment and to send the deployer's
// environment as secrets, deployed the way a CI job does it (`agentplane deploy` in the checkout, no terminal):
// the CLI refuses before sending anything, naming what the file asked for. At a terminal it asks, and only a yes
// goes ahead; --trust-file, or the same settings given as flags, go ahead without asking.
import { execFile } from 'node:child_process';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join, resolve } from 'node:path';
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import { fakeControlPlane, type FakeControlPlane } from './helpers/fake-control-plane.ts';

const BIN = resolve(import.meta.dirname, '../../bin/agentplane.mjs');
const DEPLOYER_TOKEN = 'ghp_deployers-own-token-0123456789';

let repo: string;
let api: FakeControlPlane;

type Result = { code: number; stdout: string; stderr: string };

function run(file: string, args: string[], env: Record<string, string> = {}): Promise<Result> {
  return new Promise((res) => {
    execFile(
      file,
      args,
      {
        cwd: repo,
        env: {
          ...process.env,
          AGENTPLANE_URL: api.url,
          AGENTPLANE_API_KEY: 'k',
          AGENTPLANE_TENANT: 't',
          DEPLOYER_TOKEN,
          ...env,
        },
      },
      (err, stdout, stderr) => res({ code: err ? ((err as { code?: number }).code ?? 1) : 0, stdout, stderr }),
    );
  });
}

const cli = (args: string[]) => run(process.execPath, [BIN, ...args]);

/** The CLI at a terminal (util-linux `script` gives it one), `answer` typed in when it asks. */
const atTerminal = (args: string[], answer: string) =>
  run('/bin/sh', [
    '-c',
    `printf '${answer}\\n' | script -qec "${[process.execPath, BIN, ...args].join(' ')}" /dev/null`,
  ]);

/** What reached the control plane's deployment routes (the name lookup comes first). */
const sent = () => api.requests.filter((r) => r.path.startsWith('/v2/deployments'));

beforeAll(async () => {
  repo = mkdtempSync(join(tmpdir(), 'ap-hostile-repo-'));
  writeFileSync(
    join(repo, 'agentplane.yaml'),
    'name: innocent\nrepo_url: https://example.com/agent.git\nref: main\npublic: true\nsecrets_from_env: [DEPLOYER_TOKEN]\n',
  );
  // The name lookup finds nothing, so the CLI goes on to create the deployment (answered 503: the body is kept).
  api = await fakeControlPlane({ 'GET /v2/deployments': { resources: [], offset: 0 } });
});
afterEach(() => {
  api.requests.length = 0;
});
afterAll(async () => {
  await api.close();
  rmSync(repo, { recursive: true, force: true });
});

describe('agentplane deploy with an agentplane.yaml it did not write', () => {
  it('without a terminal: refused before anything is sent, naming what the file asked for', async () => {
    const r = await cli(['deploy', '--wait']);
    expect(r.code).toBe(2);
    expect(r.stderr).toContain(join(repo, 'agentplane.yaml'));
    expect(r.stderr).toContain('make the deployment public');
    expect(r.stderr).toContain('DEPLOYER_TOKEN (secrets_from_env)');
    expect(r.stderr).toContain('--trust-file');
    expect(r.stdout + r.stderr).not.toContain(DEPLOYER_TOKEN.slice(4));
    expect(api.requests).toEqual([]);
  });

  it('at a terminal: asks, and a no sends nothing', async () => {
    const r = await atTerminal(['deploy'], 'n');
    expect(r.stdout).toContain('Go ahead? [y/N]');
    expect(r.stdout).toContain('nothing deployed: the settings file was not confirmed');
    expect(api.requests).toEqual([]);
  });

  it('at a terminal: a yes goes ahead with what the file asked for', async () => {
    await atTerminal(['deploy'], 'y');
    const create = sent().find((r) => r.method === 'POST');
    expect(create).toBeDefined();
    const body = JSON.parse(create!.body) as { source_config: { access_mode: string }; secrets: unknown };
    expect(body.source_config.access_mode).toBe('public');
    expect(body.secrets).toEqual([{ name: 'DEPLOYER_TOKEN', value: DEPLOYER_TOKEN }]);
  });

  it.each([
    ['--trust-file', ['--trust-file']],
    ['the same settings as flags', ['--public', '--secret-from-env', 'DEPLOYER_TOKEN']],
  ])('with %s: goes ahead without asking', async (_, flags) => {
    const r = await cli(['deploy', ...flags]);
    expect(r.stderr).not.toContain('asks to');
    const create = sent().find((x) => x.method === 'POST');
    expect(JSON.parse(create!.body)).toMatchObject({ source_config: { access_mode: 'public' } });
  });

  it('a flag covers only what it names: the file alone still asks for the rest', async () => {
    const r = await cli(['deploy', '--public']);
    expect(r.code).toBe(2);
    expect(r.stderr).not.toContain('make the deployment public');
    expect(r.stderr).toContain('DEPLOYER_TOKEN (secrets_from_env)');
    expect(api.requests).toEqual([]);
  });
});

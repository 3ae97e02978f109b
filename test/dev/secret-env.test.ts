// The walkthrough of docs/real-model.md, without calling a provider: a graph that reads OPENAI_API_KEY as
// @langchain/openai does (from its process environment) is deployed to a real `agentplane dev` with the key as a
// secret taken from the CLI's environment (`--secret-from-env`), and answers with a digest of what it found. The
// secret wins over the placeholder in langgraph.json "env", and the value shows up in no answer of the platform.
import { execFile, execFileSync } from 'node:child_process';
import { createHash, randomBytes } from 'node:crypto';
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join, resolve } from 'node:path';
import { Client } from '@langchain/langgraph-sdk';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { makeExampleRepo, type ExampleRepo } from '../operator/helpers/example-repo.ts';
import { API_KEY, TENANT, startDev, stopDev, workspaceKey, type DevProcess } from './helpers.ts';

const BIN = resolve(import.meta.dirname, '../../bin/agentplane.mjs');
const PROBE = `// What a provider package would find: the key's digest and length, never the key.
import { createHash } from 'node:crypto';
import { Annotation, StateGraph } from '@langchain/langgraph';

const State = Annotation.Root({ found: Annotation<string> });

export const graph = new StateGraph(State)
  .addNode('probe', () => {
    const key = process.env.OPENAI_API_KEY;
    return { found: key ? \`sha256:\${createHash('sha256').update(key).digest('hex')} length:\${key.length}\` : 'unset' };
  })
  .addEdge('__start__', 'probe')
  .compile();
`;

let tmp: string;
let repo: ExampleRepo;
let dev: DevProcess;

function git(...args: string[]): void {
  execFileSync('git', args, {
    cwd: repo.path,
    env: {
      ...process.env,
      GIT_AUTHOR_NAME: 't',
      GIT_AUTHOR_EMAIL: 't@example.com',
      GIT_COMMITTER_NAME: 't',
      GIT_COMMITTER_EMAIL: 't@example.com',
    },
  });
}

function cli(args: string[], env: Record<string, string>): Promise<{ code: number; stdout: string; stderr: string }> {
  return new Promise((res) => {
    execFile(
      process.execPath,
      [BIN, ...args],
      {
        cwd: tmp,
        env: {
          ...process.env,
          AGENTPLANE_URL: dev.url,
          AGENTPLANE_API_KEY: API_KEY,
          AGENTPLANE_TENANT: TENANT,
          ...env,
        },
        maxBuffer: 16 * 1024 * 1024,
      },
      (err, stdout, stderr) => res({ code: err ? ((err as { code?: number }).code ?? 1) : 0, stdout, stderr }),
    );
  });
}

beforeAll(async () => {
  tmp = mkdtempSync(join(tmpdir(), 'ap-secret-env-'));
  repo = makeExampleRepo(tmp);
  git('checkout', '--quiet', '-b', 'key-probe', 'main');
  writeFileSync(join(repo.path, 'src/key-probe.ts'), PROBE);
  const config = JSON.parse(readFileSync(join(repo.path, 'langgraph.json'), 'utf8')) as {
    graphs: Record<string, string>;
    env: Record<string, string>;
  };
  config.graphs.key_probe = './src/key-probe.ts:graph';
  config.env.OPENAI_API_KEY = 'placeholder-in-langgraph-json';
  writeFileSync(join(repo.path, 'langgraph.json'), JSON.stringify(config, null, 2));
  git('add', '-A');
  git('commit', '--quiet', '-m', 'a graph that reports what OPENAI_API_KEY it sees');
  dev = await startDev(join(tmp, 'data'));
});

afterAll(async () => {
  if (dev) await stopDev(dev, 'SIGKILL');
  rmSync(tmp, { recursive: true, force: true });
});

describe('a provider key as a deployment secret', () => {
  it('reaches the agent process as OPENAI_API_KEY, over the langgraph.json placeholder, and nowhere else', async () => {
    const agentKey = await workspaceKey(dev.url);
    const secret = `sk-test-${randomBytes(16).toString('hex')}`;
    const deployed = await cli(
      [
        'deploy',
        '--name',
        'real-model',
        '--repo-url',
        repo.path,
        '--ref',
        'key-probe',
        '--secret-from-env',
        'OPENAI_API_KEY',
        '--wait',
        '--json',
      ],
      { OPENAI_API_KEY: secret },
    );
    expect(deployed.code, deployed.stderr).toBe(0);
    expect(deployed.stdout + deployed.stderr).not.toContain(secret);

    const got = await cli(['deployments', 'get', 'real-model', '--json'], {});
    expect(got.code, got.stderr).toBe(0);
    expect(got.stdout).not.toContain(secret);
    const dep = JSON.parse(got.stdout) as { url: string; secrets: { name: string }[] };
    expect(dep.secrets).toEqual([{ name: 'OPENAI_API_KEY' }]);

    const client = new Client({ apiUrl: dep.url, apiKey: agentKey, callerOptions: { maxRetries: 0 } });
    const values = (await client.runs.wait(null, 'key_probe', { input: {} })) as { found: string };
    const digest = createHash('sha256').update(secret).digest('hex');
    expect(values.found).toBe(`sha256:${digest} length:${secret.length}`);
    expect(dev.output()).not.toContain(secret);
  }, 300_000);
});

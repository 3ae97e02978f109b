// The walkthrough of docs/real-model.md, without calling a provider: a graph that reads OPENAI_API_KEY as
// @langchain/openai does (from its process environment) is deployed to a real `agentplane dev` with the key as a
// secret taken from the CLI's environment (`--secret-from-env`), and answers with a digest of what it found. The
// secret wins over the placeholder in langgraph.json "env", and the value shows up in no answer of the platform.
// The deployment's agent data is encrypted at rest under a key the platform keeps for it: a copy of its data folder
// holds no run input in clear, and a workspace secret named LANGGRAPH_AES_KEY does not replace the platform's key;
// `agentplane data-key rotate` while the platform runs, then a redeploy, leaves every live row under the new key.
import { execFileSync } from 'node:child_process';
import { createHash, randomBytes } from 'node:crypto';
import { mkdtempSync, readdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { Client } from '@langchain/langgraph-sdk';
import Database from 'better-sqlite3';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { DataKeyring } from '../../src/agent-server/storage/data-cipher.ts';
import { makeExampleRepo, type ExampleRepo } from '../operator/helpers/example-repo.ts';
import { LINKED_INSTALL, devCli, startDev, stopDev, workspaceKey, type DevProcess } from '../dev/helpers.ts';

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

/** What a workspace sets as its own LANGGRAPH_AES_KEY secret (32 bytes). */
const WORKSPACE_DATA_KEY = 'workspace-chosen-key-32-bytes-ok';

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

/** The deployments' embedded stores (SQLite files and their WAL) as text, as a copy of the data folder shows them. */
function dataFiles(): string {
  const deployments = join(tmp, 'data', 'runtime', 'deployments');
  return readdirSync(deployments, { recursive: true, encoding: 'utf8' })
    .filter((f) => /agentplane\.sqlite/.test(f))
    .map((f) => readFileSync(join(deployments, f)).toString('latin1'))
    .join('\n');
}

/**
 * The data key ids the live rows of the deployment's store are sealed under (read beside the running server, as
 * WAL allows; the files themselves may still hold replaced pages in the WAL until its next checkpoint).
 */
function keyIds(): string[] {
  const deployments = join(tmp, 'data', 'runtime', 'deployments');
  const [file] = readdirSync(deployments, { recursive: true, encoding: 'utf8' }).filter((f) =>
    /(^|\/)data\/agentplane\.sqlite$/.test(f),
  );
  const db = new Database(join(deployments, file!), { readonly: true });
  try {
    const rows = db
      .prepare(
        `SELECT substr(CAST(v AS TEXT), 1, 20) AS head FROM (
          SELECT "values" AS v FROM ap_threads UNION ALL SELECT kwargs FROM ap_runs
          UNION ALL SELECT checkpoint FROM checkpoints UNION ALL SELECT value FROM writes) WHERE v IS NOT NULL`,
      )
      .all() as { head: string | null }[];
    return [...new Set(rows.map((r) => /^apenc1:([0-9a-f]{12}):/.exec(r.head ?? '')?.[1] ?? 'clear'))].sort();
  } finally {
    db.close();
  }
}

const cli = (args: string[], env: Record<string, string>) => devCli(dev, args, { env, cwd: tmp });

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
        '--install-command',
        LINKED_INSTALL,
        '--secret-from-env',
        'OPENAI_API_KEY',
        '--secret-from-env',
        'LANGGRAPH_AES_KEY',
        '--wait',
        '--json',
      ],
      { OPENAI_API_KEY: secret, LANGGRAPH_AES_KEY: WORKSPACE_DATA_KEY },
    );
    expect(deployed.code, deployed.stderr).toBe(0);
    expect(deployed.stdout + deployed.stderr).not.toContain(secret);

    const got = await cli(['deployments', 'get', 'real-model', '--json'], {});
    expect(got.code, got.stderr).toBe(0);
    expect(got.stdout).not.toContain(secret);
    const dep = JSON.parse(got.stdout) as { url: string; secrets: { name: string }[] };
    expect(dep.secrets.map((x) => x.name).sort()).toEqual(['LANGGRAPH_AES_KEY', 'OPENAI_API_KEY']);

    const client = new Client({ apiUrl: dep.url, apiKey: agentKey, callerOptions: { maxRetries: 0 } });
    const values = (await client.runs.wait(null, 'key_probe', { input: {} })) as { found: string };
    const digest = createHash('sha256').update(secret).digest('hex');
    expect(values.found).toBe(`sha256:${digest} length:${secret.length}`);
    expect(dev.output()).not.toContain(secret);

    // A copy of the deployment's data (embedded store) after a run whose input carries a note.
    const note = `note-${randomBytes(12).toString('hex')}`;
    const thread = await client.threads.create();
    await client.runs.wait(thread.thread_id, 'key_probe', { input: { note } });
    const state = await client.threads.getState(thread.thread_id);
    expect(state.values).toMatchObject({ found: expect.any(String) });
    const files = dataFiles();
    expect(files).toContain('apenc1:');
    expect(files).not.toContain(note);
    // Sealed under the platform's key for the deployment, not the one the workspace set as a secret.
    expect(files).not.toContain(`apenc1:${DataKeyring.fromTexts(WORKSPACE_DATA_KEY).currentId}:`);
    expect(dev.output()).not.toContain('LANGGRAPH_AES_KEY=');

    // Rotation while the platform runs: the next start of the agent reads the old data with the previous key and
    // reseals it under the new one.
    const [before] = keyIds();
    expect(keyIds()).toEqual([before]);
    const rotated = await cli(['data-key', 'rotate', '--data-dir', join(tmp, 'data', 'control-plane'), '--json'], {});
    expect(rotated.code, rotated.stderr).toBe(0);
    expect(JSON.parse(rotated.stdout)).toEqual({ rotated: [expect.any(String)] });
    const redeployed = await cli(['deploy', '--name', 'real-model', '--ref', 'key-probe', '--wait'], {});
    expect(redeployed.code, redeployed.stderr).toBe(0);
    expect((await client.threads.getState(thread.thread_id)).values).toEqual(state.values);
    const deadline = Date.now() + 60_000;
    while (keyIds().includes(before!) && Date.now() < deadline) await new Promise((r) => setTimeout(r, 500));
    const after = keyIds();
    expect(after).toHaveLength(1);
    expect(after).not.toContain(before);
    expect(dataFiles()).not.toContain(note);
  }, 400_000);
});

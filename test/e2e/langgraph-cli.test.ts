// LangChain's own CLI, from PyPI, deploying to `agentplane dev`: `langgraph deploy --remote` uploads examples/agent
// as a tarball, agentplane builds it like a git source, and the agent answers the real SDK; a second deploy makes a
// new revision; a failing build is shown by the CLI with its reason; a wrong key and `--image` end with the CLI's
// one-line error. Everything goes through the CLI's own requests (support/langgraph-cli.ts installs it).
import { execFile } from 'node:child_process';
import { cpSync, mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join, resolve } from 'node:path';
import { Client } from '@langchain/langgraph-sdk';
import { afterAll, beforeAll, beforeEach, describe, expect, it } from 'vitest';
import { langgraphCli } from '../support/langgraph-cli.ts';
import { API_KEY, TENANT, api, startDev, stopDev, waitFor, workspaceKey, type DevProcess } from '../dev/helpers.ts';

const EXAMPLE = resolve(import.meta.dirname, '../../examples/agent');

let tmp: string;
let dev: DevProcess | undefined;
let cli = '';
let skip: string | undefined;
/** Attempts of the first test so far (CI retries a failed test). */
let attempts = 0;

beforeAll(async () => {
  const found = await langgraphCli();
  if ('skip' in found) {
    skip = found.skip;
    process.stderr.write(`skipped langgraph deploy tests: ${skip}\n`);
    return;
  }
  cli = found.bin;
  tmp = mkdtempSync(join(tmpdir(), 'ap-lgcli-'));
  // One build folder kept: an older revision's folder is pruned, so rolling back to it rebuilds from its stored bytes.
  dev = await startDev(join(tmp, 'data'), 0, ['--keep-builds', '1']);
}, 900_000);

beforeEach((ctx) => {
  if (skip) ctx.skip(skip);
});

afterAll(async () => {
  if (dev) await stopDev(dev, 'SIGKILL');
  if (tmp) rmSync(tmp, { recursive: true, force: true });
});

/** examples/agent as a user's checkout (no node_modules), greeting with `greeting`. */
function project(name: string, greeting: string): string {
  const dir = join(tmp, name);
  rmSync(dir, { recursive: true, force: true });
  cpSync(EXAMPLE, dir, { recursive: true, filter: (src) => !src.includes('node_modules') });
  const file = join(dir, 'langgraph.json');
  const config = JSON.parse(readFileSync(file, 'utf8')) as { env: Record<string, string> };
  config.env = { AGENT_GREETING: greeting };
  writeFileSync(file, JSON.stringify(config, null, 2));
  return dir;
}

/** `langgraph deploy ...` in `cwd`, as a user runs it from a terminal or CI; never throws. */
function deploy(
  cwd: string,
  args: string[],
  env: Record<string, string> = {},
): Promise<{ code: number; output: string }> {
  return new Promise((done) => {
    execFile(
      cli,
      ['deploy', '--no-input', ...args],
      {
        cwd,
        timeout: 600_000,
        env: {
          PATH: process.env.PATH ?? '/usr/bin:/bin',
          HOME: process.env.HOME ?? tmp,
          LANGSMITH_API_KEY: API_KEY,
          LANGSMITH_TENANT_ID: TENANT,
          LANGGRAPH_HOST_URL: dev!.url,
          ...env,
        },
      },
      (err, stdout, stderr) => {
        const code = err ? ((err as { code?: number }).code ?? 1) : 0;
        done({ code: typeof code === 'number' ? code : 1, output: `${stdout}${stderr}` });
      },
    );
  });
}

/**
 * What the platform says about the deployment a deploy named, for a deploy that did not end in success: each
 * revision's status and the last build and deploy log lines (with their times), and the tail of the dev process's
 * output. A CLI still waiting at BUILDING when its time ran out tells nothing by itself about where the build stood.
 */
async function whereItStood(output: string): Promise<string> {
  const id = /(?:Deployment ID: |Found existing deployment \(ID: )([0-9a-f-]{36})/.exec(output)?.[1];
  const lines = [output];
  if (id) {
    const cp = api(dev!.url);
    const revisions = (await cp.get(`/v2/deployments/${id}/revisions`)).body.resources as Record<string, any>[];
    for (const rev of revisions ?? []) {
      lines.push(`revision ${rev.revision_number} ${rev.id}: ${rev.status} ${rev.status_message ?? ''}`);
      for (const type of ['build', 'deploy']) {
        const page = (await cp.get(`/v2/deployments/${id}/revisions/${rev.id}/logs?type=${type}&limit=40&order=desc`))
          .body.logs as { timestamp: string; message: string }[] | undefined;
        for (const l of (page ?? []).reverse()) lines.push(`  ${type} ${l.timestamp} ${l.message}`);
      }
    }
  }
  lines.push('dev output (last 60 lines):', ...dev!.output().split('\n').slice(-60));
  return lines.join('\n');
}

/** `langgraph deploy` that must succeed: on failure, the message says where the deployment stood. */
async function deployed(cwd: string, args: string[]): Promise<{ code: number; output: string }> {
  const res = await deploy(cwd, args);
  if (res.code !== 0 || !res.output.includes('Deployment successful!')) {
    expect.fail(
      `langgraph deploy ${args.join(' ')} did not succeed (exit ${res.code}):\n${await whereItStood(res.output)}`,
    );
  }
  return res;
}

async function greet(url: string, key: string): Promise<string> {
  const client = new Client({ apiUrl: url, apiKey: key });
  const thread = await client.threads.create();
  const run = await client.runs.create(thread.thread_id, 'agent', {
    input: { messages: [{ role: 'human', content: 'Ada' }] },
  });
  await client.runs.join(thread.thread_id, run.run_id);
  const state = await client.threads.getState<{ messages: { content: unknown }[] }>(thread.thread_id);
  return String(state.values.messages.at(-1)!.content);
}

describe('langgraph deploy (LangChain CLI from PyPI) against agentplane dev', () => {
  it('builds examples/agent from its uploaded source, the agent answers the SDK, a redeploy makes a new revision, a rollback rebuilds the stored bytes', async () => {
    const cp = api(dev!.url);
    const key = await workspaceKey(dev!.url);

    // A name of its own on each attempt: a retry starts from no deployment, as the first attempt did.
    const name = `cli-agent-${++attempts}`;
    const first = await deployed(project('agent', 'Hello'), ['--remote', '--name', name]);
    const id = /Deployment ID: ([0-9a-f-]{36})/.exec(first.output)![1]!;
    const dep = (await cp.get(`/v2/deployments/${id}`)).body;
    expect(dep.source).toBe('internal_source');
    expect(await greet(dep.url as string, key)).toContain('Hello, Ada!');
    const firstRev = (await cp.get(`/v2/deployments/${id}/revisions?limit=1`)).body.resources[0];
    expect(firstRev.status).toBe('DEPLOYED');
    expect(firstRev.source_revision_config.source_tarball_sha256).toMatch(/^[0-9a-f]{64}$/);
    // The revision the create made, before any upload, had nothing to build: skipped, not failed.
    const created = (await cp.get(`/v2/deployments/${id}/revisions`)).body.resources.at(-1);
    expect([created.revision_number, created.status]).toEqual([1, 'SKIPPED']);

    // Same name: the CLI finds the deployment, uploads again and asks for a new revision.
    const second = await deployed(project('agent', 'Howdy'), ['--remote', '--name', name]);
    expect(second.output).toContain(`Found existing deployment (ID: ${id})`);
    const secondRev = (await cp.get(`/v2/deployments/${id}/revisions?limit=1`)).body.resources[0];
    expect(secondRev.revision_number).toBeGreaterThan(firstRev.revision_number);
    expect(secondRev.source_revision_config.source_tarball_sha256).not.toBe(
      firstRev.source_revision_config.source_tarball_sha256,
    );
    expect(await greet(dep.url as string, key)).toContain('Howdy, Ada!');

    // A third upload prunes the first revision's build folder (--keep-builds 1); rolling back to it then rebuilds
    // it from the bytes stored with it, not from anything the CLI sends.
    await deployed(project('agent', 'Hi'), ['--remote', '--name', name]);
    expect(await greet(dep.url as string, key)).toContain('Hi, Ada!');
    expect((await cp.post(`/v2/deployments/${id}/revisions/${firstRev.id}/redeploy`)).status).toBe(200);
    await waitFor(
      'the rollback to the first revision',
      async () => {
        const d = (await cp.get(`/v2/deployments/${id}`)).body;
        return d.active_revision_id === firstRev.id ? true : undefined;
      },
      600_000,
    );
    expect(await greet(dep.url as string, key)).toContain('Hello, Ada!');
    const log = (await cp.get(`/v2/deployments/${id}/revisions/${firstRev.id}/logs?type=build&limit=1000`)).body;
    const sha = firstRev.source_revision_config.source_tarball_sha256 as string;
    const extracted = (log.logs as { message: string }[]).filter(
      (l) => l.message === `extracted source tarball sha256:${sha}`,
    );
    expect(extracted.length).toBe(2);
  }, 900_000);

  it('shows a failing build with its reason, through /api-host', async () => {
    const dir = join(tmp, 'broken');
    mkdirSync(dir, { recursive: true });
    writeFileSync(
      join(dir, 'langgraph.json'),
      JSON.stringify({ node_version: '20', graphs: { agent: './src/missing.ts:graph' } }),
    );
    const res = await deploy(dir, ['--remote', '--name', 'cli-broken'], { LANGGRAPH_HOST_URL: `${dev!.url}/api-host` });
    expect(res.code, res.output).toBe(1);
    expect(res.output).toContain('Last build log lines:');
    expect(res.output).toContain('graph "agent": src/missing.ts: file not found');
    expect(res.output).toContain('Deployment failed');
  }, 600_000);

  it('ends with the CLI’s own error for a wrong key and for --image', async () => {
    const dir = project('agent-errors', 'Hello');
    const wrong = await deploy(dir, ['--remote', '--name', 'cli-agent'], {
      LANGSMITH_API_KEY: 'not-a-key-of-this-platform',
    });
    expect(wrong.code).toBe(1);
    expect(wrong.output).toMatch(/Error: GET \/v2\/deployments failed with status 401: Invalid API key\./);

    const image = await deploy(dir, ['--name', 'cli-image', '--image', 'agent:latest']);
    expect(image.code).toBe(1);
    expect(image.output).toMatch(/status 400: This agentplane has no registry to push images to/);
  }, 120_000);
});

// `agentplane dev` as a real process, attacked through its public API by a workspace: the build log must not show
// the dev process's own secrets, local paths outside the allowed roots and credentials in repo_url must not get
// through, and start-up says which isolation is in force.
import { execFileSync } from 'node:child_process';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { makeExampleRepo, type ExampleRepo } from '../operator/helpers/example-repo.ts';
import { API_KEY, LINKED_INSTALL, api, startDev, stopDev, waitFor, type DevProcess } from '../dev/helpers.ts';

let tmp: string;
let repo: ExampleRepo;
let outside: ExampleRepo;
let dev: DevProcess | undefined;

beforeAll(() => {
  tmp = mkdtempSync(join(tmpdir(), 'ap-dev-isolation-'));
  repo = makeExampleRepo(join(tmp, 'allowed'));
  outside = makeExampleRepo(join(tmp, 'outside'));
});

afterAll(async () => {
  if (dev) await stopDev(dev, 'SIGKILL');
  rmSync(tmp, { recursive: true, force: true });
});

type Rev = { status: string; status_message: string | null };

async function finished(base: string, depId: string, revId: string): Promise<Rev> {
  return waitFor(
    `revision ${revId} to finish building`,
    async () => {
      const { body } = await api(base).get(`/v2/deployments/${depId}/revisions/${revId}`);
      const s = String(body.status);
      return s === 'DEPLOYED' || s.includes('FAILED') || s === 'AWAITING_DEPLOY' || s === 'DEPLOYING'
        ? (body as Rev)
        : undefined;
    },
    60_000,
  );
}

async function buildLog(base: string, depId: string, revId: string): Promise<string> {
  const { body } = await api(base).get(`/v2/deployments/${depId}/revisions/${revId}/logs?type=build&limit=1000`);
  return (body.logs as { message: string }[]).map((l) => l.message).join('\n');
}

async function create(
  base: string,
  name: string,
  sourceConfig: Record<string, unknown>,
): Promise<{ depId: string; revId: string }> {
  const created = await api(base).post('/v2/deployments', {
    name,
    source: 'github',
    source_config: { deployment_type: 'dev', ...sourceConfig },
    source_revision_config: { repo_ref: 'main', graph_config_path: 'langgraph.json' },
    secrets: [{ name: 'MY_SECRET', value: 'mine-only-5150' }],
  });
  expect(created.status).toBe(201);
  return { depId: String(created.body.id), revId: String(created.body.latest_revision_id) };
}

describe('agentplane dev isolation', () => {
  it('keeps its own secrets, other folders and repo_url credentials away from a workspace', async () => {
    const token = 'ghp_devtoken_8a7b6c5d';
    dev = await startDev(join(tmp, 'data'), 0, ['--allow-local-repos', join(tmp, 'allowed'), '--log-level', 'info']);
    expect(dev.output()).toMatch(/isolation\s+(bwrap|sandbox disabled|bubblewrap not usable)/);

    // The build prints its whole environment into its own log.
    // (Then the packages, linked: the build imports the graph once it is installed.)
    const leak = await create(dev.url, 'leaky', {
      repo_url: repo.path,
      install_command: `env | sort && ${LINKED_INSTALL}`,
    });
    const leakRev = await finished(dev.url, leak.depId, leak.revId);
    expect(leakRev.status).not.toBe('BUILD_FAILED');
    const log = await buildLog(dev.url, leak.depId, leak.revId);
    expect(log).toContain('HOME=');
    expect(log).not.toMatch(/AGENTPLANE_/);
    expect(log).not.toContain(API_KEY);
    expect(log).not.toContain('mine-only-5150'); // secrets are for the agent server, not the build

    // A local path outside the allowed roots is refused before anything is stored (it could never build).
    const far = await api(dev.url).post('/v2/deployments', {
      name: 'far',
      source: 'github',
      source_config: { deployment_type: 'dev', repo_url: outside.path },
      source_revision_config: { repo_ref: 'main', graph_config_path: 'langgraph.json' },
    });
    expect(far.status).toBe(422);
    expect(JSON.stringify(far.body)).toMatch(/outside the allowed roots/);

    // The control plane refuses credentials in repo_url before anything is stored (the runtime's own redaction is
    // tested directly in test/operator/runtimes/local/local-isolation.test.ts); nothing echoes the token.
    const cred = await api(dev.url).post('/v2/deployments', {
      name: 'cred',
      source: 'github',
      source_config: { deployment_type: 'dev', repo_url: `https://bob:${token}@127.0.0.1:9/team/agent.git` },
      source_revision_config: { repo_ref: 'main', graph_config_path: 'langgraph.json' },
    });
    expect(cred.status).toBe(422);
    expect(JSON.stringify(cred.body)).toMatch(/integration/i);
    expect(JSON.stringify(cred.body)).not.toContain(token);
    expect((await api(dev.url).get('/v2/deployments?name_contains=cred')).body.resources).toEqual([]);
    expect(dev.output()).not.toContain(token);
  }, 90_000);

  // The step's process group is led by a guard that ends the group when the dev process's pipe closes; the shell's
  // child (sleep, not the shell's last command, so the shell forks it instead of becoming it) is what the kernel's
  // parent-death signal alone would leave running, sandboxed or not.
  it.each([['the default sandbox', []] as const, ['--sandbox none', ['--sandbox', 'none']] as const])(
    'ends a running build step when the dev process is killed with SIGKILL (%s)',
    { timeout: 150_000 },
    async (_name, sandboxArgs) => {
      if (dev) await stopDev(dev);
      const secs = `317.${Math.floor(Math.random() * 1e6)}`;
      dev = await startDev(join(tmp, `data-${secs}`), 0, ['--allow-local-repos', join(tmp, 'allowed'), ...sandboxArgs]);
      const slow = await create(dev.url, 'slow', {
        repo_url: repo.path,
        install_command: `sleep ${secs} && echo slept`,
      });
      const sleeping = () =>
        execFileSync('ps', ['-eo', 'pid=,args='], { encoding: 'utf8' })
          .split('\n')
          .filter((l) => l.trim().endsWith(`sleep ${secs}`));
      // What is left, for the failure message: state, parent, group and session tell which part did not end.
      const leftovers = () =>
        execFileSync('ps', ['-eo', 'pid=,ppid=,pgid=,sid=,stat=,args='], { encoding: 'utf8' })
          .split('\n')
          .filter((l) => l.includes(secs))
          .join('\n');
      try {
        await waitFor('the install step to run', async () => (sleeping().length > 0 ? true : undefined), 90_000);
        expect(slow.depId).toBeTruthy();
        await stopDev(dev, 'SIGKILL');
        dev = undefined;
        // The guard notices the closed pipe at once; the bound only leaves room for a loaded machine.
        await waitFor(
          'the install step to end with the dev process',
          async () => (sleeping().length === 0 ? true : undefined),
          45_000,
        ).catch((err: Error) => {
          throw new Error(`${err.message}; still running:\n${leftovers()}`);
        });
      } finally {
        for (const line of sleeping()) {
          try {
            process.kill(Number(line.trim().split(/\s+/)[0]), 'SIGKILL');
          } catch {
            // already gone
          }
        }
      }
    },
  );
});

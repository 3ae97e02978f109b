// resource_spec.memory_limit_mb on one machine, tried by a workspace whose graph wants more than it asked for: a
// deployment limited to 512 MB runs a graph that tries to take and hold 1100 MB. It must not get to hold it: the
// allocation fails and/or the agent server is killed (by the kernel under a cgroup, else by the runtime's
// watchdog), the deploy log says which limits were applied and what happened, and the deployment serves again
// afterwards, within its limit. Real dev process, real git repository, real SDK.
import { execFileSync } from 'node:child_process';
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { Client } from '@langchain/langgraph-sdk';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { makeExampleRepo, type ExampleRepo } from '../operator/helpers/example-repo.ts';
import { PACKAGE_ROOT } from '../../src/lib/package-root.ts';
import { api, startDev, stopDev, waitFor, workspaceKey, type DevProcess } from '../dev/helpers.ts';

let tmp: string;
let repo: ExampleRepo;
let dev: DevProcess | undefined;

const HOG = `// Takes \`mb\` megabytes in 20 MB pieces, touches every page, and keeps them for as long as the process lives.
// Each run counts only its own pieces: another run of the same server may be hoarding at the same time.
import { Annotation, END, START, StateGraph } from '@langchain/langgraph';

const State = Annotation.Root({ mb: Annotation<number>, held: Annotation<number> });
const hoard: Buffer[][] = [];

export const graph = new StateGraph(State)
  .addNode('hog', async (s: { mb: number }) => {
    const mine: Buffer[] = [];
    hoard.push(mine);
    while (mine.length * 20 < s.mb) {
      mine.push(Buffer.alloc(20 * 1024 * 1024, 1));
      await new Promise((r) => setTimeout(r, 5));
    }
    return { held: mine.length * 20 };
  })
  .addEdge(START, 'hog')
  .addEdge('hog', END)
  .compile();
`;

function git(...args: string[]): void {
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
}

beforeAll(() => {
  tmp = mkdtempSync(join(tmpdir(), 'ap-dev-memory-'));
  repo = makeExampleRepo(tmp);
  writeFileSync(join(repo.path, 'src', 'hog.ts'), HOG);
  const file = join(repo.path, 'langgraph.json');
  const config = JSON.parse(readFileSync(file, 'utf8')) as { graphs: Record<string, string> };
  config.graphs.hog = './src/hog.ts:graph';
  writeFileSync(file, JSON.stringify(config, null, 2));
  git('add', '-A');
  git('commit', '--quiet', '-m', 'a graph that hoards memory');
});

afterAll(async () => {
  if (dev) await stopDev(dev, 'SIGKILL');
  rmSync(tmp, { recursive: true, force: true });
});

async function deployLog(depId: string, revId: string): Promise<string> {
  const { body } = await api(dev!.url).get(`/v2/deployments/${depId}/revisions/${revId}/logs?type=deploy&limit=1000`);
  return (body.logs as { message: string }[]).map((l) => l.message).join('\n');
}

type Started = { thread_id: string; run_id: string };

/** Runs the hog graph for `mb` on a new thread: what it held, or why it did not finish. */
async function hog(
  client: Client,
  mb: number,
  started?: (run: Started) => void,
): Promise<{ held?: number; failure?: string }> {
  try {
    const thread = await client.threads.create();
    const run = await client.runs.create(thread.thread_id, 'hog', { input: { mb } });
    started?.(run);
    await client.runs.join(thread.thread_id, run.run_id);
    const done = await client.runs.get(thread.thread_id, run.run_id);
    if (done.status !== 'success') return { failure: `run ${done.status}` };
    const state = await client.threads.getState<{ held: number }>(thread.thread_id);
    return { held: state.values.held };
  } catch (err) {
    return { failure: (err as Error).message };
  }
}

describe('memory limits of agent servers on one machine', () => {
  it('a 512 MB deployment cannot hold 1100 MB: the allocation fails or the server is killed, and it comes back', async () => {
    if (dev) await stopDev(dev, 'SIGKILL'); // a CI retry: the failed attempt's dev process goes first
    dev = await startDev(join(tmp, 'data'), 0, ['--allow-local-repos', tmp]);
    const agentKey = await workspaceKey(dev.url);
    const created = await api(dev.url).post('/v2/deployments', {
      name: `hoarder-${Date.now().toString(36)}`, // a CI retry creates its own
      source: 'github',
      source_config: {
        repo_url: repo.path,
        resource_spec: { memory_mb: 128, memory_limit_mb: 512 },
        // agentplane's own packages (the same versions, mounted read-only in the sandbox) instead of an npm ci.
        install_command: `ln -s '${join(PACKAGE_ROOT, 'node_modules')}' node_modules`,
      },
      source_revision_config: { repo_ref: 'main', langgraph_config_path: 'langgraph.json' },
    });
    expect(created.status, JSON.stringify(created.body)).toBe(201);
    const depId = String(created.body.id);
    const revId = String(created.body.latest_revision_id);
    const rev = await waitFor('the revision to deploy', async () => {
      const { body } = await api(dev!.url).get(`/v2/deployments/${depId}/revisions/${revId}`);
      return body.status === 'DEPLOYED' || String(body.status).includes('FAILED') ? body : undefined;
    });
    expect(`${rev.status} ${rev.status_message ?? ''}`, await deployLog(depId, revId)).toMatch(/^DEPLOYED/);
    expect(await deployLog(depId, revId)).toMatch(/resource limits: memory 512 MB/);

    const url = String((await api(dev.url).get(`/v2/deployments/${depId}`)).body.url);
    const client = new Client({ apiUrl: url, apiKey: agentKey });
    // Within the limit the graph works.
    expect(await hog(client, 20)).toEqual({ held: 20 });

    let greedyRun: Started | undefined;
    const greedy = await hog(client, 1100, (run) => (greedyRun = run));
    expect(greedy.held, 'the graph held 1100 MB under a 512 MB limit').toBeUndefined();
    // Whatever it managed to take before failing, it may not keep: the server goes, and the log says why. The
    // watchdog's line ("out of memory ...; agent server killed") comes before the server's exit is logged: both.
    await waitFor(
      'the server to be stopped for its memory',
      async () => {
        const text = await deployLog(depId, revId);
        return /out of memory|was killed \(SIGKILL\)/.test(text) && /agent server (was killed|exited)/.test(text)
          ? text
          : undefined;
      },
      60_000,
    );

    // The runtime starts it again, and it serves within its limit. The greedy run is still on its thread, and the
    // restarted server would run it again once its lease runs out (runs survive a crash), to be killed again: its
    // owner cancels it, as one would, so the probe does not share the server with a run that is over the limit.
    expect(greedyRun).toBeDefined();
    let cancelled = false;
    const again = await waitFor(
      'the deployment to serve again',
      async () => {
        if (!cancelled) {
          cancelled = await client.runs.cancel(greedyRun!.thread_id, greedyRun!.run_id, false, 'interrupt').then(
            () => true,
            () => false,
          );
          if (!cancelled) return undefined;
        }
        const r = await hog(client, 20);
        return r.held !== undefined ? r : undefined;
      },
      90_000,
    );
    expect(again).toEqual({ held: 20 });
  }, 240_000);
});

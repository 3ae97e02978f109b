// One workspace cannot hold every build slot of `agentplane dev`: workspace A queues four builds that never end on
// their own (each install step calls a server of this test and waits for its answer), and workspace B's build still
// starts while all of A's are held. Real dev process, real git repository, real sandboxed build steps.
import { createServer, type ServerResponse } from 'node:http';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { makeExampleRepo, type ExampleRepo } from '../operator/helpers/example-repo.ts';
import { API_KEY, startDev, stopDev, waitFor, type DevProcess } from '../dev/helpers.ts';

let tmp: string;
let repo: ExampleRepo;
let dev: DevProcess | undefined;
/** Builds that have started (their install step called in), in order, and the answers that let them go on. */
const arrived: string[] = [];
const held: ServerResponse[] = [];
const hold = createServer((req, res) => {
  arrived.push(decodeURIComponent(req.url!.slice(1)));
  held.push(res);
});
let holdUrl: string;

beforeAll(async () => {
  tmp = mkdtempSync(join(tmpdir(), 'ap-dev-fair-'));
  repo = makeExampleRepo(tmp);
  await new Promise<void>((r) => hold.listen(0, '127.0.0.1', () => r()));
  holdUrl = `http://127.0.0.1:${(hold.address() as { port: number }).port}`;
});

afterAll(async () => {
  for (const res of held) res.end('go');
  if (dev) await stopDev(dev, 'SIGKILL');
  hold.closeAllConnections();
  await new Promise((r) => hold.close(r));
  rmSync(tmp, { recursive: true, force: true });
});

async function createHeld(tenant: string, name: string): Promise<void> {
  const res = await fetch(`${dev!.url}/v2/deployments`, {
    method: 'POST',
    headers: { 'X-Api-Key': API_KEY, 'X-Tenant-Id': tenant, 'content-type': 'application/json' },
    body: JSON.stringify({
      name,
      source: 'github',
      source_config: {
        repo_url: repo.path,
        // Waits, inside the sandbox, until the test answers; a build that never starts never calls.
        install_command: `node -e 'fetch(process.argv[1]).then((r) => r.text())' '${holdUrl}/${tenant}:${name}'`,
      },
      source_revision_config: { repo_ref: 'main', langgraph_config_path: 'langgraph.json' },
    }),
  });
  expect(res.status, await res.text()).toBe(201);
}

describe('build slots are shared fairly between workspaces', () => {
  it("a workspace's held builds do not keep another workspace's build from starting", async () => {
    dev = await startDev(join(tmp, 'data'), 0, ['--allow-local-repos', tmp, '--max-concurrent-builds', '2']);
    for (const n of ['a1', 'a2', 'a3', 'a4']) await createHeld('ws-a', n);
    await waitFor('a build of workspace A to start', async () => (arrived.length ? true : undefined), 120_000);

    await createHeld('ws-b', 'b1');
    await waitFor(
      `workspace B's build to start while A's are held (started: ${arrived.join(', ')})`,
      async () => (arrived.includes('ws-b:b1') ? true : undefined),
      120_000,
    );
    // Nothing of A was let go: A held one slot (its share of two), B got the other.
    expect(arrived.filter((a) => a.startsWith('ws-a:'))).toHaveLength(1);
    expect(arrived).toHaveLength(2);

    // Once A's running build ends, the next in line is A's again (B has nothing waiting), and still only one.
    const first = arrived[0]!;
    held[arrived.indexOf(first)]!.end('go');
    await waitFor('the next build of A to start', async () => (arrived.length === 3 ? true : undefined), 120_000);
    expect(arrived[2]).toMatch(/^ws-a:/);
  });
});

// `agentplane dev` stops on SIGTERM whatever WebSocket relays are open. A tenant's custom route never answers the
// upgrades it is sent (the way the attacker pinned the shared process), twenty of them wait on it through the proxy
// from clients that never close their side, and the platform's operator stops the process: it exits, and every client socket is closed. A real dev process,
// a real deployment built from a real git repository, raw upgrade requests over TCP.
import { execFileSync } from 'node:child_process';
import { cpSync, mkdirSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { connect, type Socket } from 'node:net';
import { tmpdir } from 'node:os';
import { join, resolve } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { LINKED_INSTALL, api, startDev, stopDev, waitFor, workspaceKey, type DevProcess } from './helpers.ts';

const FIXTURES = resolve(import.meta.dirname, 'fixtures');
const EXAMPLE_AGENT = resolve(import.meta.dirname, '../../examples/agent/src/agent.ts');
const SLOW_APP = `// A custom route that never answers, and one that says how many requests wait on it.
import { Hono } from 'hono';

let waiting = 0;
export const app = new Hono();
app.get('/app/slow', async () => {
  waiting++;
  return new Promise<Response>(() => undefined);
});
app.get('/app/waiting', (c) => c.json({ waiting }));
`;

let tmp: string;
let dev: DevProcess;

beforeAll(async () => {
  tmp = mkdtempSync(join(tmpdir(), 'ap-dev-relay-shutdown-'));
  const repo = join(tmp, 'slow-app');
  mkdirSync(join(repo, 'src'), { recursive: true });
  for (const f of ['package.json', 'package-lock.json']) cpSync(join(FIXTURES, 'platform-app', f), join(repo, f));
  cpSync(EXAMPLE_AGENT, join(repo, 'src/agent.ts'));
  writeFileSync(join(repo, 'src/app.ts'), SLOW_APP);
  writeFileSync(
    join(repo, 'langgraph.json'),
    JSON.stringify({
      node_version: '20',
      dependencies: ['.'],
      graphs: { agent: './src/agent.ts:graph' },
      http: { app: './src/app.ts:app' },
    }),
  );
  const who = { GIT_AUTHOR_NAME: 't', GIT_AUTHOR_EMAIL: 't@example.com', GIT_COMMITTER_NAME: 't' };
  const env = { ...process.env, ...who, GIT_COMMITTER_EMAIL: 't@example.com' };
  for (const args of [
    ['init', '--quiet', '-b', 'main'],
    ['add', '-A'],
    ['commit', '--quiet', '-m', 'slow app'],
  ])
    execFileSync('git', args, { cwd: repo, env });
  dev = await startDev(join(tmp, 'data'));
}, 120_000);

afterAll(async () => {
  if (dev) await stopDev(dev, 'SIGKILL');
  rmSync(tmp, { recursive: true, force: true });
});

describe('agentplane dev with WebSocket relays open', () => {
  it('stops on SIGTERM and closes every relayed socket', async () => {
    const cp = api(dev.url);
    const key = await workspaceKey(dev.url);
    const created = await cp.post('/v2/deployments', {
      name: 'slow-app',
      source: 'github',
      source_config: { repo_url: join(tmp, 'slow-app'), install_command: LINKED_INSTALL },
      source_revision_config: { repo_ref: 'main', graph_config_path: 'langgraph.json' },
    });
    expect(created.status, JSON.stringify(created.body)).toBe(201);
    const depId = String(created.body.id);
    const revId = String(created.body.latest_revision_id);
    const rev = await waitFor(
      `revision ${revId}`,
      async () => {
        const { body } = await cp.get(`/v2/deployments/${depId}/revisions/${revId}`);
        const s = String(body.status);
        return s === 'DEPLOYED' || s.includes('FAILED') ? body : undefined;
      },
      300_000,
    );
    expect(rev.status, String(rev.status_message)).toBe('DEPLOYED');
    const url = new URL(String((await cp.get(`/v2/deployments/${depId}`)).body.url));
    const waiting = async () => {
      const res = await fetch(`${url.origin}/app/waiting`, { headers: { 'x-api-key': key } });
      return res.status === 200 ? ((await res.json()) as { waiting: number }).waiting : -1;
    };
    await waitFor('the key to reach the agent', async () => ((await waiting()) === 0 ? true : undefined), 30_000);

    const sockets: Socket[] = [];
    const closed: Promise<void>[] = [];
    for (let i = 0; i < 20; i++) {
      // As the attacker's clients: they never close their side, whatever the proxy does with its own.
      const s = connect({ port: Number(url.port), host: url.hostname, allowHalfOpen: true });
      s.on('error', () => undefined);
      s.resume();
      closed.push(new Promise((r) => (s.once('end', () => r()), s.once('close', () => r()))));
      s.write(
        `GET /app/slow HTTP/1.1\r\nHost: ${url.host}\r\nConnection: Upgrade\r\nUpgrade: websocket\r\n` +
          `Sec-WebSocket-Version: 13\r\nSec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\nX-Api-Key: ${key}\r\n\r\n`,
      );
      sockets.push(s);
    }
    // Every upgrade waits in the tenant's route, through a relay of the proxy.
    await waitFor('twenty upgrades waiting in the custom route', async () =>
      (await waiting()) === 20 ? true : undefined,
    );

    const exited = stopDev(dev, 'SIGTERM');
    const outcome = await Promise.race([
      exited.then((code) => ({ code })),
      new Promise<'still running'>((r) => setTimeout(() => r('still running'), 90_000).unref()),
    ]);
    expect(outcome, dev.output().slice(-2000)).toEqual({ code: 0 });
    // The proxy ended its side of every relay.
    await Promise.all(closed);
    expect(sockets.every((s) => s.destroyed || s.readableEnded)).toBe(true);
    for (const s of sockets) s.destroy();
  }, 480_000);
});

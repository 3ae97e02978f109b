// A private repository reached through a plain git integration: a real git server (git http-backend behind Basic
// auth) serves a copy of examples/agent; `agentplane dev` clones it with the workspace's token and the agent answers.
// Without the integration the build fails with one line and no token; the token appears in no answer, log or file.
import { execFileSync, spawn } from 'node:child_process';
import { mkdtempSync, readdirSync, readFileSync, rmSync, statSync } from 'node:fs';
import { createServer, type Server } from 'node:http';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { Client } from '@langchain/langgraph-sdk';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { makeExampleRepo } from '../operator/helpers/example-repo.ts';
import { LINKED_INSTALL, api, startDev, stopDev, waitFor, workspaceKey, type DevProcess } from '../dev/helpers.ts';

const USER = 'deploy-bot';
const TOKEN = 'tok-private-repo-8c1e55d0a9f3';

let tmp: string;
let dataDir: string;
let dev: DevProcess;
let git: Server;
let repoUrl: string;
let host: string;
const answers: string[] = [];

/** `git http-backend` as CGI, for requests carrying Basic USER:TOKEN; anything else gets 401. */
function gitServer(projectRoot: string): Server {
  return createServer((req, res) => {
    const expected = `Basic ${Buffer.from(`${USER}:${TOKEN}`).toString('base64')}`;
    if (req.headers.authorization !== expected) {
      res.writeHead(401, { 'WWW-Authenticate': 'Basic realm="git"' }).end();
      return;
    }
    const url = new URL(req.url ?? '/', 'http://x');
    const cgi = spawn('git', ['http-backend'], {
      env: {
        PATH: process.env.PATH,
        GIT_PROJECT_ROOT: projectRoot,
        GIT_HTTP_EXPORT_ALL: '1',
        REQUEST_METHOD: req.method,
        PATH_INFO: decodeURIComponent(url.pathname),
        QUERY_STRING: url.search.slice(1),
        CONTENT_TYPE: req.headers['content-type'] ?? '',
        REMOTE_USER: USER,
        REMOTE_ADDR: '127.0.0.1',
        ...(req.headers['content-encoding'] ? { HTTP_CONTENT_ENCODING: req.headers['content-encoding'] } : {}),
        ...(req.headers['git-protocol'] ? { GIT_PROTOCOL: String(req.headers['git-protocol']) } : {}),
      },
    });
    req.pipe(cgi.stdin);
    let head = Buffer.alloc(0);
    let headerDone = false;
    cgi.stdout.on('data', (chunk: Buffer) => {
      if (headerDone) {
        res.write(chunk);
        return;
      }
      head = Buffer.concat([head, chunk]);
      const end = head.indexOf('\r\n\r\n');
      if (end < 0) return;
      headerDone = true;
      let status = 200;
      for (const line of head.subarray(0, end).toString('latin1').split('\r\n')) {
        const i = line.indexOf(':');
        const name = line.slice(0, i).trim();
        const value = line.slice(i + 1).trim();
        if (name.toLowerCase() === 'status') status = Number(value.split(' ')[0]);
        else res.setHeader(name, value);
      }
      res.writeHead(status);
      res.write(head.subarray(end + 4));
    });
    cgi.on('close', () => res.end());
  });
}

async function revisionDone(depId: string, revId: string) {
  const cp = api(dev.url);
  return waitFor(`revision ${revId}`, async () => {
    const r = await cp.get(`/v2/deployments/${depId}/revisions/${revId}`);
    answers.push(JSON.stringify(r.body));
    const s = String(r.body.status);
    return s === 'DEPLOYED' || s.includes('FAILED') ? r.body : undefined;
  });
}

function filesUnder(dir: string): string[] {
  return readdirSync(dir, { recursive: true, withFileTypes: true })
    .filter((e) => e.isFile())
    .map((e) => join(e.parentPath, e.name))
    .filter((f) => statSync(f).size < 64 * 1024 * 1024);
}

beforeAll(async () => {
  tmp = mkdtempSync(join(tmpdir(), 'ap-dev-private-'));
  dataDir = join(tmp, 'data');
  const repo = makeExampleRepo(tmp);
  const root = join(tmp, 'served');
  execFileSync('git', ['clone', '--quiet', '--bare', repo.path, join(root, 'agent.git')]);
  git = gitServer(root);
  await new Promise<void>((r) => git.listen(0, '127.0.0.1', r));
  const port = (git.address() as { port: number }).port;
  host = `127.0.0.1:${port}`;
  repoUrl = `http://${host}/agent.git`;
  // Only remote URLs: the local copy must not be a way around the server.
  dev = await startDev(dataDir, 0, []);
});

afterAll(async () => {
  if (dev) await stopDev(dev, 'SIGKILL');
  await new Promise((r) => git?.close(r));
  rmSync(tmp, { recursive: true, force: true });
});

describe('private repository through a git integration (agentplane dev)', () => {
  it('deploys with the integration, fails without it, and never shows the token', async () => {
    const cp = api(dev.url);
    const track = <T extends { body: unknown }>(r: T): T => {
      answers.push(JSON.stringify(r.body));
      return r;
    };

    const integration = track(
      await cp.post('/v1/integrations', { name: 'private git', host, username: USER, token: TOKEN }),
    );
    expect(integration.status, JSON.stringify(integration.body)).toBe(201);
    const integrationId = String(integration.body.id);
    track(await cp.get('/v1/integrations'));
    track(await cp.get(`/v1/integrations/${integrationId}`));

    const body = (name: string, integration_id?: string) => ({
      name,
      source: 'github',
      source_config: {
        repo_url: repoUrl,
        install_command: LINKED_INSTALL,
        ...(integration_id ? { integration_id } : {}),
      },
      source_revision_config: { repo_ref: 'main', graph_config_path: 'langgraph.json' },
    });

    // Another workspace cannot use the integration's id.
    const otherKey = JSON.parse(
      execFileSync(
        process.execPath,
        [
          join(import.meta.dirname, '../../bin/agentplane.mjs'),
          'api-key',
          'create',
          '--tenant',
          'other-ws',
          '--json',
          '--data-dir',
          join(dataDir, 'control-plane'),
        ],
        {
          encoding: 'utf8',
        },
      ),
    ) as { key: string };
    const stolen = await fetch(`${dev.url}/v1/integrations/${integrationId}`, {
      headers: { 'x-api-key': otherKey.key, 'x-tenant-id': 'other-ws' },
    });
    answers.push(await stolen.text());
    expect(stolen.status).toBe(404);

    // Without the integration: the clone is refused, the build fails with one line.
    const without = track(await cp.post('/v2/deployments', body('no-credential')));
    expect(without.status).toBe(201);
    const failed = await revisionDone(String(without.body.id), String(without.body.latest_revision_id));
    expect(failed.status).toBe('BUILD_FAILED');
    expect(String(failed.status_message)).not.toContain('\n');
    expect(String(failed.status_message).length).toBeGreaterThan(0);

    // With it: built from the private repository, deployed, and the agent answers (to a key of the workspace).
    const agentKey = await workspaceKey(dev.url);
    const created = track(await cp.post('/v2/deployments', body('with-credential', integrationId)));
    expect(created.status, JSON.stringify(created.body)).toBe(201);
    const depId = String(created.body.id);
    const rev = await revisionDone(depId, String(created.body.latest_revision_id));
    expect(`${rev.status} ${rev.status_message ?? ''}`).toMatch(/^DEPLOYED/);
    const url = String(track(await cp.get(`/v2/deployments/${depId}`)).body.url);
    const client = new Client({ apiUrl: url, apiKey: agentKey });
    const thread = await client.threads.create();
    const result = await client.runs.wait(thread.thread_id, 'agent', {
      input: { messages: [{ role: 'human', content: 'Ada' }] },
    });
    expect(JSON.stringify(result)).toContain('Hello, Ada!');

    for (const [depIdOf, revId] of [
      [depId, String(created.body.latest_revision_id)],
      [String(without.body.id), String(without.body.latest_revision_id)],
    ]) {
      for (const type of ['build', 'deploy'])
        track(await cp.get(`/v2/deployments/${depIdOf}/revisions/${revId}/logs?type=${type}`));
    }

    for (const a of answers) expect(a).not.toContain(TOKEN);
    expect(dev.output()).not.toContain(TOKEN);
    const leaked = filesUnder(dataDir).filter((f) => readFileSync(f).includes(Buffer.from(TOKEN)));
    expect(leaked).toEqual([]);
  });
});

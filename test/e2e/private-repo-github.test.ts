// A private repository reached through a GitHub App installation, end to end: a local GitHub stand-in (REST API
// with App JWT checks + git smart HTTP that takes only installation tokens) and a real `agentplane dev` configured
// with the App. The installation becomes an integration, its repository deploys and answers; a signed push webhook
// (delivered twice) makes exactly one new revision, which builds the pushed commit; GitHub refusing the token fails
// the revision with one line. No minted token appears in any answer, the dev output or the data dir. The same
// repository deployed on a local listener (`agentplane listener`): the listener asks the control plane for a token
// per build (POST /v2/listeners/{id}/git-credential) and its refusal becomes the build's one-line failure.
import { execFileSync } from 'node:child_process';
import { createHmac, randomUUID } from 'node:crypto';
import { mkdtempSync, readdirSync, readFileSync, rmSync, statSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { Client } from '@langchain/langgraph-sdk';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { makeExampleRepo, type ExampleRepo } from '../operator/helpers/example-repo.ts';
import { startFakeGitHub, type FakeGitHub } from '../support/github-api.ts';
import { startListener, stopListener, type ListenerProcess } from '../listener/helpers.ts';
import {
  LINKED_INSTALL,
  TENANT,
  api,
  startDev,
  stopDev,
  waitFor,
  workspaceKey,
  type DevProcess,
} from '../dev/helpers.ts';

const WEBHOOK_SECRET = 'whsec-dev-e2e-31b7c9a0';
const INSTALLATION = 77001;

let tmp: string;
let dataDir: string;
let dev: DevProcess;
let gh: FakeGitHub;
let repo: ExampleRepo;
let bare: string;
let listener: ListenerProcess | undefined;
const answers: string[] = [];

async function revisionDone(depId: string, revId: string) {
  const cp = api(dev.url);
  return waitFor(`revision ${revId}`, async () => {
    const r = await cp.get(`/v2/deployments/${depId}/revisions/${revId}`);
    answers.push(JSON.stringify(r.body));
    const s = String(r.body.status);
    return s === 'DEPLOYED' || s.includes('FAILED') ? r.body : undefined;
  });
}

/** A key of the workspace (agents refuse the bootstrap key), made once dev runs. */
let agentKey = '';

async function ask(url: string): Promise<string> {
  const client = new Client({ apiUrl: url, apiKey: agentKey });
  const thread = await client.threads.create();
  const result = await client.runs.wait(thread.thread_id, 'agent', {
    input: { messages: [{ role: 'human', content: 'Ada' }] },
  });
  return JSON.stringify(result);
}

beforeAll(async () => {
  tmp = mkdtempSync(join(tmpdir(), 'ap-dev-github-'));
  dataDir = join(tmp, 'data');
  repo = makeExampleRepo(tmp);
  bare = join(tmp, 'served', 'agent.git');
  execFileSync('git', ['clone', '--quiet', '--bare', repo.path, bare]);
  gh = await startFakeGitHub();
  gh.installations.set(INSTALLATION, {
    id: INSTALLATION,
    account: 'acme',
    createdAt: new Date().toISOString(),
    repos: [
      { id: 1, owner: 'acme', name: 'agent', default_branch: 'main', path: bare },
      { id: 2, owner: 'acme', name: 'other', default_branch: 'main' },
    ],
  });
  const keyFile = join(tmp, 'app-key.pem');
  writeFileSync(keyFile, gh.privateKey, { mode: 0o600 });
  // The webhook secret is an environment variable only (the dev child inherits the test's environment).
  process.env.AGENTPLANE_GITHUB_WEBHOOK_SECRET = WEBHOOK_SECRET;
  dev = await startDev(dataDir, 0, [
    '--github-app-id',
    gh.appId,
    '--github-app-private-key-file',
    keyFile,
    '--github-api-url',
    gh.apiUrl,
  ]);
  agentKey = await workspaceKey(dev.url);
});

afterAll(async () => {
  delete process.env.AGENTPLANE_GITHUB_WEBHOOK_SECRET;
  if (listener) await stopListener(listener, 'SIGKILL');
  if (dev) await stopDev(dev, 'SIGKILL');
  await gh?.close();
  rmSync(tmp, { recursive: true, force: true });
});

describe('private repository through a GitHub App installation (agentplane dev)', () => {
  it('deploys, builds on a signed push exactly once, fails with one line when GitHub refuses, never leaks a token', async () => {
    const cp = api(dev.url);
    const track = <T extends { body: unknown }>(r: T): T => {
      answers.push(JSON.stringify(r.body));
      return r;
    };

    const reg = track(await cp.post('/v1/integrations/github/install', { installation_id: INSTALLATION }));
    expect(reg.status, JSON.stringify(reg.body)).toBe(201);
    const integrationId = String(reg.body.id);
    const repos = track(await cp.get(`/v1/integrations/github/${integrationId}/repos`));
    expect(repos.body).toEqual([
      expect.objectContaining({ name: 'agent', owner: 'acme', url: `${gh.url}/acme/agent` }),
      expect.objectContaining({ name: 'other', owner: 'acme' }),
    ]);

    const body = (name: string, repoUrl: string) => ({
      name,
      source: 'github',
      source_config: {
        repo_url: repoUrl,
        integration_id: integrationId,
        build_on_push: true,
        install_command: LINKED_INSTALL,
      },
      source_revision_config: { repo_ref: 'main', graph_config_path: 'langgraph.json' },
    });
    const outside = track(await cp.post('/v2/deployments', body('outside', `${gh.url}/globex/agent`)));
    expect(outside.status).toBe(422);

    const created = track(await cp.post('/v2/deployments', body('from-github', `${gh.url}/acme/agent`)));
    expect(created.status, JSON.stringify(created.body)).toBe(201);
    const depId = String(created.body.id);
    const first = await revisionDone(depId, String(created.body.latest_revision_id));
    expect(`${first.status} ${first.status_message ?? ''}`).toMatch(/^DEPLOYED/);
    const url = String(track(await cp.get(`/v2/deployments/${depId}`)).body.url);
    expect(await ask(url)).toContain('Hello, Ada!');
    // The clone went to the git server, which serves only to Basic x-access-token:<installation token>.
    expect(gh.requests.some((r) => r.path.startsWith('/acme/agent/'))).toBe(true);

    // A push to main (the v2 commit), delivered twice: one revision, built from the pushed commit.
    execFileSync('git', ['--git-dir', bare, 'update-ref', 'refs/heads/main', repo.sha('v2')]);
    const payload = JSON.stringify({
      ref: 'refs/heads/main',
      after: repo.sha('v2'),
      installation: { id: INSTALLATION },
      repository: { full_name: 'acme/agent' },
    });
    const delivery = randomUUID();
    const deliver = (signature: string) =>
      fetch(`${dev.url}/v1/integrations/github/webhook`, {
        method: 'POST',
        headers: {
          'content-type': 'application/json',
          'x-github-event': 'push',
          'x-github-delivery': delivery,
          'x-hub-signature-256': signature,
        },
        body: payload,
      });
    const signature = `sha256=${createHmac('sha256', WEBHOOK_SECRET).update(payload).digest('hex')}`;
    const forged = await deliver(`sha256=${'0'.repeat(64)}`);
    expect(forged.status).toBe(401);
    const d1 = await deliver(signature);
    const d2 = await deliver(signature);
    const a1 = (await d1.json()) as { revisions: { revision_id: string }[] };
    const a2 = (await d2.json()) as { revisions: unknown[]; repeated: number };
    expect(a1.revisions).toHaveLength(1);
    expect(a2).toEqual({ revisions: [], repeated: 1 });
    const revisions = track(await cp.get(`/v2/deployments/${depId}/revisions`));
    expect(revisions.body.resources).toHaveLength(2);
    const pushed = await revisionDone(depId, a1.revisions[0]!.revision_id);
    expect(`${pushed.status} ${pushed.status_message ?? ''}`).toMatch(/^DEPLOYED/);
    await waitFor('the pushed commit to answer', async () =>
      (await ask(url)).includes('Howdy, Ada!') ? true : undefined,
    );

    // GitHub refuses the App's credentials when the next build asks for a token: BUILD_FAILED, one line.
    gh.failMint.push(401);
    const rebuild = track(await cp.post(`/v2/deployments/${depId}/revisions`));
    expect(rebuild.status, JSON.stringify(rebuild.body)).toBe(201);
    const failed = await revisionDone(depId, String(rebuild.body.id));
    expect(failed.status).toBe('BUILD_FAILED');
    expect(String(failed.status_message)).toMatch(/GitHub refused the App's credentials \(401\)/);
    expect(String(failed.status_message)).not.toContain('\n');

    for (const type of ['build', 'deploy'])
      for (const rev of [first.id, pushed.id, failed.id])
        track(await cp.get(`/v2/deployments/${depId}/revisions/${rev}/logs?type=${type}`));
    track(await cp.get(`/v1/integrations/${integrationId}`));
    track(await cp.get('/v1/integrations/github/install'));

    expect(gh.tokens.length).toBeGreaterThanOrEqual(4);
    // Nor the App's private key (a line of its body).
    const keyLine = gh.privateKey.split('\n')[5]!;
    const secrets = [...gh.tokens, keyLine];
    // Each file of the data dir read once (hard links to one inode once: builds link node_modules from the install
    // cache) and searched for every secret.
    const seenInodes = new Set<string>();
    const leaks: string[] = [];
    for (const e of readdirSync(dataDir, { recursive: true, withFileTypes: true })) {
      if (!e.isFile()) continue;
      const f = join(e.parentPath, e.name);
      const st = statSync(f);
      if (st.size >= 64 * 1024 * 1024 || seenInodes.has(`${st.dev}:${st.ino}`)) continue;
      seenInodes.add(`${st.dev}:${st.ino}`);
      const data = readFileSync(f);
      for (const secret of secrets) if (data.includes(Buffer.from(secret))) leaks.push(`${f}: ${secret.slice(0, 8)}…`);
    }
    expect(leaks).toEqual([]);
    for (const token of gh.tokens) {
      for (const a of answers) expect(a).not.toContain(token);
      expect(dev.output()).not.toContain(token);
    }
    expect(dev.output()).not.toContain(keyLine);
  }, 400_000);

  it('deploys on a local listener, which asks the control plane for each build token; a refusal fails the build in one line', async () => {
    const cp = api(dev.url);
    const track = <T extends { body: unknown }>(r: T): T => {
      answers.push(JSON.stringify(r.body));
      return r;
    };
    const installs = track(await cp.get('/v1/integrations/github/install')).body as { id: string }[];
    const integrationId = installs.length
      ? installs[0]!.id
      : String(track(await cp.post('/v1/integrations/github/install', { installation_id: INSTALLATION })).body.id);
    const lid = String(track(await cp.post('/v2/listeners', { compute_type: 'local', compute_id: 'private' })).body.id);
    const key = String((await cp.post(`/v2/listeners/${lid}/keys`, {})).body.key);
    const created = track(
      await cp.post('/v2/deployments', {
        name: 'private-on-listener',
        source: 'github',
        source_config: {
          repo_url: `${gh.url}/acme/agent`,
          integration_id: integrationId,
          listener_id: lid,
          install_command: LINKED_INSTALL,
        },
        source_revision_config: { repo_ref: 'main', graph_config_path: 'langgraph.json' },
      }),
    );
    expect(created.status, JSON.stringify(created.body)).toBe(201);
    const depId = String(created.body.id);
    const minted = gh.tokens.length;
    const clones = () => gh.requests.filter((r) => r.path.startsWith('/acme/agent/')).length;
    const clonedBefore = clones();
    const lisDir = join(tmp, 'listener');
    listener = await startListener({
      controlPlaneUrl: dev.url,
      apiKey: key,
      tenant: TENANT,
      listenerId: lid,
      dataDir: lisDir,
    });
    // The workspace declares where this listener serves; the URLs it reports must lie under it.
    expect(track(await cp.patch(`/v2/listeners/${lid}`, { base_url: listener.url })).status).toBe(200);

    const first = await revisionDone(depId, String(created.body.latest_revision_id));
    expect(`${first.status} ${first.status_message ?? ''}`).toMatch(/^DEPLOYED/);
    // The listener cloned from the git server (installation tokens only) with a token minted for this build.
    expect(gh.tokens.length).toBeGreaterThan(minted);
    expect(clones()).toBeGreaterThan(clonedBefore);
    const url = String(track(await cp.get(`/v2/deployments/${depId}`)).body.url);
    expect(url.startsWith(listener.url!)).toBe(true);
    expect(await ask(url)).toMatch(/(Hello|Howdy), Ada!/);

    // GitHub refuses the App's credentials when the listener asks for the next build's token: BUILD_FAILED, one
    // line from the control plane's refusal.
    gh.failMint.push(401);
    const rebuild = track(await cp.post(`/v2/deployments/${depId}/revisions`));
    expect(rebuild.status, JSON.stringify(rebuild.body)).toBe(201);
    const failed = await revisionDone(depId, String(rebuild.body.id));
    expect(failed.status).toBe('BUILD_FAILED');
    expect(String(failed.status_message)).toMatch(
      /control plane refused a git credential \(502\): .*GitHub refused the App's credentials \(401\)/,
    );
    expect(String(failed.status_message)).not.toContain('\n');

    for (const type of ['build', 'deploy'])
      for (const rev of [first.id, failed.id])
        track(await cp.get(`/v2/deployments/${depId}/revisions/${rev}/logs?type=${type}`));
    await stopListener(listener);
    const files = readdirSync(lisDir, { recursive: true, withFileTypes: true })
      .filter((e) => e.isFile())
      .map((e) => join(e.parentPath, e.name))
      .filter((f) => statSync(f).size < 64 * 1024 * 1024);
    for (const token of gh.tokens) {
      for (const a of answers) expect(a).not.toContain(token);
      expect(listener.output()).not.toContain(token);
      expect(dev.output()).not.toContain(token);
      expect(files.filter((f) => readFileSync(f).includes(Buffer.from(token)))).toEqual([]);
    }
  }, 400_000);
});

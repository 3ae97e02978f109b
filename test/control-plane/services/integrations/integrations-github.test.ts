// GitHub App integrations against a local GitHub stand-in speaking the real REST protocol (App JWT checked against
// the App's public key, installation tokens, Link pagination): registration (admin POST, setup redirect with a
// single-use state), repository listing, deployments limited to repositories the installation sees, build tokens,
// GitHub faults as one-line reasons, and build on push through the signed App webhook and the generic webhook of a
// git integration, each delivery making at most one revision. Played as an attacker from a second workspace.
import { createHmac, randomUUID } from 'node:crypto';
import { mkdtempSync, readdirSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import type { FastifyInstance } from 'fastify';
import { pino } from 'pino';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createControlPlane } from '../../../../src/control-plane/app.ts';
import { parseControlPlaneConfig } from '../../../../src/control-plane/config.ts';
import { createApiKey } from '../../../../src/control-plane/api-keys/keys.ts';
import { buildCredentialResolver } from '../../../../src/git/credentials.ts';
import { createGitHubApp, type GitHubApp } from '../../../../src/git/github-app.ts';
import { openEmbeddedPlatformState } from '../../../../src/state/embedded/index.ts';
import type { PlatformState } from '../../../../src/state/types.ts';
import { silentLogger } from '../../../../src/lib/logger.ts';
import { startFakeGitHub, type FakeGitHub } from '../../../support/github-api.ts';
import { githubBody } from '../../helpers/harness.ts';

const WEBHOOK_SECRET = 'whsec-app-7f1c2e9d4b';
const INST_A = 5101;
const INST_B = 5202;

let dir: string;
let store: PlatformState;
let gh: FakeGitHub;
let github: GitHubApp;
let app: FastifyInstance;
let admin: string;
let keyA: string;
let keyB: string;
const answers: string[] = [];

const call = async (method: string, url: string, key: string | undefined, tenant: string, body?: unknown) => {
  const res = await app.inject({
    method: method as 'GET',
    url,
    headers: key ? { 'x-api-key': key, 'x-tenant-id': tenant } : {},
    ...(body === undefined ? {} : { payload: body as object }),
  });
  answers.push(res.body);
  return res;
};

const sign = (secret: string, body: string) => `sha256=${createHmac('sha256', secret).update(body).digest('hex')}`;
const hook = async (url: string, body: string, headers: Record<string, string>) => {
  const res = await app.inject({
    method: 'POST',
    url,
    headers: { 'content-type': 'application/json', ...headers },
    payload: body,
  });
  answers.push(res.body);
  return res;
};

const revisionCount = async (tenant: string, key: string, depId: string) =>
  (await call('GET', `/v2/deployments/${depId}/revisions`, key, tenant)).json().resources.length as number;

beforeAll(async () => {
  dir = mkdtempSync(join(tmpdir(), 'ap-cp-gh-'));
  gh = await startFakeGitHub();
  const now = new Date().toISOString();
  const repos = Array.from({ length: 230 }, (_, i) => ({
    id: 9000 + i,
    owner: 'acme',
    name: i === 0 ? 'agent' : `repo-${i}`,
    default_branch: 'main',
  }));
  gh.installations.set(INST_A, { id: INST_A, account: 'acme', repos, createdAt: now });
  gh.installations.set(INST_B, {
    id: INST_B,
    account: 'globex',
    repos: [{ id: 7000, owner: 'globex', name: 'secret-agent', default_branch: 'main' }],
    createdAt: now,
  });
  github = createGitHubApp({
    appId: gh.appId,
    privateKey: gh.privateKey,
    apiUrl: gh.apiUrl,
    webUrl: gh.url,
    webhookSecret: WEBHOOK_SECRET,
    appSlug: 'agentplane-test',
  });
  store = openEmbeddedPlatformState({ dataDir: dir });
  app = await createControlPlane({ store, logger: silentLogger(), consoleDir: false, github });
  admin = (await createApiKey(store, { tenants: ['*'] })).key;
  keyA = (await createApiKey(store, { tenants: ['team-a'] })).key;
  keyB = (await createApiKey(store, { tenants: ['team-b'] })).key;
});

afterAll(async () => {
  await app?.close();
  await store?.close();
  await gh?.close();
  rmSync(dir, { recursive: true, force: true });
});

describe('GitHub App integrations', () => {
  let intA: string;
  let intB: string;
  let depA: string;

  it('registers installations (admin POST, or setup redirect with a single-use state bound to the workspace)', async () => {
    // A workspace key cannot claim an installation by its id alone.
    expect(
      (await call('POST', '/v1/integrations/github/install', keyA, 'team-a', { installation_id: INST_A })).statusCode,
    ).toBe(403);
    const reg = await call('POST', '/v1/integrations/github/install', admin, 'team-a', { installation_id: INST_A });
    expect(reg.statusCode, reg.body).toBe(201);
    expect(reg.json()).toMatchObject({ type: 'github', installation_id: INST_A, account: 'acme', host: gh.host });
    intA = reg.json().id;
    // The App's JWT was checked by the stand-in: the installation was read with it.
    expect(gh.requests.some((r) => r.path === `/api/v3/app/installations/${INST_A}` && r.auth === 'app')).toBe(true);

    // An installation already taken (by this or any workspace) is a 409; an unknown one a 404.
    expect(
      (await call('POST', '/v1/integrations/github/install', admin, 'team-b', { installation_id: INST_A })).statusCode,
    ).toBe(409);
    expect(
      (await call('POST', '/v1/integrations/github/install', admin, 'team-b', { installation_id: 999 })).statusCode,
    ).toBe(404);
    expect(
      (await call('POST', '/v1/integrations/github/install', admin, 'team-b', { installation_id: 'x' })).statusCode,
    ).toBe(422);

    // team-b installs the App through the setup URL.
    // A state names the account the App is being installed on.
    expect((await call('POST', '/v1/integrations/github/install/start', keyB, 'team-b', {})).statusCode).toBe(422);
    const start = await call('POST', '/v1/integrations/github/install/start', keyB, 'team-b', { account: 'globex' });
    expect(start.statusCode).toBe(201);
    const { state, install_url } = start.json();
    expect(install_url).toBe(`${gh.url}/apps/agentplane-test/installations/new?state=${state}`);
    // Someone else's state or a made-up one: refused, nothing registered.
    expect(
      (await call('GET', `/v1/integrations/github/setup?installation_id=${INST_B}&state=forged`, undefined, ''))
        .statusCode,
    ).toBe(422);
    // Only the state's hash is kept, where every replica sees it: GitHub's redirect reaches another replica.
    expect(JSON.stringify(await store.listAuthObjects('setup', 'team-b'))).not.toContain(state);
    const replica = await createControlPlane({ store, logger: silentLogger(), consoleDir: false, github });
    const done = await replica.inject({
      method: 'GET',
      url: `/api-host/v1/integrations/github/setup?installation_id=${INST_B}&setup_action=install&state=${state}`,
    });
    await replica.close();
    expect(done.statusCode, done.body).toBe(200);
    intB = done.json().id;
    // Single use.
    expect(
      (await call('GET', `/v1/integrations/github/setup?installation_id=${INST_B}&state=${state}`, undefined, ''))
        .statusCode,
    ).toBe(422);

    // An old installation (made before the setup began) cannot be claimed with a fresh state.
    gh.installations.set(6303, {
      id: 6303,
      account: 'initech',
      repos: [],
      createdAt: new Date(Date.now() - 3600_000).toISOString(),
    });
    const s2 = (
      await call('POST', '/v1/integrations/github/install/start', keyB, 'team-b', { account: 'initech' })
    ).json().state;
    const old = await call('GET', `/v1/integrations/github/setup?installation_id=6303&state=${s2}`, undefined, '');
    expect(old.statusCode).toBe(422);
    expect(old.body).toContain('installation_id');

    expect((await call('GET', '/v1/integrations/github/install', keyA, 'team-a')).json()).toEqual([
      { id: intA, installation_id: INST_A, name: 'acme' },
    ]);
    expect((await call('GET', '/v1/integrations/github/install', keyB, 'team-b')).json()).toEqual([
      { id: intB, installation_id: INST_B, name: 'globex' },
    ]);
  });

  it('lists every repository of the installation (all pages) and only to its workspace', async () => {
    const res = await call('GET', `/v1/integrations/github/${intA}/repos`, keyA, 'team-a');
    expect(res.statusCode, res.body).toBe(200);
    const repos = res.json();
    expect(repos).toHaveLength(230);
    expect(repos[0]).toEqual({
      host_integration_id: intA,
      id: 9000,
      name: 'agent',
      owner: 'acme',
      url: `${gh.url}/acme/agent`,
      default_branch: 'main',
    });
    expect(gh.requests.filter((r) => r.path === '/api/v3/installation/repositories').length).toBeGreaterThanOrEqual(3);
    // The listing token was revoked after use.
    expect(gh.requests.some((r) => r.method === 'DELETE' && r.path === '/api/v3/installation/token')).toBe(true);

    // Workspace B with A's integration id: 404 everywhere.
    for (const [m, u] of [
      ['GET', `/v1/integrations/github/${intA}/repos`],
      ['GET', `/v1/integrations/${intA}`],
      ['DELETE', `/v1/integrations/${intA}`],
    ] as const)
      expect((await call(m, u, keyB, 'team-b')).statusCode, `${m} ${u}`).toBe(404);
    expect((await call('GET', `/v1/integrations/github/${randomUUID()}/repos`, keyA, 'team-a')).statusCode).toBe(404);
    expect((await call('GET', '/v1/integrations/github/nope/repos', keyA, 'team-a')).statusCode).toBe(422);
  });

  it('a deployment may only use a repository the installation sees, of its own workspace', async () => {
    const body = (name: string, integration_id: string, repo_url: string, extra: Record<string, unknown> = {}) => ({
      ...githubBody(name),
      secrets: [],
      source_config: { ...githubBody(name).source_config, integration_id, repo_url, build_on_push: true, ...extra },
    });
    // B names A's integration: 404.
    expect(
      (await call('POST', '/v2/deployments', keyB, 'team-b', body('b', intA, `${gh.url}/acme/agent`))).statusCode,
    ).toBe(404);
    // A names a repository outside its installation (B's), or on another host: 422 on repo_url.
    for (const url of [`${gh.url}/globex/secret-agent`, `${gh.url}/acme/missing`, 'https://gitlab.com/acme/agent']) {
      const res = await call('POST', '/v2/deployments', keyA, 'team-a', body('x', intA, url));
      expect(res.statusCode, url).toBe(422);
      expect(res.json().detail[0].loc).toEqual(['body', 'source_config', 'repo_url']);
    }
    const ok = await call('POST', '/v2/deployments', keyA, 'team-a', body('a', intA, `${gh.url}/acme/agent.git`));
    expect(ok.statusCode, ok.body).toBe(201);
    depA = ok.json().id;
  });

  it('mints a fresh token per build, scoped to the repository; GitHub faults are one line without a token', async () => {
    const resolve = buildCredentialResolver(store, github);
    const c1 = await resolve('team-a', intA, `${gh.url}/acme/agent`);
    const c2 = await resolve('team-a', intA, `${gh.url}/acme/agent`);
    expect(c1 && 'token' in c1 && c2 && 'token' in c2 && c1.token !== c2.token).toBe(true);
    expect(c1).toMatchObject({ host: gh.host, username: 'x-access-token' });
    // Another workspace, another installation's repository, a foreign URL: no token.
    await expect(resolve('team-b', intA, `${gh.url}/acme/agent`)).rejects.toThrow(/not found in this workspace/);
    await expect(resolve('team-a', intA, `${gh.url}/globex/secret-agent`)).rejects.toThrow(
      /not a repository of installation/,
    );
    await expect(resolve('team-a', intA, `${gh.url}/acme/missing`)).rejects.toThrow(/422/);
    for (const [status, reason] of [
      [401, /refused the App's credentials \(401\)/],
      [404, /404/],
      [429, /rate limit/],
    ] as const) {
      gh.failMint.push(status);
      const err = await resolve('team-a', intA, `${gh.url}/acme/agent`).catch((e: Error) => e);
      expect(err).toBeInstanceOf(Error);
      const message = (err as Error).message;
      expect(message).toMatch(reason);
      expect(message).not.toContain('\n');
      for (const t of gh.tokens) expect(message).not.toContain(t);
    }
  });

  it('a signed push webhook makes one revision per delivery; forged, replayed or unparseable ones make none', async () => {
    const before = await revisionCount('team-a', keyA, depA);
    const push = (ref: string, installation = INST_A, repo = 'acme/agent') =>
      JSON.stringify({ ref, installation: { id: installation }, repository: { full_name: repo } });
    const headers = (body: string, delivery: string, secret = WEBHOOK_SECRET) => ({
      'x-github-event': 'push',
      'x-github-delivery': delivery,
      'x-hub-signature-256': sign(secret, body),
    });
    const body = push('refs/heads/main');
    const delivery = randomUUID();

    const first = await hook('/v1/integrations/github/webhook', body, headers(body, delivery));
    expect(first.statusCode, first.body).toBe(200);
    expect(first.json().revisions).toHaveLength(1);
    expect(first.json().revisions[0].deployment_id).toBe(depA);
    // Redelivery of the same delivery: nothing new.
    const again = await hook('/api-host/v1/integrations/github/webhook', body, headers(body, delivery));
    expect(again.json()).toEqual({ revisions: [], repeated: 1 });
    // The same signed body (no `after`) re-sent under a new delivery id: a repeat too.
    const resent = await hook('/v1/integrations/github/webhook', body, headers(body, randomUUID()));
    expect(resent.json()).toEqual({ revisions: [], repeated: 1 });
    expect(await revisionCount('team-a', keyA, depA)).toBe(before + 1);

    // A captured signed body sent again under a new delivery id (GitHub does not sign that header): the pushed
    // commit is recognised, nothing new; a push of another commit builds.
    const withSha = (sha: string) =>
      JSON.stringify({
        ref: 'refs/heads/main',
        after: sha,
        installation: { id: INST_A },
        repository: { full_name: 'acme/agent' },
      });
    const c1 = withSha('a'.repeat(40));
    expect(
      (await hook('/v1/integrations/github/webhook', c1, headers(c1, randomUUID()))).json().revisions,
    ).toHaveLength(1);
    expect((await hook('/v1/integrations/github/webhook', c1, headers(c1, randomUUID()))).json()).toEqual({
      revisions: [],
      repeated: 1,
    });
    const c2 = withSha('b'.repeat(40));
    expect(
      (await hook('/v1/integrations/github/webhook', c2, headers(c2, randomUUID()))).json().revisions,
    ).toHaveLength(1);
    expect(await revisionCount('team-a', keyA, depA)).toBe(before + 3);

    // Forgery: wrong secret, no signature, a body changed after signing; all 401 and nothing created.
    const forged = [
      headers(body, randomUUID(), 'guessed-secret'),
      { 'x-github-event': 'push', 'x-github-delivery': randomUUID() },
      headers(push('refs/heads/other'), randomUUID()),
    ];
    for (const h of forged) expect((await hook('/v1/integrations/github/webhook', body, h)).statusCode).toBe(401);
    // Unparseable but signed: 400.
    expect((await hook('/v1/integrations/github/webhook', '{nope', headers('{nope', randomUUID()))).statusCode).toBe(
      400,
    );
    // Another branch, another repository, another workspace's installation: no revision of A's deployment.
    for (const b of [
      push('refs/heads/dev'),
      push('refs/heads/main', INST_A, 'acme/repo-7'),
      push('refs/heads/main', INST_B, 'acme/agent'),
    ])
      expect((await hook('/v1/integrations/github/webhook', b, headers(b, randomUUID()))).json().revisions).toEqual([]);
    expect(await revisionCount('team-a', keyA, depA)).toBe(before + 3);
  });

  it('a git integration gets a generic signed webhook (secret shown once)', async () => {
    const created = await call('POST', '/v1/integrations', keyA, 'team-a', {
      name: 'gitea',
      host: 'git.example.com',
      token: 'gitea-token-5c8e1a',
      webhook_secret: true,
    });
    expect(created.statusCode, created.body).toBe(201);
    const { id, webhook_secret: secret } = created.json();
    expect(secret).toMatch(/^[A-Za-z0-9_-]{40,}$/);
    const got = await call('GET', `/v1/integrations/${id}`, keyA, 'team-a');
    expect(got.json().webhook).toBe(true);
    expect(got.body).not.toContain(secret);
    expect((await call('GET', '/v1/integrations', keyA, 'team-a')).body).not.toContain(secret);

    const dep = await call('POST', '/v2/deployments', keyA, 'team-a', {
      ...githubBody('gitea-agent'),
      secrets: [],
      source_config: {
        ...githubBody('gitea-agent').source_config,
        integration_id: id,
        repo_url: 'https://git.example.com/team/agent.git',
        build_on_push: true,
      },
    });
    expect(dep.statusCode, dep.body).toBe(201);
    const depId = dep.json().id;
    const before = await revisionCount('team-a', keyA, depId);
    const body = JSON.stringify({
      ref: 'refs/heads/main',
      repository: { clone_url: 'https://git.example.com/team/agent.git' },
    });
    const delivery = randomUUID();
    const h = { 'x-gitea-delivery': delivery, 'x-hub-signature-256': sign(secret, body) };
    const first = await hook(`/v1/integrations/${id}/webhook`, body, h);
    expect(first.statusCode, first.body).toBe(200);
    expect(first.json().revisions).toHaveLength(1);
    expect((await hook(`/v1/integrations/${id}/webhook`, body, h)).json().repeated).toBe(1);
    // The same body (it has no `after`) under a new delivery id: a repeat, not a build.
    const resent = { ...h, 'x-gitea-delivery': randomUUID() };
    expect((await hook(`/v1/integrations/${id}/webhook`, body, resent)).json()).toEqual({ revisions: [], repeated: 1 });
    expect(await revisionCount('team-a', keyA, depId)).toBe(before + 1);
    // The App's secret, an unknown id, another integration's id: 401 alike.
    expect(
      (await hook(`/v1/integrations/${id}/webhook`, body, { ...h, 'x-hub-signature-256': sign(WEBHOOK_SECRET, body) }))
        .statusCode,
    ).toBe(401);
    expect((await hook(`/v1/integrations/${randomUUID()}/webhook`, body, h)).statusCode).toBe(401);
    expect((await hook(`/v1/integrations/${intA}/webhook`, body, h)).statusCode).toBe(401);
    expect(await revisionCount('team-a', keyA, depId)).toBe(before + 1);

    // A given secret is kept and never echoed.
    const given = await call('POST', '/v1/integrations', keyA, 'team-a', {
      name: 'own secret',
      host: 'git.example.com',
      token: 't',
      webhook_secret: 'my-own-webhook-secret-1234',
    });
    expect(given.statusCode).toBe(201);
    expect(given.body).not.toContain('my-own-webhook-secret-1234');
  });

  it('a listener gets a fresh scoped token only for a repository its deployments use, never a stored credential', async () => {
    // A second app on the same store, logging everything somewhere the test can read.
    const lines: string[] = [];
    const logged = await createControlPlane({
      store,
      logger: pino({ level: 'trace' }, { write: (l: string) => void lines.push(l) }),
      consoleDir: false,
      github,
    });
    const ask = async (lid: string, key: string, tenant: string, body: unknown, prefix = '') => {
      const res = await logged.inject({
        method: 'POST',
        url: `${prefix}/v2/listeners/${lid}/git-credential`,
        headers: { 'x-api-key': key, 'x-tenant-id': tenant },
        payload: body as object,
      });
      // Refusals go with every other answer into the final check for tokens.
      if (res.statusCode !== 200) answers.push(res.body);
      return res;
    };
    try {
      const lidA = (
        await call('POST', '/v2/listeners', keyA, 'team-a', { compute_type: 'local', compute_id: 'cred-a' })
      ).json().id as string;
      const lidB = (
        await call('POST', '/v2/listeners', keyB, 'team-b', { compute_type: 'local', compute_id: 'cred-b' })
      ).json().id as string;
      const lkeyA = (await call('POST', `/v2/listeners/${lidA}/keys`, keyA, 'team-a', {})).json().key as string;
      const lkeyB = (await call('POST', `/v2/listeners/${lidB}/keys`, keyB, 'team-b', {})).json().key as string;
      const deploy = async (name: string, integration_id: string, repo_url: string, listener_id?: string) => {
        const res = await call('POST', '/v2/deployments', keyA, 'team-a', {
          ...githubBody(name),
          secrets: [],
          source_config: { ...githubBody(name).source_config, integration_id, repo_url, listener_id },
        });
        expect(res.statusCode, res.body).toBe(201);
        return res.json().id as string;
      };
      const repoUrl = `${gh.url}/acme/agent`;
      const onListener = await deploy('cred-on-listener', intA, repoUrl, lidA);
      // The same integration with another repository, but not on this listener.
      await deploy('cred-elsewhere', intA, `${gh.url}/acme/repo-1`);
      // A git integration with a stored (write-only) token, used by a deployment on the listener.
      const stored = 'stored-git-token-91d3f0a7';
      const git = await call('POST', '/v1/integrations', keyA, 'team-a', {
        name: 'plain git',
        host: 'git.example.com',
        token: stored,
      });
      expect(git.statusCode, git.body).toBe(201);
      const gitId = git.json().id as string;
      await deploy('cred-git', gitId, 'https://git.example.com/team/agent.git', lidA);

      // The listener's own key, for the pair its deployment uses: a fresh token, not cached, for that repository only.
      const minted = gh.tokens.length;
      const ok = await ask(lidA, lkeyA, 'team-a', { integration_id: intA, repo_url: repoUrl });
      expect(ok.statusCode, ok.body).toBe(200);
      expect(ok.headers['cache-control']).toBe('no-store');
      const cred = ok.json();
      expect(cred).toEqual({
        host: gh.host,
        username: 'x-access-token',
        token: gh.tokens[minted],
        expires_at: expect.any(String),
      });
      expect(gh.tokens).toHaveLength(minted + 1);
      const seen = await fetch(`${gh.apiUrl}/installation/repositories`, {
        headers: { authorization: `token ${cred.token}` },
      });
      expect(((await seen.json()) as { repositories: { name: string }[] }).repositories.map((r) => r.name)).toEqual([
        'agent',
      ]);
      // Also under /api-host, and for a workspace key of the listener's workspace (which could deploy the repo
      // anyway); each call mints a new token.
      const again = await ask(lidA, keyA, 'team-a', { integration_id: intA, repo_url: repoUrl }, '/api-host');
      expect(again.statusCode, again.body).toBe(200);
      expect(again.json().token).not.toBe(cred.token);
      const afterGrants = gh.tokens.length;

      // Another workspace's listener and an unknown one: the same 404.
      const foreign = await ask(lidA, keyB, 'team-b', { integration_id: intA, repo_url: repoUrl });
      const unknownId = randomUUID();
      const unknown = await ask(unknownId, keyB, 'team-b', { integration_id: intA, repo_url: repoUrl });
      expect([foreign.statusCode, unknown.statusCode]).toEqual([404, 404]);
      expect(foreign.body.replace(lidA, 'ID')).toBe(unknown.body.replace(unknownId, 'ID'));
      // Another listener's key: 403, whatever tenant it names.
      for (const tenant of ['team-a', 'team-b'])
        expect((await ask(lidA, lkeyB, tenant, { integration_id: intA, repo_url: repoUrl })).statusCode).toBe(403);
      // Pairs no deployment on this listener uses: a repository of the installation used elsewhere, the same
      // repository spelled differently, another workspace's integration, an integration unknown to anyone.
      for (const body of [
        { integration_id: intA, repo_url: `${gh.url}/acme/repo-1` },
        { integration_id: intA, repo_url: `${gh.url}/acme/agent.git` },
        { integration_id: intB, repo_url: `${gh.url}/globex/secret-agent` },
        { integration_id: randomUUID(), repo_url: repoUrl },
      ]) {
        const res = await ask(lidA, lkeyA, 'team-a', body);
        expect(res.statusCode, JSON.stringify(body)).toBe(409);
        expect(res.json().detail).toMatch(/No deployment assigned to listener/);
      }
      // A stored credential is never handed out, even for a pair the listener's deployment uses.
      const refused = await ask(lidA, lkeyA, 'team-a', {
        integration_id: gitId,
        repo_url: 'https://git.example.com/team/agent.git',
      });
      expect(refused.statusCode).toBe(409);
      expect(refused.json().detail).toMatch(/stored credentials are not handed to data planes/);
      expect(refused.body).not.toContain(stored);
      // Bad input: 422 naming the field.
      for (const [body, field] of [
        [{ repo_url: repoUrl }, 'integration_id'],
        [{ integration_id: 'int-1', repo_url: repoUrl }, 'integration_id'],
        [{ integration_id: intA }, 'repo_url'],
        [{ integration_id: intA, repo_url: repoUrl, token: 'x' }, ''],
      ] as const) {
        const res = await ask(lidA, lkeyA, 'team-a', body);
        expect(res.statusCode, JSON.stringify(body)).toBe(422);
        expect(res.json().detail[0].loc, JSON.stringify(body)).toEqual(field ? ['body', field] : ['body']);
      }
      // Once the deployment is gone, so is the grant.
      expect((await call('DELETE', `/v2/deployments/${onListener}`, keyA, 'team-a')).statusCode).toBe(204);
      expect((await ask(lidA, lkeyA, 'team-a', { integration_id: intA, repo_url: repoUrl })).statusCode).toBe(409);
      // No refusal minted a token; no log line holds a token or the stored credential.
      expect(gh.tokens).toHaveLength(afterGrants);
      const log = lines.join('');
      expect(log).toContain('git credential handed to listener');
      for (const t of gh.tokens) expect(log).not.toContain(t);
      expect(log).not.toContain(stored);
      for (const a of answers) expect(a).not.toContain(stored);
    } finally {
      await logged.close();
    }
  });

  it('deleting an installation integration frees it; no token or key is in any answer or file', async () => {
    expect((await call('DELETE', `/v1/integrations/${intB}`, keyB, 'team-b')).statusCode).toBe(204);
    expect((await call('GET', '/v1/integrations/github/install', keyB, 'team-b')).json()).toEqual([]);
    expect(gh.tokens.length).toBeGreaterThan(3);
    for (const a of answers) {
      for (const t of gh.tokens) expect(a).not.toContain(t);
      expect(a).not.toContain('PRIVATE KEY');
      expect(a).not.toContain('gitea-token-5c8e1a');
    }
    for (const f of readdirSync(dir)) {
      const content = readFileSync(join(dir, f));
      for (const t of gh.tokens) expect(content.includes(Buffer.from(t)), f).toBe(false);
      expect(content.includes(Buffer.from('gitea-token-5c8e1a')), f).toBe(false);
    }
  });
});

describe('GitHub App installations belong to the workspace that installed them', () => {
  const start = async (key: string, tenant: string, account: string) =>
    (await call('POST', '/v1/integrations/github/install/start', key, tenant, { account })).json().state as string;
  const setup = (installationId: number, state: string) =>
    call(
      'GET',
      `/v1/integrations/github/setup?installation_id=${installationId}&setup_action=install&state=${encodeURIComponent(state)}`,
      undefined,
      '',
    );
  const installed = async (key: string, tenant: string) =>
    ((await call('GET', '/v1/integrations/github/install', key, tenant)).json() as { installation_id: number }[]).map(
      (i) => i.installation_id,
    );

  it("a state claims only an installation on its own account; another workspace's state or installation is refused", async () => {
    const now = new Date().toISOString();
    // A installs the App on hooli, B on piedpiper, both just now.
    gh.installations.set(5303, { id: 5303, account: 'hooli', repos: [], createdAt: now });
    gh.installations.set(5404, { id: 5404, account: 'piedpiper', repos: [], createdAt: now });

    // B, with a state of its own, names A's fresh installation: refused, and that state is spent.
    const stateB = await start(keyB, 'team-b', 'piedpiper');
    const stolen = await setup(5303, stateB);
    expect(stolen.statusCode).toBe(422);
    expect(stolen.body).toContain('installation_id');
    expect((await setup(5404, stateB)).statusCode).toBe(422);
    // A's state (B saw it in A's install link) with B's installation: refused too.
    expect((await setup(5404, await start(keyA, 'team-a', 'hooli'))).statusCode).toBe(422);
    for (const [key, tenant] of [
      [keyA, 'team-a'],
      [keyB, 'team-b'],
    ] as const) {
      expect(await installed(key, tenant)).not.toContain(5303);
      expect(await installed(key, tenant)).not.toContain(5404);
    }

    // Each workspace claims its own installation with its own state.
    const a = await setup(5303, await start(keyA, 'team-a', 'HOOLI'));
    expect(a.statusCode, a.body).toBe(200);
    const b = await setup(5404, await start(keyB, 'team-b', 'piedpiper'));
    expect(b.statusCode, b.body).toBe(200);

    // B, even with a state naming A's account, cannot take A's installation over (409), nor list or read it.
    expect((await setup(5303, await start(keyB, 'team-b', 'hooli'))).statusCode).toBe(409);
    expect(await installed(keyA, 'team-a')).toContain(5303);
    expect(await installed(keyB, 'team-b')).not.toContain(5303);
    expect((await call('GET', `/v1/integrations/github/${a.json().id}/repos`, keyB, 'team-b')).statusCode).toBe(404);
    expect((await call('GET', `/v1/integrations/${a.json().id}`, keyB, 'team-b')).statusCode).toBe(404);
  });
});

describe("with the App's OAuth client, only the installing user's own redirect completes an installation", () => {
  let oauthApp: FastifyInstance;
  beforeAll(async () => {
    const withClient = createGitHubApp({
      appId: gh.appId,
      privateKey: gh.privateKey,
      apiUrl: gh.apiUrl,
      webUrl: gh.url,
      webhookSecret: WEBHOOK_SECRET,
      appSlug: 'agentplane-test',
      clientId: gh.clientId,
      clientSecret: gh.clientSecret,
    });
    oauthApp = await createControlPlane({ store, logger: silentLogger(), consoleDir: false, github: withClient });
  });
  afterAll(async () => {
    await oauthApp?.close();
  });
  const start = async (key: string, tenant: string, account: string) =>
    (
      await oauthApp.inject({
        method: 'POST',
        url: '/v1/integrations/github/install/start',
        headers: { 'x-api-key': key, 'x-tenant-id': tenant },
        payload: { account },
      })
    ).json().state as string;
  const setup = (installationId: number, state: string, code?: string) =>
    oauthApp.inject({
      method: 'GET',
      url:
        `/v1/integrations/github/setup?installation_id=${installationId}&setup_action=install` +
        `&state=${encodeURIComponent(state)}${code ? `&code=${encodeURIComponent(code)}` : ''}`,
    });

  it('settings: the client id (flag) and the client secret (environment only) go together', () => {
    const env = { AGENTPLANE_GITHUB_APP_ID: '1', AGENTPLANE_GITHUB_APP_PRIVATE_KEY: gh.privateKey };
    expect(() => parseControlPlaneConfig(['--github-app-client-id', 'Iv1.x'], env)).toThrow(/go together/);
    expect(() => parseControlPlaneConfig([], { ...env, AGENTPLANE_GITHUB_APP_CLIENT_SECRET: 's' })).toThrow(
      /go together/,
    );
    const both = parseControlPlaneConfig(['--github-app-client-id', 'Iv1.x'], {
      ...env,
      AGENTPLANE_GITHUB_APP_CLIENT_SECRET: 's',
    });
    expect(both?.github).toMatchObject({ clientId: 'Iv1.x', clientSecret: 's' });
  });

  it("B cannot win the race for A's fresh installation, even with a state naming A's account", async () => {
    const now = new Date().toISOString();
    gh.installations.set(5505, { id: 5505, account: 'umbrella', repos: [], createdAt: now });
    gh.installations.set(5606, { id: 5606, account: 'aperture', repos: [], createdAt: now });
    // B names A's account and has a code of its own user (who reaches only B's installation 5606).
    const bobCode = gh.userCode([5606]);
    const raced = await setup(5505, await start(keyB, 'team-b', 'umbrella'), bobCode);
    expect(raced.statusCode).toBe(422);
    // Without a code, or with a made-up one: refused too.
    expect((await setup(5505, await start(keyB, 'team-b', 'umbrella'))).statusCode).toBe(422);
    expect((await setup(5505, await start(keyB, 'team-b', 'umbrella'), 'code-made-up')).statusCode).toBe(422);
    expect((await call('GET', '/v1/integrations/github/install', keyB, 'team-b')).body).not.toContain('5505');
    // The codes were exchanged at GitHub and the user's installations asked with the user's token.
    expect(gh.requests.some((r) => r.method === 'POST' && r.path === '/login/oauth/access_token')).toBe(true);
    expect(gh.requests.some((r) => r.path === '/api/v3/user/installations')).toBe(true);
    // A's own redirect: A's state, A's user's code.
    const own = await setup(5505, await start(keyA, 'team-a', 'umbrella'), gh.userCode([5505]));
    expect(own.statusCode, own.body).toBe(200);
    expect(own.json()).toMatchObject({ installation_id: 5505, account: 'umbrella' });
    // B's own installation with B's user's code works; the same code a second time does not.
    const mine = await setup(5606, await start(keyB, 'team-b', 'aperture'), gh.userCode([5606]));
    expect(mine.statusCode, mine.body).toBe(200);
    expect((await setup(5606, await start(keyB, 'team-b', 'aperture'), bobCode)).statusCode).toBe(422);
  });
});

// Auth Service v2 against a real OpenID Connect provider (oidc-provider, started here on 127.0.0.1) whose login and
// consent are walked over plain HTTP with cookies, through a control plane listening on a real port, on both
// stores: providers CRUD, authenticate -> pending -> grant -> wait -> completed -> second authenticate without a URL
// -> refresh after expiry -> tokens deleted; bad states, replays, failing token endpoints; workspace isolation and
// deployment tokens; no token or client secret in answers, log lines or the stored data.
import { randomBytes } from 'node:crypto';
import { mkdtempSync, readdirSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import type { FastifyInstance } from 'fastify';
import Provider from 'oidc-provider';
import { pino } from 'pino';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createControlPlane } from '../../../../src/control-plane/app.ts';
import { createApiKey } from '../../../../src/control-plane/api-keys/keys.ts';
import { parseAuthKeyring } from '../../../../src/lib/auth-crypto.ts';
import { openEmbeddedPlatformState } from '../../../../src/state/embedded/index.ts';
import { loadKubeConfig, openKubernetesPlatformState } from '../../../../src/state/kubernetes/index.ts';
import type { PlatformState } from '../../../../src/state/types.ts';
import { mintDeploymentToken } from '../../../../src/lib/deployment-token.ts';
import { silentLogger } from '../../../../src/lib/logger.ts';
import { makeDeployment } from '../../helpers/fixtures.ts';
import { startKube } from '../../helpers/kube.ts';
import { listen, walkGrant } from '../../helpers/oidc.ts';

const CLIENT_ID = 'agentplane-test';
const CLIENT_SECRET = `client-secret-${randomBytes(12).toString('hex')}`;
const KEYS = `k1=${randomBytes(32).toString('base64')}`;
const DEPLOYMENT_KEY = randomBytes(32);

type Setup = { store: PlatformState; dir?: string; secretsText?: () => Promise<string>; close(): Promise<void> };

const stores: [string, () => Promise<Setup>][] = [
  [
    'embedded',
    async () => {
      const dir = mkdtempSync(join(tmpdir(), 'ap-cp-auth-'));
      const store = openEmbeddedPlatformState({ dataDir: dir });
      return {
        store,
        dir,
        close: async () => {
          await store.close();
          rmSync(dir, { recursive: true, force: true });
        },
      };
    },
  ],
  [
    'kubernetes',
    async () => {
      const kube = await startKube();
      const kc = loadKubeConfig(kube.kubeconfig);
      const store = openKubernetesPlatformState({ kubeConfig: kc, namespace: 'agents', logger: silentLogger() });
      return {
        store,
        // Every Secret in the namespace, data decoded, as the cluster would keep it.
        secretsText: async () => {
          const { CoreV1Api } = await import('@kubernetes/client-node');
          const list = await kc.makeApiClient(CoreV1Api).listNamespacedSecret({ namespace: 'agents' });
          return JSON.stringify(
            list.items.map((s) =>
              Object.fromEntries(
                Object.entries(s.data ?? {}).map(([k, v]) => [k, Buffer.from(v, 'base64').toString()]),
              ),
            ),
          );
        },
        close: async () => {
          await store.close();
          await kube.stop();
        },
      };
    },
  ],
];

describe.each(stores)('auth service v2 with a real OIDC provider (%s store)', (storeName, open) => {
  let s: Setup;
  let app: FastifyInstance;
  let cp: string;
  let idp: Awaited<ReturnType<typeof listen>>;
  let broken: Awaited<ReturnType<typeof listen>>;
  let keyA: string;
  let keyB: string;
  let clock = Date.now();
  const logs: string[] = [];
  const answers: string[] = [];
  /** Every token the provider issued (from its token endpoint answers). */
  const issued: string[] = [];
  const codes: string[] = [];

  const call = async (
    method: string,
    path: string,
    opts: { key?: string; tenant?: string; body?: unknown; keep?: boolean } = {},
  ) => {
    const res = await fetch(`${cp}${path}`, {
      method,
      headers: {
        ...(opts.key === undefined ? { 'x-api-key': keyA } : opts.key ? { 'x-api-key': opts.key } : {}),
        ...(opts.tenant === '' ? {} : { 'x-tenant-id': opts.tenant ?? 'team-a' }),
        ...(opts.body === undefined ? {} : { 'content-type': 'application/json' }),
      },
      ...(opts.body === undefined ? {} : { body: JSON.stringify(opts.body) }),
    });
    const text = await res.text();
    if (opts.keep !== false) answers.push(text);
    let json: any;
    try {
      json = JSON.parse(text);
    } catch {
      json = undefined;
    }
    return { status: res.status, json, text };
  };
  const browser = async (url: string, cookie?: string) => {
    const res = await fetch(url, { redirect: 'manual', headers: cookie ? { cookie } : {} });
    const text = await res.text();
    answers.push(text);
    return { status: res.status, text };
  };

  beforeAll(async () => {
    s = await open();
    const logger = pino({ level: 'debug' }, { write: (line: string) => void logs.push(line) });
    app = await createControlPlane({
      store: s.store,
      logger,
      consoleDir: false,
      auth: {
        keyring: parseAuthKeyring(KEYS),
        deploymentTokenKey: DEPLOYMENT_KEY,
        allowPrivateProviders: true,
        publicUrl: () => cp,
        now: () => clock,
      },
    });
    cp = await app.listen({ host: '127.0.0.1', port: 0 });
    keyA = (await createApiKey(s.store, { tenants: ['team-a'] })).key;
    keyB = (await createApiKey(s.store, { tenants: ['team-b'] })).key;

    idp = await listen();
    const provider = new Provider(idp.url, {
      clients: [
        {
          client_id: CLIENT_ID,
          client_secret: CLIENT_SECRET,
          redirect_uris: [`${cp}/v2/auth/callback/idp`, `${cp}/api-host/v2/auth/callback/idp`],
          grant_types: ['authorization_code', 'refresh_token'],
          response_types: ['code'],
          token_endpoint_auth_method: 'client_secret_basic',
        },
      ],
      scopes: ['openid', 'offline_access', 'profile', 'email'],
      claims: { openid: ['sub'], profile: ['name'], email: ['email'] },
      features: { revocation: { enabled: true } },
      issueRefreshToken: async (_ctx, client) => client.grantTypeAllowed('refresh_token'),
      findAccount: async (_ctx, sub) => ({ accountId: sub, claims: async () => ({ sub }) }),
    });
    provider.on('grant.success', (ctx) => {
      const body = ctx.body as Record<string, string>;
      for (const k of ['access_token', 'refresh_token', 'id_token']) if (body[k]) issued.push(body[k]);
    });
    idp.handle(provider.callback());

    // A provider without discovery whose token endpoint fails: its authorization endpoint sends the browser back
    // with a code at once; its token endpoint answers 503.
    broken = await listen();
    broken.handle((req, res) => {
      const u = new URL(req.url!, broken.url);
      if (u.pathname === '/authorize') {
        const back = new URL(u.searchParams.get('redirect_uri')!);
        back.searchParams.set('code', 'code-from-broken-provider');
        back.searchParams.set('state', u.searchParams.get('state')!);
        res.writeHead(302, { location: back.href }).end();
      } else {
        res.writeHead(503, { 'content-type': 'text/plain' }).end('token service down');
      }
    });
  });

  afterAll(async () => {
    await app?.close();
    idp?.server.closeAllConnections();
    broken?.server.closeAllConnections();
    await new Promise((r) => idp?.server.close(r));
    await new Promise((r) => broken?.server.close(r));
    await s?.close();
  });

  let tokenId: string;
  let firstToken: string;

  it('creates a provider by discovery; the client secret is write-only; a duplicate id is 409', async () => {
    const res = await call('POST', '/v2/auth/providers', {
      body: {
        provider_id: 'idp',
        name: 'Test IdP',
        issuer_url: idp.url,
        client_id: CLIENT_ID,
        client_secret: CLIENT_SECRET,
        scopes: ['openid', 'offline_access'],
      },
    });
    expect(res.status, res.text).toBe(201);
    expect(res.json).toMatchObject({
      provider_id: 'idp',
      name: 'Test IdP',
      issuer_url: idp.url,
      auth_url: `${idp.url}/auth`,
      token_url: `${idp.url}/token`,
      client_id: CLIENT_ID,
      has_client_secret: true,
      scopes: ['openid', 'offline_access'],
    });
    expect(res.json).not.toHaveProperty('client_secret');
    const dup = await call('POST', '/v2/auth/providers', {
      body: { provider_id: 'idp', issuer_url: idp.url, client_id: 'x' },
    });
    expect(dup.status).toBe(409);
    const list = await call('GET', '/v2/auth/providers');
    expect(list.json.resources.map((p: { provider_id: string }) => p.provider_id)).toEqual(['idp']);
    expect((await call('GET', '/api-host/v2/auth/providers/idp')).json.provider_id).toBe('idp');
  });

  it('authenticate -> pending with url and auth_id; the user grants; wait -> completed with the token', async () => {
    const res = await call('POST', '/v2/auth/authenticate', {
      body: { provider: 'idp', scopes: ['profile'], user_id: 'user-1' },
    });
    expect(res.status, res.text).toBe(200);
    expect(res.json).toMatchObject({ status: 'pending', token: null });
    // The link is the control plane's start URL, which sends the browser on to the provider.
    expect(res.json.url).toMatch(new RegExp(`^${cp}/v2/auth/start\\?state=`));
    const waiting = call('GET', `/v2/auth/wait/${res.json.auth_id}?timeout=30`, { keep: false });
    const grant = await walkGrant(res.json.url, cp);
    const back = grant.url;
    const url = new URL(grant.authorizeUrl);
    expect(url.origin + url.pathname).toBe(`${idp.url}/auth`);
    expect(url.searchParams.get('code_challenge_method')).toBe('S256');
    expect(url.searchParams.get('code_challenge')).toBeTruthy();
    expect(url.searchParams.get('redirect_uri')).toBe(`${cp}/v2/auth/callback/idp`);
    expect(url.searchParams.get('scope')!.split(' ').sort()).toEqual(['offline_access', 'openid', 'profile']);

    // Nothing yet: a short wait answers timeout, a zero wait pending.
    expect((await call('GET', `/v2/auth/wait/${res.json.auth_id}?timeout=0`)).json.status).toBe('pending');
    expect((await call('GET', `/v2/auth/wait/${res.json.auth_id}?timeout=1`)).json.status).toBe('timeout');
    // The redirect opened in a browser that did not start the sign-in: refused, the flow stays open.
    const elsewhere = await browser(back);
    expect(elsewhere.status).toBe(400);
    expect(elsewhere.text).toContain('not started in this browser');
    expect((await call('GET', `/v2/auth/wait/${res.json.auth_id}?timeout=0`)).json.status).toBe('pending');

    codes.push(new URL(back).searchParams.get('code')!);
    const page = await browser(back, grant.cookie);
    expect(page.status).toBe(200);
    expect(page.text).toContain('You can close this page');
    const done = await waiting;
    expect(done.json).toMatchObject({ status: 'completed', auth_id: res.json.auth_id });
    expect(issued).toContain(done.json.token);
    firstToken = done.json.token;

    // The token works at the provider.
    const me = await fetch(`${idp.url}/me`, { headers: { authorization: `Bearer ${firstToken}` } });
    expect(((await me.json()) as { sub: string }).sub).toBe('alice');

    // Replaying the redirect: 400, nothing new stored.
    const replay = await browser(back, grant.cookie);
    expect(replay.status).toBe(400);
    expect(replay.text).toMatch(/already used|not valid/);
    const tokens = await call('GET', '/v2/auth/tokens');
    expect(tokens.json.resources).toHaveLength(1);
    expect(tokens.json.resources[0]).toMatchObject({ provider_id: 'idp', user_id: 'user-1' });
    expect(tokens.json.resources[0].scopes).toEqual(expect.arrayContaining(['profile', 'openid']));
    expect(tokens.json.resources[0]).not.toHaveProperty('token');
    tokenId = tokens.json.resources[0].id;
  });

  it('a second authenticate returns the token without a URL', async () => {
    const res = await call('POST', '/v2/auth/authenticate', {
      body: { provider: 'idp', scopes: ['profile'], user_id: 'user-1' },
      keep: false,
    });
    expect(res.json).toMatchObject({ status: 'completed', token: firstToken, url: null, auth_id: null });
    // More scopes than were granted: a new grant is needed.
    const more = await call('POST', '/v2/auth/authenticate', {
      body: { provider: 'idp', scopes: ['email'], user_id: 'user-1' },
    });
    expect(more.json.status).toBe('pending');
    // Another user of the same workspace has no token.
    const other = await call('POST', '/v2/auth/authenticate', {
      body: { provider: 'idp', scopes: ['profile'], user_id: 'user-2' },
    });
    expect(other.json.status).toBe('pending');
  });

  it('after expiry the token is refreshed with the refresh token', async () => {
    clock += 2 * 3600_000;
    const res = await call('POST', '/v2/auth/authenticate', {
      body: { provider: 'idp', scopes: ['profile'], user_id: 'user-1' },
      keep: false,
    });
    expect(res.status, res.text).toBe(200);
    expect(res.json.status).toBe('completed');
    expect(res.json.token).not.toBe(firstToken);
    expect(issued).toContain(res.json.token);
    const me = await fetch(`${idp.url}/me`, { headers: { authorization: `Bearer ${res.json.token}` } });
    expect(me.status).toBe(200);
    const tokens = await call('GET', '/v2/auth/tokens');
    expect(tokens.json.resources).toHaveLength(1);
    expect(tokens.json.resources[0].id).toBe(tokenId);
    expect(Date.parse(tokens.json.resources[0].expires_at)).toBeGreaterThan(clock);
  });

  it('a wrong state, a state of another provider, an expired state: 400 and nothing stored', async () => {
    const before = (await call('GET', '/v2/auth/tokens')).json.resources;
    const start = await call('POST', '/v2/auth/authenticate', {
      body: { provider: 'idp', scopes: ['email'], user_id: 'user-3' },
    });
    const grant = await walkGrant(start.json.url, cp, { login: 'carol' });
    const back = new URL(grant.url);
    const state = back.searchParams.get('state')!;

    const forged = new URL(back);
    forged.searchParams.set('state', `${state.split('.')[0]}.${randomBytes(32).toString('base64url')}`);
    expect((await browser(forged.href, grant.cookie)).status).toBe(400);
    const missing = new URL(back);
    missing.searchParams.delete('state');
    expect((await browser(missing.href, grant.cookie)).status).toBe(400);
    const elsewhere = new URL(back.href.replace('/callback/idp', '/callback/other-idp'));
    expect((await browser(elsewhere.href, grant.cookie)).status).toBe(400);

    clock += 11 * 60_000;
    const late = await browser(back.href, grant.cookie);
    expect(late.status).toBe(400);
    expect(late.text).toContain('expired');
    expect((await call('GET', `/v2/auth/wait/${start.json.auth_id}?timeout=0`)).json.status).toBe('not_found');
    expect((await call('GET', '/v2/auth/tokens')).json.resources).toEqual(before);
  });

  it('a user who refuses: the page says so and wait reports failed', async () => {
    const start = await call('POST', '/v2/auth/authenticate', {
      body: { provider: 'idp', scopes: ['email'], user_id: 'user-4' },
    });
    const back = await walkGrant(start.json.url, cp, { login: 'dave', deny: true });
    const page = await browser(back.url, back.cookie);
    expect(page.status).toBe(400);
    expect(page.text).toContain('not granted');
    const wait = await call('GET', `/v2/auth/wait/${start.json.auth_id}?timeout=0`);
    expect(wait.json).toMatchObject({ status: 'failed' });
    expect(wait.json.error).toContain('access_denied');
  });

  it('explicit endpoints; a token endpoint that fails -> 502 page, wait failed with the reason, nothing stored', async () => {
    const created = await call('POST', '/v2/auth/providers', {
      body: {
        provider_id: 'broken',
        auth_url: `${broken.url}/authorize`,
        token_url: `${broken.url}/token`,
        client_id: 'c',
        client_secret: CLIENT_SECRET,
        token_auth_method: 'client_secret_post',
      },
    });
    expect(created.status, created.text).toBe(201);
    expect(created.json).toMatchObject({
      issuer_url: null,
      token_url: `${broken.url}/token`,
      token_auth_method: 'client_secret_post',
    });
    const start = await call('POST', '/v2/auth/authenticate', {
      body: { provider: 'broken', scopes: [], user_id: 'user-1' },
    });
    const back = await walkGrant(start.json.url, cp);
    const page = await browser(back.url, back.cookie);
    expect(page.status).toBe(502);
    expect(page.text).toContain('503');
    const wait = await call('GET', `/v2/auth/wait/${start.json.auth_id}?timeout=0`);
    expect(wait.json.status).toBe('failed');
    expect(wait.json.error).toMatch(/503/);
    expect((await call('GET', '/v2/auth/tokens?provider_id=broken')).json.resources).toEqual([]);
  });

  it('bad input: unknown provider 404, bad bodies 422 naming the field, unreachable discovery 422', async () => {
    const unknown = await call('POST', '/v2/auth/authenticate', {
      body: { provider: 'nope', scopes: [], user_id: 'u' },
    });
    expect(unknown.status).toBe(404);
    expect(unknown.text).toContain('nope');
    const noUser = await call('POST', '/v2/auth/authenticate', { body: { provider: 'idp', scopes: [] } });
    expect(noUser.status).toBe(422);
    expect(noUser.text).toContain('user_id');
    const badScope = await call('POST', '/v2/auth/authenticate', {
      body: { provider: 'idp', scopes: ['a b'], user_id: 'u' },
    });
    expect(badScope.status).toBe(422);
    const both = await call('POST', '/v2/auth/providers', {
      body: { provider_id: 'x1', issuer_url: idp.url, auth_url: `${idp.url}/auth`, client_id: 'c' },
    });
    expect(both.status).toBe(422);
    expect(both.text).toContain('issuer_url');
    const half = await call('POST', '/v2/auth/providers', {
      body: { provider_id: 'x2', auth_url: `${idp.url}/auth`, client_id: 'c' },
    });
    expect(half.status).toBe(422);
    expect(half.text).toContain('token_url');
    const creds = await call('POST', '/v2/auth/providers', {
      body: { provider_id: 'x3', issuer_url: 'http://user:pw@127.0.0.1:1', client_id: 'c' },
    });
    expect(creds.status).toBe(422);
    const down = await call('POST', '/v2/auth/providers', {
      body: { provider_id: 'x4', issuer_url: `${broken.url}/nothing-here`, client_id: 'c' },
    });
    expect(down.status).toBe(422);
    expect(down.text).toContain('discovery');
    const badId = await call('POST', '/v2/auth/providers', {
      body: { provider_id: '../x', issuer_url: idp.url, client_id: 'c' },
    });
    expect(badId.status).toBe(422);
    const immutable = await call('PATCH', '/v2/auth/providers/idp', { body: { provider_id: 'other' } });
    expect(immutable.status).toBe(422);
    const ids = (await call('GET', '/v2/auth/providers')).json.resources.map(
      (p: { provider_id: string }) => p.provider_id,
    );
    expect(ids.sort()).toEqual(['broken', 'idp']);
    expect((await call('GET', '/v2/auth/wait/not-a-uuid?timeout=0')).json.status).toBe('not_found');
    expect((await call('GET', '/v2/auth/wait/x?timeout=61')).status).toBe(422);
  });

  it("workspace B cannot see, use or delete A's providers, tokens or auth_ids", async () => {
    const b = { key: keyB, tenant: 'team-b' };
    expect((await call('GET', '/v2/auth/providers', b)).json.resources).toEqual([]);
    expect((await call('GET', '/v2/auth/providers/idp', b)).status).toBe(404);
    expect((await call('PATCH', '/v2/auth/providers/idp', { ...b, body: { name: 'mine' } })).status).toBe(404);
    expect((await call('DELETE', '/v2/auth/providers/idp', b)).status).toBe(404);
    expect(
      (await call('POST', '/v2/auth/authenticate', { ...b, body: { provider: 'idp', scopes: [], user_id: 'user-1' } }))
        .status,
    ).toBe(404);
    expect((await call('GET', '/v2/auth/tokens', b)).json.resources).toEqual([]);
    expect((await call('DELETE', `/v2/auth/tokens/${tokenId}`, b)).status).toBe(404);
    expect((await call('DELETE', '/v2/auth/tokens', b)).status).toBe(204);
    // A's flow is invisible to B.
    const start = await call('POST', '/v2/auth/authenticate', {
      body: { provider: 'idp', scopes: ['email'], user_id: 'user-5' },
    });
    expect((await call('GET', `/v2/auth/wait/${start.json.auth_id}?timeout=0`, b)).json.status).toBe('not_found');
    // A key of B cannot name A's workspace.
    expect((await call('GET', '/v2/auth/providers', { key: keyB, tenant: 'team-a' })).status).toBe(403);
    // B may use the same provider id for its own provider; both stay apart.
    const own = await call('POST', '/v2/auth/providers', {
      ...b,
      body: { provider_id: 'idp', issuer_url: idp.url, client_id: 'b-client', client_secret: 'b-secret-value' },
    });
    expect(own.status).toBe(201);
    expect((await call('GET', '/v2/auth/providers/idp')).json.client_id).toBe(CLIENT_ID);
    expect((await call('GET', '/v2/auth/tokens')).json.resources.map((t: { id: string }) => t.id)).toEqual([tokenId]);
    // No API key at all: 401.
    expect((await call('GET', '/v2/auth/providers', { key: '' })).status).toBe(401);
  });

  it('a deployment token acts for its own workspace in the auth service only', async () => {
    const dep = makeDeployment(s.store.namespace, 'team-a');
    await s.store.create('AgentDeployment', dep);
    const token = mintDeploymentToken(DEPLOYMENT_KEY, 'team-a', dep.spec.deploymentId);
    const asAgent = await call('POST', '/v2/auth/authenticate', {
      key: token,
      tenant: '',
      body: { provider: 'idp', scopes: ['profile'], user_id: 'user-1' },
      keep: false,
    });
    expect(asAgent.json.status).toBe('completed');
    expect((await call('GET', '/v2/auth/providers', { key: token, tenant: 'team-a' })).status).toBe(200);
    expect((await call('GET', '/v2/auth/providers', { key: token, tenant: 'team-b' })).status).toBe(403);
    expect((await call('GET', '/v2/deployments', { key: token, tenant: 'team-a' })).status).toBe(401);
    expect((await call('GET', '/v1/integrations', { key: token, tenant: 'team-a' })).status).toBe(401);
    // A token for B's workspace minted with another key, a token of a deployment that does not exist: 401.
    const forged = mintDeploymentToken(randomBytes(32), 'team-b', dep.spec.deploymentId);
    expect((await call('GET', '/v2/auth/providers', { key: forged, tenant: '' })).status).toBe(401);
    const retargeted = token.replace(
      Buffer.from('team-a').toString('base64url'),
      Buffer.from('team-b').toString('base64url'),
    );
    expect((await call('GET', '/v2/auth/providers', { key: retargeted, tenant: '' })).status).toBe(401);
    const ghost = mintDeploymentToken(DEPLOYMENT_KEY, 'team-b', dep.spec.deploymentId);
    expect((await call('GET', '/v2/auth/providers', { key: ghost, tenant: '' })).status).toBe(401);
    // Deleting the deployment revokes its token.
    await s.store.delete('AgentDeployment', s.store.namespace, dep.metadata.name);
    expect((await call('GET', '/v2/auth/providers', { key: token, tenant: '' })).status).toBe(401);
  });

  it('deleting tokens: one by id, then all; the provider revokes them; deleting a provider removes its tokens', async () => {
    expect((await call('DELETE', `/v2/auth/tokens/${tokenId}`)).status).toBe(204);
    expect((await call('DELETE', `/v2/auth/tokens/${tokenId}`)).status).toBe(404);
    expect((await call('GET', '/v2/auth/tokens')).json.resources).toEqual([]);
    const again = await call('POST', '/v2/auth/authenticate', {
      body: { provider: 'idp', scopes: ['profile'], user_id: 'user-1' },
    });
    expect(again.json.status).toBe('pending');
    const g = await walkGrant(again.json.url, cp);
    const page = await browser(g.url, g.cookie);
    expect(page.status).toBe(200);
    const token = (await call('GET', `/v2/auth/wait/${again.json.auth_id}?timeout=5`, { keep: false })).json.token;
    expect((await call('DELETE', '/v2/auth/tokens?user_id=user-1')).status).toBe(204);
    expect((await call('GET', '/v2/auth/tokens?user_id=user-1')).json.resources).toEqual([]);
    // Revoked at the provider too (its revocation endpoint came from discovery).
    expect((await fetch(`${idp.url}/me`, { headers: { authorization: `Bearer ${token}` } })).status).toBe(401);

    const third = await call('POST', '/v2/auth/authenticate', {
      body: { provider: 'idp', scopes: ['profile'], user_id: 'user-6' },
    });
    const g3 = await walkGrant(third.json.url, cp, { login: 'frank' });
    await browser(g3.url, g3.cookie);
    expect((await call('GET', '/v2/auth/tokens')).json.resources).toHaveLength(1);
    expect((await call('DELETE', '/v2/auth/providers/idp')).status).toBe(204);
    expect((await call('GET', '/v2/auth/tokens')).json.resources).toEqual([]);
    expect((await call('GET', '/v2/auth/providers/idp')).status).toBe(404);
    // B's provider of the same id is still there.
    expect((await call('GET', '/v2/auth/providers/idp', { key: keyB, tenant: 'team-b' })).status).toBe(200);
  });

  it('no token, code or client secret in answers that should not carry them, in log lines or at rest', async () => {
    const secrets = [CLIENT_SECRET, 'b-secret-value', ...issued, ...codes];
    expect(issued.length).toBeGreaterThan(3);
    for (const text of answers) for (const v of secrets) expect(text).not.toContain(v);
    const logText = logs.join('');
    expect(logText).toContain('auth flow completed');
    for (const v of secrets) expect(logText).not.toContain(v);
    expect(logText).not.toContain('code=');
    if (s.dir) {
      const files = readdirSync(s.dir).filter((f) => f.startsWith('control-plane.db'));
      const bytes = Buffer.concat(files.map((f) => readFileSync(join(s.dir!, f))));
      for (const v of secrets) expect(bytes.includes(Buffer.from(v))).toBe(false);
      expect(bytes.includes(Buffer.from('ak1:k1:'))).toBe(true);
    }
    if (s.secretsText) {
      const text = await s.secretsText();
      expect(text).toContain('ak1:k1:');
      for (const v of secrets) expect(text).not.toContain(v);
    }
    expect(storeName).toBeTruthy();
  });
});

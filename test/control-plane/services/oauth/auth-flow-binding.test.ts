// OAuth flows belong to whoever started them, against a real OpenID Connect provider (oidc-provider on 127.0.0.1)
// and a control plane on a real port: the sign-in link binds the flow to the first browser that opens it, and the
// provider's redirect completes it only in that browser, so a callback URL replayed elsewhere (leaked from a log, a
// history, a Referer) is refused, with or without the attacker's own flow cookie. Redirect URIs come only from the
// public URL: a forged Host header changes nothing, and the control plane refuses to start the auth service without
// one.
import { randomBytes } from 'node:crypto';
import { request } from 'node:http';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import type { FastifyInstance } from 'fastify';
import Provider from 'oidc-provider';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createControlPlane } from '../../../../src/control-plane/app.ts';
import { createApiKey } from '../../../../src/control-plane/api-keys/keys.ts';
import { parseAuthKeyring } from '../../../../src/lib/auth-crypto.ts';
import { openEmbeddedPlatformState } from '../../../../src/state/embedded/index.ts';
import type { PlatformState } from '../../../../src/state/types.ts';
import { silentLogger } from '../../../../src/lib/logger.ts';
import { listen, walkGrant } from '../../helpers/oidc.ts';
import { cliFails, startControlPlaneProcess } from '../../helpers/process.ts';

const CLIENT_ID = 'agentplane-binding';
const CLIENT_SECRET = `client-secret-${randomBytes(12).toString('hex')}`;

describe('auth service: flows tied to their browser, redirect URIs from the public URL', () => {
  let dir: string;
  let store: PlatformState;
  let app: FastifyInstance;
  let cp: string;
  let idp: Awaited<ReturnType<typeof listen>>;
  let headers: Record<string, string>;

  const call = async (method: string, path: string, body?: unknown) => {
    const res = await fetch(`${cp}${path}`, {
      method,
      headers: { ...headers, ...(body === undefined ? {} : { 'content-type': 'application/json' }) },
      ...(body === undefined ? {} : { body: JSON.stringify(body) }),
    });
    return { status: res.status, json: JSON.parse((await res.text()) || 'null') };
  };
  const browser = async (url: string, cookie?: string) => {
    const res = await fetch(url, { redirect: 'manual', headers: cookie ? { cookie } : {} });
    return { status: res.status, text: await res.text(), location: res.headers.get('location') };
  };
  const startFlow = async (user: string) =>
    (await call('POST', '/v2/auth/authenticate', { provider: 'idp', scopes: ['profile'], user_id: user })).json as {
      url: string;
      auth_id: string;
    };
  const flowStatus = async (authId: string) => (await call('GET', `/v2/auth/wait/${authId}?timeout=0`)).json.status;
  const tokensOf = async (user: string) => (await call('GET', `/v2/auth/tokens?user_id=${user}`)).json.resources;

  beforeAll(async () => {
    dir = mkdtempSync(join(tmpdir(), 'ap-cp-flow-binding-'));
    store = openEmbeddedPlatformState({ dataDir: dir });
    app = await createControlPlane({
      store,
      logger: silentLogger(),
      consoleDir: false,
      auth: {
        keyring: parseAuthKeyring(`k=${randomBytes(32).toString('base64')}`),
        allowPrivateProviders: true,
        publicUrl: () => cp,
      },
    });
    cp = await app.listen({ host: '127.0.0.1', port: 0 });
    headers = { 'x-api-key': (await createApiKey(store, { tenants: ['team-a'] })).key, 'x-tenant-id': 'team-a' };
    idp = await listen();
    const provider = new Provider(idp.url, {
      clients: [
        {
          client_id: CLIENT_ID,
          client_secret: CLIENT_SECRET,
          redirect_uris: [`${cp}/v2/auth/callback/idp`],
          grant_types: ['authorization_code'],
          response_types: ['code'],
          token_endpoint_auth_method: 'client_secret_basic',
        },
      ],
      scopes: ['openid', 'profile'],
      claims: { openid: ['sub'], profile: ['name'] },
      findAccount: async (_ctx, sub) => ({ accountId: sub, claims: async () => ({ sub }) }),
    });
    idp.handle(provider.callback());
    const created = await call('POST', '/v2/auth/providers', {
      provider_id: 'idp',
      issuer_url: idp.url,
      client_id: CLIENT_ID,
      client_secret: CLIENT_SECRET,
      scopes: ['openid'],
    });
    expect(created.status).toBe(201);
  });
  afterAll(async () => {
    await app?.close();
    idp?.server.closeAllConnections();
    await new Promise((r) => idp?.server.close(r));
    await store?.close();
    rmSync(dir, { recursive: true, force: true });
  });

  it('a forged Host header changes neither the sign-in link nor the redirect_uri the provider gets', async () => {
    const answer = await new Promise<string>((resolve, reject) => {
      const req = request(`${cp}/v2/auth/authenticate`, {
        method: 'POST',
        headers: { ...headers, 'content-type': 'application/json', host: 'evil.example:8443' },
      });
      req.on('response', (res) => {
        let text = '';
        res.on('data', (d: Buffer) => (text += d.toString()));
        res.on('end', () => resolve(text));
      });
      req.on('error', reject);
      req.end(JSON.stringify({ provider: 'idp', scopes: ['profile'], user_id: 'host-user' }));
    });
    const { url } = JSON.parse(answer) as { url: string };
    expect(url.startsWith(`${cp}/v2/auth/start?state=`), url).toBe(true);
    const opened = await browser(url);
    expect(opened.status).toBe(302);
    const authorize = new URL(opened.location!);
    expect(authorize.origin).toBe(idp.url);
    expect(authorize.searchParams.get('redirect_uri')).toBe(`${cp}/v2/auth/callback/idp`);
    expect(answer + opened.location).not.toContain('evil.example');
  });

  it("a callback replayed in another browser (no flow cookie) is refused; the flow stays for its user's browser", async () => {
    const flow = await startFlow('victim');
    const grant = await walkGrant(flow.url, cp, { login: 'victim' });
    // The attacker has the callback URL (code and state), but not the victim's browser.
    const replay = await browser(grant.url);
    expect(replay.status).toBe(400);
    expect(replay.text).toContain('not started in this browser');
    expect(await flowStatus(flow.auth_id)).toBe('pending');
    expect(await tokensOf('victim')).toEqual([]);
    // The victim's own browser still completes it.
    const own = await browser(grant.url, grant.cookie);
    expect(own.status, own.text).toBe(200);
    expect(await flowStatus(flow.auth_id)).toBe('completed');
    expect(await tokensOf('victim')).toHaveLength(1);
  });

  it("the attacker's own flow cookie does not open someone else's callback", async () => {
    const victim = await startFlow('victim-2');
    const victimGrant = await walkGrant(victim.url, cp, { login: 'victim2' });
    const attacker = await startFlow('attacker');
    const attackerGrant = await walkGrant(attacker.url, cp, { login: 'mallory' });
    const attackerCookie = attackerGrant.cookie.split('; ').filter((c) => c.startsWith('ap_oauth_'));
    expect(attackerCookie).toHaveLength(1);
    // Under the victim's flow cookie name too: the value is what counts.
    const forged = attackerCookie[0]!.replace(/^ap_oauth_[0-9a-f]+/, `ap_oauth_${victim.auth_id.replace(/-/g, '')}`);
    for (const cookie of [attackerCookie[0]!, forged]) {
      const res = await browser(victimGrant.url, cookie);
      expect(res.status).toBe(400);
    }
    expect(await flowStatus(victim.auth_id)).toBe('pending');
    expect(await tokensOf('victim-2')).toEqual([]);
  });

  it('the sign-in link binds the flow to the first browser that opens it; another browser is refused', async () => {
    const flow = await startFlow('binder');
    const first = await browser(flow.url);
    expect(first.status).toBe(302);
    // A second browser (no cookie) opening the same link: refused, nothing sent on to the provider.
    const second = await browser(flow.url);
    expect(second.status).toBe(400);
    expect(second.location).toBeNull();
    expect(second.text).toContain('another browser');
    expect(await flowStatus(flow.auth_id)).toBe('pending');
  });

  it('the first browser may open its link again (a reload) and still completes', async () => {
    const flow = await startFlow('reloader');
    const res = await fetch(flow.url, { redirect: 'manual' });
    expect(res.status).toBe(302);
    const cookie = res.headers.getSetCookie()[0]!;
    expect(cookie).toMatch(/HttpOnly/);
    expect(cookie).toMatch(/Path=\/v2\/auth\//);
    const pair = cookie.split(';')[0]!;
    const again = await browser(flow.url, pair);
    expect(again.status).toBe(302);
    expect(again.location).toBe(res.headers.get('location'));
  });

  it('keys without a public URL: the control plane refuses to start; with neither, the auth service is off', async () => {
    const keys = `k=${randomBytes(32).toString('base64')}`;
    await expect(
      createControlPlane({
        store,
        logger: silentLogger(),
        consoleDir: false,
        auth: { keyring: parseAuthKeyring(keys) },
      }),
    ).rejects.toThrow(/public URL/);
    const data = mkdtempSync(join(tmpdir(), 'ap-cp-nopublic-'));
    try {
      const failed = await cliFails(['control-plane', '--port', '0', '--data-dir', data], {
        AGENTPLANE_AUTH_ENCRYPTION_KEYS: keys,
        AGENTPLANE_PUBLIC_URL: '',
      });
      expect(failed.code).not.toBe(0);
      expect(failed.stderr).toContain('--public-url is required');
      // The embedded store without keys and without a public URL: up, but the auth endpoints say what is missing.
      const proc = await startControlPlaneProcess(['--data-dir', data], {
        AGENTPLANE_AUTH_ENCRYPTION_KEYS: '',
        AGENTPLANE_PUBLIC_URL: '',
        AGENTPLANE_BOOTSTRAP_API_KEY: 'bootstrap-key-0123456789abcdef',
      });
      try {
        const res = await fetch(`${proc.url}/v2/auth/providers`, {
          method: 'POST',
          headers: {
            'x-api-key': 'bootstrap-key-0123456789abcdef',
            'x-tenant-id': 'team-a',
            'content-type': 'application/json',
          },
          body: JSON.stringify({
            provider_id: 'p',
            auth_url: 'https://idp.example.com/authorize',
            token_url: 'https://idp.example.com/token',
            client_id: 'c',
            client_secret: 's',
          }),
        });
        expect(res.status).toBe(503);
        expect(await res.text()).toContain('--public-url');
      } finally {
        await proc.stop();
      }
    } finally {
      rmSync(data, { recursive: true, force: true });
    }
  });
});

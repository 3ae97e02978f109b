// Provider URLs are chosen by a workspace, so the control plane must not be steered at its own network: without
// --auth-allow-private-providers it refuses http, credentials in URLs, and hosts at private, loopback, link-local or
// reserved addresses, at discovery and at the code exchange, with a 4xx / failed flow naming the reason.
import { randomBytes } from 'node:crypto';
import type { FastifyInstance } from 'fastify';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createControlPlane } from '../../../../src/control-plane/app.ts';
import { createApiKey } from '../../../../src/control-plane/api-keys/keys.ts';
import { parseAuthKeyring } from '../../../../src/lib/auth-crypto.ts';
import { openEmbeddedPlatformState } from '../../../../src/state/embedded/index.ts';
import type { PlatformState } from '../../../../src/state/types.ts';
import { silentLogger } from '../../../../src/lib/logger.ts';

describe('auth service: provider addresses', () => {
  let store: PlatformState;
  let app: FastifyInstance;
  let headers: Record<string, string>;
  const post = (url: string, payload: object) => app.inject({ method: 'POST', url, headers, payload });

  beforeAll(async () => {
    store = openEmbeddedPlatformState({ dataDir: ':memory:' });
    app = await createControlPlane({
      store,
      logger: silentLogger(),
      consoleDir: false,
      auth: {
        keyring: parseAuthKeyring(`k=${randomBytes(32).toString('base64')}`),
        publicUrl: 'https://cp.example.com',
      },
    });
    headers = { 'x-api-key': (await createApiKey(store, { tenants: ['team-a'] })).key, 'x-tenant-id': 'team-a' };
  });
  afterAll(async () => {
    await app.close();
    await store.close();
  });

  it.each([
    ['http://idp.example.com', 'https'],
    ['https://user:pw@idp.example.com', 'credentials'],
    ['https://127.0.0.1:8443', 'private'],
    ['https://[::1]', 'private'],
    ['https://169.254.169.254', 'private'],
    ['https://10.1.2.3', 'private'],
    ['https://[::ffff:192.168.1.1]', 'private'],
    // IPv6 literal spellings of loopback, link-local and private IPv4 addresses.
    ['https://[::127.0.0.1]', 'private'],
    ['https://[::7f00:1]', 'private'],
    ['https://[0:0:0:0:0:ffff:127.0.0.1]', 'private'],
    ['https://[::169.254.169.254]', 'private'],
    ['https://[::10.1.2.3]', 'private'],
    ['https://[64:ff9b::a9fe:a9fe]', 'private'],
    ['https://[2002:7f00:1::]', 'private'],
    ['https://[fd00::1]', 'private'],
    ['https://localhost', 'private'],
    ['not a url', 'absolute URL'],
  ])('discovery at %s is refused (422: %s)', async (issuer, reason) => {
    const res = await post('/v2/auth/providers', { provider_id: 'p', issuer_url: issuer, client_id: 'c' });
    expect(res.statusCode, res.body).toBe(422);
    expect(res.body).toContain('issuer_url');
    expect(res.body).toContain(reason);
    expect((await app.inject({ method: 'GET', url: '/v2/auth/providers', headers })).json().resources).toEqual([]);
  });

  it('a token endpoint on a private address: the exchange is refused, the flow fails, nothing is stored', async () => {
    const created = await post('/v2/auth/providers', {
      provider_id: 'inner',
      auth_url: 'https://idp.example.com/authorize',
      token_url: 'https://10.0.0.1/token',
      client_id: 'c',
      client_secret: 'secret-value-never-shown',
    });
    expect(created.statusCode, created.body).toBe(201);
    const start = (await post('/v2/auth/authenticate', { provider: 'inner', scopes: ['read'], user_id: 'u1' })).json();
    expect(start.status).toBe('pending');
    const state = new URL(start.url).searchParams.get('state')!;
    const opened = await app.inject({ method: 'GET', url: `/v2/auth/start?state=${encodeURIComponent(state)}` });
    expect(opened.statusCode).toBe(302);
    const cookie = String(opened.headers['set-cookie']).split(';')[0]!;
    const page = await app.inject({
      method: 'GET',
      url: `/v2/auth/callback/inner?code=abc&state=${encodeURIComponent(state)}`,
      headers: { cookie },
    });
    expect(page.statusCode).toBe(502);
    expect(page.body).toContain('private');
    const wait = await app.inject({ method: 'GET', url: `/v2/auth/wait/${start.auth_id}?timeout=0`, headers });
    expect(wait.json()).toMatchObject({ status: 'failed' });
    expect((await app.inject({ method: 'GET', url: '/v2/auth/tokens', headers })).json().resources).toEqual([]);
    expect(page.body + wait.body).not.toContain('secret-value-never-shown');
  });

  it('a workspace cannot fill the store with authorizations in progress (429 past 200); others are not affected', async () => {
    const start = (user: string, tenantHeaders = headers) =>
      app.inject({
        method: 'POST',
        url: '/v2/auth/authenticate',
        headers: tenantHeaders,
        payload: { provider: 'inner', scopes: ['read'], user_id: user },
      });
    let last = 0;
    for (let i = 0; i < 205 && last !== 429; i++) last = (await start(`flood-${i}`)).statusCode;
    expect(last).toBe(429);
    const open = (await store.listAuthObjects('flow', 'team-a')).length;
    expect(open).toBeLessThanOrEqual(201);
    expect((await start('one-more')).json().detail).toContain('in progress');
  });

  it('PATCH: one endpoint of an explicit provider, the secret, scopes; a private token endpoint is still refused', async () => {
    const patch = (payload: object) =>
      app.inject({ method: 'PATCH', url: '/v2/auth/providers/inner', headers, payload });
    const moved = await patch({ token_url: 'https://idp.example.com/token', name: 'Inner IdP', scopes: ['read'] });
    expect(moved.statusCode, moved.body).toBe(200);
    expect(moved.json()).toMatchObject({
      name: 'Inner IdP',
      auth_url: 'https://idp.example.com/authorize',
      token_url: 'https://idp.example.com/token',
      scopes: ['read'],
      has_client_secret: true,
      token_auth_method: 'client_secret_basic',
    });
    const noSecret = await patch({ client_secret: null });
    expect(noSecret.json()).toMatchObject({ has_client_secret: false, token_auth_method: 'none' });
    expect(noSecret.body).not.toContain('secret-value-never-shown');
    expect((await patch({ token_url: 'http://idp.example.com/token' })).statusCode).toBe(422);
    expect((await patch({ unknown_field: 1 })).statusCode).toBe(422);
    const got = await app.inject({ method: 'GET', url: '/v2/auth/providers/inner', headers });
    expect(got.json().token_url).toBe('https://idp.example.com/token');
  });
});

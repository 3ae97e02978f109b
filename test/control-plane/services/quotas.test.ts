// Per-workspace quotas at the control plane's door, on both stores, tried the way a workspace that wants more than
// its share would: over each quota it gets a 429 naming the quota and the flag that sets it, and nothing of the
// refused request is written; another workspace is not affected; requests sent all at once cannot squeeze past the
// last place; deleting deployments does not give the hour's revisions back; and the hourly window moves with the
// (injected) clock, with Retry-After saying when.
import { randomBytes } from 'node:crypto';
import { createServer } from 'node:http';
import type { AddressInfo } from 'node:net';
import type { FastifyInstance } from 'fastify';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createControlPlane } from '../../../src/control-plane/app.ts';
import { parseAuthKeyring } from '../../../src/lib/auth-crypto.ts';
import { silentLogger } from '../../../src/lib/logger.ts';
import { freshStores, type OpenedStore } from '../helpers/stores.ts';

const ADMIN = 'quotas-admin-key-0123456789';
const A = 'greedy';
const B = 'neighbour';
const HOUR = 3_600_000;

const stores: Record<string, () => Promise<OpenedStore>> = freshStores('ap-cp-quotas-');

const deployment = (name: string) => ({
  name,
  source: 'github',
  source_config: { repo_url: 'https://git.example.com/team/agent.git' },
  source_revision_config: { repo_ref: 'main', langgraph_config_path: 'langgraph.json' },
  secrets: [{ name: 'TOKEN', value: `value-of-${name}` }],
});

describe.each(Object.keys(stores))('per-workspace quotas on the %s store', (kind) => {
  let opened: OpenedStore;
  let app: FastifyInstance;
  let clock = Date.now();
  const call = async (method: string, url: string, opts: { tenant?: string; body?: unknown } = {}) => {
    const res = await app.inject({
      method: method as 'GET',
      url,
      headers: { 'x-api-key': ADMIN, 'x-tenant-id': opts.tenant ?? A },
      ...(opts.body !== undefined ? { payload: opts.body as object } : {}),
    });
    return { status: res.statusCode, json: res.body ? res.json() : undefined, headers: res.headers };
  };
  const deploymentsOf = async (tenant: string) =>
    (await call('GET', '/v2/deployments?limit=100', { tenant })).json.resources as { id: string; name: string }[];

  beforeAll(async () => {
    opened = await stores[kind]!();
    app = await createControlPlane({
      store: opened.store,
      logger: silentLogger(),
      consoleDir: false,
      bootstrapKeys: [{ key: ADMIN, tenants: ['*'] }],
      auth: {
        keyring: parseAuthKeyring(`k1=${randomBytes(32).toString('base64')}`),
        allowPrivateProviders: true,
        publicUrl: 'https://agentplane.test',
      },
      quotas: { deployments: 2, revisionsPerHour: 4, listeners: 1, integrations: 1, authProviders: 1 },
      now: () => clock,
    });
  }, 60_000);

  afterAll(async () => {
    await app?.close();
    await opened?.close();
  });

  it('deployments: a burst of creates gets exactly the quota, the rest 429 naming the flag, nothing half-made', async () => {
    const burst = await Promise.all(
      Array.from({ length: 6 }, (_, i) => call('POST', '/v2/deployments', { body: deployment(`agent-${i}`) })),
    );
    const statuses = burst.map((r) => r.status).sort();
    expect(statuses, JSON.stringify(burst.map((r) => r.json))).toEqual([201, 201, 429, 429, 429, 429]);
    const refused = burst.find((r) => r.status === 429)!;
    expect(refused.json.detail).toMatch(/deployments/);
    expect(refused.json.detail).toMatch(/--quota-deployments/);
    expect(refused.json.detail).toMatch(/AGENTPLANE_QUOTA_DEPLOYMENTS/);
    expect(refused.json.detail).toMatch(/\b2\b/);

    // Nothing of the refused ones: no deployment, no name claim, no revision, no secret set.
    const made = await deploymentsOf(A);
    expect(made).toHaveLength(2);
    const ns = opened.store.namespace;
    const madeNames = new Set(made.map((d) => d.name));
    const claims = (await opened.store.listNameClaims(ns)).filter((c) => c.tenant === A);
    expect(claims.map((c) => c.name).sort()).toEqual([...madeNames].sort());
    const revisions = (await opened.store.list('AgentRevision', ns)).items.filter((r) => r.spec.tenantId === A);
    expect(revisions).toHaveLength(2);

    // Another workspace still creates.
    const other = await call('POST', '/v2/deployments', { tenant: B, body: deployment('agent-0') });
    expect(other.status).toBe(201);
  });

  it('revisions per hour: patches and rebuilds stop at the quota with Retry-After; the window moves with the clock', async () => {
    const [first] = await deploymentsOf(A);
    // Two revisions are used (the two creates); two more fit.
    const rebuild = () => call('POST', `/v2/deployments/${first!.id}/revisions`);
    expect((await rebuild()).status).toBe(201);
    clock += 10 * 60_000;
    expect((await call('PATCH', `/v2/deployments/${first!.id}`, { body: { source_revision_config: {} } })).status).toBe(
      200,
    );
    const before = (await call('GET', `/v2/deployments/${first!.id}`)).json;

    const refused = await rebuild();
    expect(refused.status).toBe(429);
    expect(refused.json.detail).toMatch(/revisions/);
    expect(refused.json.detail).toMatch(/--quota-revisions-per-hour/);
    // The oldest revisions were made 10 minutes ago: the next place frees in 50 minutes.
    const retryAfter = Number(refused.headers['retry-after']);
    expect(retryAfter).toBeGreaterThan(49 * 60);
    expect(retryAfter).toBeLessThanOrEqual(50 * 60);

    // A refused PATCH that would make a revision changes nothing, not even the fields that came with it.
    const patch = await call('PATCH', `/v2/deployments/${first!.id}`, {
      body: { name: 'renamed', secrets: [{ name: 'TOKEN', value: 'new' }], source_revision_config: { repo_ref: 'v2' } },
    });
    expect(patch.status).toBe(429);
    const after = (await call('GET', `/v2/deployments/${first!.id}`)).json;
    expect(after).toEqual(before);
    const revs = (await call('GET', `/v2/deployments/${first!.id}/revisions`)).json.resources;
    expect(revs).toHaveLength(3);

    // Deleting a deployment does not give its revisions back; its own and the neighbour's quota are apart.
    const [, second] = await deploymentsOf(A);
    expect((await call('DELETE', `/v2/deployments/${second!.id}`)).status).toBe(204);
    expect((await call('POST', '/v2/deployments', { body: deployment('agent-new') })).status).toBe(429);
    expect(
      (await call('POST', `/v2/deployments/${(await deploymentsOf(B))[0]!.id}/revisions`, { tenant: B })).status,
    ).toBe(201);

    // Fifty minutes and a second later the three starts of the first minute have left the window: three places.
    clock += 50 * 60_000 + 1000;
    expect((await rebuild()).status).toBe(201);
    expect((await call('POST', '/v2/deployments', { body: deployment('agent-new') })).status).toBe(201);
    expect((await rebuild()).status).toBe(201);
    expect((await rebuild()).status).toBe(429);
    clock += HOUR;
    expect((await rebuild()).status).toBe(201);
  });

  it('listeners, integrations and auth providers stop at their quotas; the neighbour is not affected', async () => {
    const listener = (id: string) => ({ compute_type: 'k8s', compute_id: id, compute_config: { k8s_namespaces: [] } });
    expect((await call('POST', '/v2/listeners', { body: listener('eu-1') })).status).toBe(201);
    const overListeners = await Promise.all([
      call('POST', '/v2/listeners', { body: listener('eu-2') }),
      call('POST', '/v2/listeners', { body: listener('eu-3') }),
    ]);
    expect(overListeners.map((r) => r.status)).toEqual([429, 429]);
    expect(overListeners[0]!.json.detail).toMatch(/listeners.*--quota-listeners/);
    expect((await call('GET', '/v2/listeners')).json.resources).toHaveLength(1);
    expect((await call('POST', '/v2/listeners', { tenant: B, body: listener('eu-2') })).status).toBe(201);

    const integration = (name: string) => ({ name, host: 'git.example.com', token: `tok-${name}-0123456789` });
    expect((await call('POST', '/v1/integrations', { body: integration('one') })).status).toBe(201);
    const overIntegrations = await call('POST', '/v1/integrations', { body: integration('two') });
    expect(overIntegrations.status).toBe(429);
    expect(overIntegrations.json.detail).toMatch(/integrations.*--quota-integrations/);
    expect((await call('GET', '/v1/integrations')).json.resources).toHaveLength(1);
    expect(await opened.store.listIntegrations(A)).toHaveLength(1);
    expect((await call('POST', '/v1/integrations', { tenant: B, body: integration('two') })).status).toBe(201);

    const provider = (id: string) => ({
      provider_id: id,
      auth_url: 'http://127.0.0.1:9/authorize',
      token_url: 'http://127.0.0.1:9/token',
      client_id: 'c',
    });
    const firstProvider = await call('POST', '/v2/auth/providers', { body: provider('one') });
    expect(firstProvider.status, JSON.stringify(firstProvider.json)).toBe(201);
    const overProviders = await call('POST', '/v2/auth/providers', { body: provider('two') });
    expect(overProviders.status).toBe(429);
    expect(overProviders.json.detail).toMatch(/auth providers.*--quota-auth-providers/);
    expect(await opened.store.listAuthObjects('provider', A)).toHaveLength(1);
    // Over its quota a workspace cannot make the control plane fetch a discovery document either.
    let fetched = 0;
    const idp = createServer((_req, res) => {
      fetched++;
      res.writeHead(404).end();
    });
    await new Promise<void>((r) => idp.listen(0, '127.0.0.1', () => r()));
    try {
      const issuer = `http://127.0.0.1:${(idp.address() as AddressInfo).port}`;
      const viaDiscovery = await call('POST', '/v2/auth/providers', {
        body: { provider_id: 'three', issuer_url: issuer, client_id: 'c' },
      });
      expect(viaDiscovery.status).toBe(429);
      expect(fetched).toBe(0);
    } finally {
      await new Promise((r) => idp.close(r));
    }
    expect((await call('POST', '/v2/auth/providers', { tenant: B, body: provider('two') })).status).toBe(201);

    // A place freed is a place again.
    const [own] = (await call('GET', '/v1/integrations')).json.resources as { id: string }[];
    expect((await call('DELETE', `/v1/integrations/${own!.id}`)).status).toBe(204);
    expect((await call('POST', '/v1/integrations', { body: integration('three') })).status).toBe(201);
  });
});

// Listeners v2 at the control plane's door, on both stores: the resource (create, 409 duplicate compute_id, immutable
// compute_id/compute_type, delete refused while it has deployments unless cascade), listener keys (their tenant,
// their listener's endpoints only, never another listener's work), deployments naming listeners (unknown or another
// workspace's -> 404), and a listener's reports touching only what is assigned to it. Written as an attacker would.
import type { FastifyInstance } from 'fastify';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createControlPlane } from '../../../../src/control-plane/app.ts';
import { silentLogger } from '../../../../src/lib/logger.ts';
import { freshStores, type OpenedStore } from '../../helpers/stores.ts';

const ADMIN = 'listeners-admin-key-0123456789';
/** Small caps for pushed logs, so a test reaches them with a few reports (the default is the local builds' own). */
const LOG_LIMITS = { maxLines: 40, maxBytes: 64 * 1024 };
const A = 'ws-a';
const B = 'ws-b';

const stores: Record<string, () => Promise<OpenedStore>> = freshStores('ap-cp-listeners-');

describe.each(Object.keys(stores))('listeners v2 on the %s store', (kind) => {
  let opened: OpenedStore;
  let app: FastifyInstance;
  const call = async (method: string, url: string, opts: { key?: string; tenant?: string; body?: unknown } = {}) => {
    const res = await app.inject({
      method: method as 'GET',
      url,
      headers: { 'x-api-key': opts.key ?? ADMIN, 'x-tenant-id': opts.tenant ?? A },
      ...(opts.body !== undefined ? { payload: opts.body as object } : {}),
    });
    return { status: res.statusCode, body: res.body ? (res.json() as Record<string, any>) : {} };
  };
  const deployment = (name: string, listenerId?: string | null) => ({
    name,
    source: 'external_docker',
    source_config: { deployment_type: 'dev', ...(listenerId !== undefined ? { listener_id: listenerId } : {}) },
    source_revision_config: { image_uri: 'example/agent:1' },
    secrets: [{ name: 'TOKEN', value: `value-of-${name}` }],
  });

  beforeAll(async () => {
    opened = await stores[kind]!();
    app = await createControlPlane({
      store: opened.store,
      logger: silentLogger(),
      bootstrapKeys: [{ key: ADMIN, tenants: ['*'] }],
      consoleDir: false,
      listenerLogLimits: LOG_LIMITS,
    });
  }, 60_000);
  afterAll(async () => {
    await app?.close();
    await opened?.close();
  });

  it('creates, lists, patches and refuses duplicates and changes of identity', async () => {
    const res = await call('POST', '/v2/listeners', {
      body: { compute_type: 'k8s', compute_id: 'eu-1', compute_config: { k8s_namespaces: ['agents'] }, version: '1' },
    });
    expect(res.status).toBe(201);
    expect(res.body).toMatchObject({
      compute_type: 'k8s',
      compute_id: 'eu-1',
      compute_config: { k8s_namespaces: ['agents'] },
      version: '1',
      connected: false,
      deployment_count: 0,
    });
    const id = String(res.body.id);
    expect((await call('POST', '/v2/listeners', { body: { compute_type: 'k8s', compute_id: 'eu-1' } })).status).toBe(
      409,
    );
    // Another workspace may use the same compute_id.
    expect(
      (await call('POST', '/api-host/v2/listeners', { tenant: B, body: { compute_type: 'k8s', compute_id: 'eu-1' } }))
        .status,
    ).toBe(201);
    expect((await call('GET', '/v2/listeners')).body.resources.map((l: { id: string }) => l.id)).toEqual([id]);
    const patched = await call('PATCH', `/v2/listeners/${id}`, {
      body: { version: '2', compute_config: { k8s_namespaces: ['other'] } },
    });
    expect(patched.status).toBe(200);
    expect(patched.body).toMatchObject({ version: '2', compute_config: { k8s_namespaces: ['other'] } });
    const idChange = await call('PATCH', `/v2/listeners/${id}`, { body: { compute_id: 'eu-2' } });
    expect(idChange.status).toBe(400);
    expect(idChange.body.detail).toContain('compute_id is immutable');
    expect((await call('PATCH', `/v2/listeners/${id}`, { body: { compute_type: 'local' } })).status).toBe(400);
    expect((await call('GET', `/v2/listeners/${id}`)).body.compute_id).toBe('eu-1');
    // Bad input: 422 naming the field, never a 500.
    const bad = await call('POST', '/v2/listeners', { body: { compute_type: 'vm', compute_id: 'x' } });
    expect(bad.status).toBe(422);
    expect(JSON.stringify(bad.body)).toContain('compute_type');
    expect((await call('POST', '/v2/listeners', { body: { compute_type: 'k8s' } })).status).toBe(422);
    expect((await call('GET', '/v2/listeners/not-a-uuid')).status).toBe(404);
  });

  it('keeps workspaces and listeners apart (attacker view)', async () => {
    const la = String(
      (
        await call('POST', '/v2/listeners', {
          body: { compute_type: 'local', compute_id: 'a-1', base_url: 'http://dp.example/deployments' },
        })
      ).body.id,
    );
    const la2 = String(
      (await call('POST', '/v2/listeners', { body: { compute_type: 'local', compute_id: 'a-2' } })).body.id,
    );
    const lb = String(
      (await call('POST', '/v2/listeners', { tenant: B, body: { compute_type: 'local', compute_id: 'b-1' } })).body.id,
    );
    // A's listener is invisible to B, and B's deployments cannot name it (nor an unknown one).
    expect((await call('GET', `/v2/listeners/${la}`, { tenant: B })).status).toBe(404);
    expect((await call('DELETE', `/v2/listeners/${la}`, { tenant: B })).status).toBe(404);
    const foreign = await call('POST', '/v2/deployments', { tenant: B, body: deployment('steal', la) });
    expect(foreign.status).toBe(404);
    expect(foreign.body.detail).toContain(la);
    expect((await call('POST', '/v2/deployments', { body: deployment('nowhere', crypto.randomUUID()) })).status).toBe(
      404,
    );
    expect((await call('POST', '/v2/deployments', { body: deployment('junk', '../../etc') })).status).toBe(404);
    expect((await call('GET', '/v2/deployments', { tenant: B })).body.resources).toEqual([]);

    const onA = await call('POST', '/v2/deployments', { body: deployment('on-a', la) });
    expect(onA.status).toBe(201);
    const onA2 = await call('POST', '/v2/deployments', { body: deployment('on-a2', la2) });
    const own = await call('POST', '/v2/deployments', { body: deployment('own') });
    const onB = await call('POST', '/v2/deployments', { tenant: B, body: deployment('on-b', lb) });
    expect([onA2.status, own.status, onB.status]).toEqual([201, 201, 201]);

    const keyA = String((await call('POST', `/v2/listeners/${la}/keys`, { body: {} })).body.key);
    // A listener key: its workspace only, its listener's endpoints only.
    expect((await call('GET', `/v2/listeners/${la}/watch?timeout=0`, { key: keyA, tenant: B })).status).toBe(403);
    expect((await call('GET', `/v2/listeners/${lb}/watch?timeout=0`, { key: keyA, tenant: B })).status).toBe(403);
    expect((await call('GET', '/v2/deployments', { key: keyA })).status).toBe(403);
    expect((await call('GET', `/v2/deployments/${String(onA.body.id)}`, { key: keyA })).status).toBe(403);
    expect((await call('GET', '/api-host/v2/deployments', { key: keyA })).status).toBe(403);
    expect((await call('GET', '/v1/integrations', { key: keyA })).status).toBe(403);
    expect((await call('GET', '/v2/listeners', { key: keyA })).status).toBe(403);
    expect((await call('POST', `/v2/listeners/${la}/keys`, { key: keyA, body: {} })).status).toBe(403);
    expect((await call('GET', `/v2/listeners/${la2}/watch?timeout=0`, { key: keyA })).status).toBe(403);
    expect((await call('GET', '/v2/api-keys', { key: keyA })).status).toBe(403);

    // Watch and report belong to the listener's key: a workspace (even admin) key never sees env values this way.
    expect((await call('GET', `/v2/listeners/${la}/watch?timeout=0`)).status).toBe(403);
    expect((await call('POST', `/v2/listeners/${la}/report`, { body: { deployments: [] } })).status).toBe(403);

    // It sees only the deployments assigned to it: not A's own, not A's other listener's, not B's.
    const snap = await call('GET', `/api-host/v2/listeners/${la}/watch?timeout=0`, { key: keyA });
    expect(snap.status).toBe(200);
    expect(snap.body.deployments.map((d: { spec: { deploymentId: string } }) => d.spec.deploymentId)).toEqual([
      onA.body.id,
    ]);
    const text = JSON.stringify(snap.body);
    expect(text).toContain('value-of-on-a');
    for (const other of ['value-of-on-a2', 'value-of-own', 'value-of-on-b']) expect(text).not.toContain(other);
    // The same cursor -> nothing new.
    const again = await call('GET', `/v2/listeners/${la}/watch?timeout=0&since=${String(snap.body.cursor)}`, {
      key: keyA,
    });
    expect(again.body).toEqual({ cursor: snap.body.cursor, unchanged: true });

    // Reports about what is not assigned to it are ignored, and write nothing.
    const ownRev = `agentdeployment-${String(own.body.id)}`;
    const report = await call('POST', `/v2/listeners/${la}/report`, {
      key: keyA,
      body: {
        deployments: [
          { deployment_id: own.body.id, status: { phase: 'READY', url: 'http://evil.example' }, revisions: [] },
          { deployment_id: onB.body.id, status: { phase: 'READY', url: 'http://evil.example' }, revisions: [] },
          {
            deployment_id: onA.body.id,
            status: { phase: 'READY', url: 'http://dp.example/deployments/x' },
            revisions: [
              {
                name: String(snap.body.deployments[0].revisions[0].name),
                status: { phase: 'BUILDING', statusMessage: 'building on the data plane' },
                logs: { build: [{ id: '1', message: 'step 1' }] },
              },
              { name: `${ownRev}-r1`, status: { phase: 'DEPLOYED' } },
            ],
          },
        ],
      },
    });
    expect(report.status).toBe(200);
    expect(report.body.ignored).toEqual(expect.arrayContaining([own.body.id, onB.body.id]));
    expect((await call('GET', `/v2/deployments/${String(own.body.id)}`)).body.url).toBeNull();
    expect((await call('GET', `/v2/deployments/${String(onB.body.id)}`, { tenant: B })).body.url).toBeNull();
    const mine = await call('GET', `/v2/deployments/${String(onA.body.id)}`);
    expect(mine.body.url).toBe('http://dp.example/deployments/x');
    const rev = await call(
      'GET',
      `/v2/deployments/${String(onA.body.id)}/revisions/${String(mine.body.latest_revision_id)}`,
    );
    expect(rev.body).toMatchObject({ status: 'BUILDING', status_message: 'building on the data plane' });
    // The same log line sent twice (a listener restarted before it heard back) is kept once.
    await call('POST', `/v2/listeners/${la}/report`, {
      key: keyA,
      body: {
        deployments: [
          {
            deployment_id: onA.body.id,
            status: {},
            revisions: [
              {
                name: String(snap.body.deployments[0].revisions[0].name),
                status: { phase: 'BUILDING' },
                logs: {
                  build: [
                    { id: '1', message: 'step 1' },
                    { id: '2', message: 'step 2' },
                  ],
                },
              },
            ],
          },
        ],
      },
    });
    const logs = await call(
      'GET',
      `/v2/deployments/${String(onA.body.id)}/revisions/${String(mine.body.latest_revision_id)}/logs?type=build`,
    );
    expect(logs.body.logs.map((l: { message: string }) => l.message)).toEqual(['step 1', 'step 2']);
    const heard = (await call('GET', `/v2/listeners/${la}`)).body;
    expect(heard).toMatchObject({ connected: true, deployment_count: 1 });

    // listener_id is immutable.
    const move = await call('PATCH', `/v2/deployments/${String(onA.body.id)}`, {
      body: { source_config: { listener_id: la2 } },
    });
    expect(move.status).toBe(400);

    // Delete: refused while it runs deployments (named), done with cascade (its deployments and keys go too).
    const refused = await call('DELETE', `/v2/listeners/${la}`);
    expect(refused.status).toBe(409);
    expect(refused.body.detail).toContain('on-a');
    expect(refused.body.detail).toContain(String(onA.body.id));
    expect((await call('DELETE', `/v2/listeners/${la}?cascade=true`)).status).toBe(204);
    expect((await call('GET', `/v2/listeners/${la}`)).status).toBe(404);
    expect((await call('GET', `/v2/deployments/${String(onA.body.id)}`)).status).toBe(404);
    expect((await call('GET', `/v2/listeners/${la}/watch?timeout=0`, { key: keyA })).status).toBe(401);
    expect((await call('GET', `/v2/deployments/${String(own.body.id)}`)).status).toBe(200);
  });

  it('takes from a listener only URLs under its base_url, and bounded logs (attacker view)', async () => {
    // base_url is the workspace's to declare: an absolute http(s) URL, no credentials, no query.
    for (const base_url of ['ftp://dp.example', 'https://u:p@dp.example', 'https://dp.example/?x=1', 'dp.example']) {
      const bad = await call('POST', '/v2/listeners', { body: { compute_type: 'local', compute_id: 'x', base_url } });
      expect(bad.status, base_url).toBe(422);
      expect(JSON.stringify(bad.body)).toContain('base_url');
    }
    const created = await call('POST', '/v2/listeners', {
      body: { compute_type: 'local', compute_id: 'urls', base_url: 'https://dp.example.com/agents' },
    });
    expect(created.body.base_url).toBe('https://dp.example.com/agents');
    const l = String(created.body.id);
    const dep = await call('POST', '/v2/deployments', { body: deployment('url-target', l) });
    const depId = String(dep.body.id);
    const key = String((await call('POST', `/v2/listeners/${l}/keys`, { body: {} })).body.key);
    // A listener key cannot move its own base_url.
    expect(
      (await call('PATCH', `/v2/listeners/${l}`, { key, body: { base_url: 'https://evil.example' } })).status,
    ).toBe(403);
    const snap = await call('GET', `/v2/listeners/${l}/watch?timeout=0`, { key });
    const revName = String(snap.body.deployments[0].revisions[0].name);
    const report = (url: string, logs?: { id: string; message: string }[]) =>
      call('POST', `/v2/listeners/${l}/report`, {
        key,
        body: {
          deployments: [
            {
              deployment_id: depId,
              status: { phase: 'READY', url },
              revisions: [{ name: revName, status: { phase: 'BUILDING' }, ...(logs ? { logs: { build: logs } } : {}) }],
            },
          ],
        },
      });
    const shown = async () => (await call('GET', `/v2/deployments/${depId}`)).body;

    for (const url of [
      'https://evil.example/agents/x',
      'https://dp.example.com.evil.example/agents/x',
      'https://evil-dp.example.com/agents/x',
      'https://dp.example.com/agentsx',
      'https://dp.example.com/other/x',
      'https://dp.example.com/agents/../../other',
      'http://dp.example.com/agents/x',
      'https://dp.example.com:8443/agents/x',
      'https://user:pw@dp.example.com/agents/x',
      'https://evil.example\\@dp.example.com/agents/x',
      'javascript:alert(1)//dp.example.com/agents',
      'not a url',
    ]) {
      const res = await report(url, [{ id: '1', message: 'must not be stored' }]);
      expect(res.status, url).toBe(422);
      expect(JSON.stringify(res.body), url).toContain('url');
      expect(res.body.detail[0].loc, url).toEqual(['body', 'deployments', 0, 'status', 'url']);
    }
    // Nothing of a refused report was written: no URL, no status, no log line, no cursor.
    expect(await shown()).toMatchObject({ url: null });
    const revPath = `/v2/deployments/${depId}/revisions/${String((await shown()).latest_revision_id)}`;
    expect((await call('GET', revPath)).body.status).not.toBe('BUILDING');
    expect((await call('GET', `${revPath}/logs?type=build`)).body.logs).toEqual([]);

    // Under the base: its path, or a subdomain of its host.
    expect((await report('https://dp.example.com/agents/x')).status).toBe(200);
    expect((await shown()).url).toBe('https://dp.example.com/agents/x');
    expect((await report('https://eu.dp.example.com/any')).status).toBe(200);
    expect((await shown()).url).toBe('https://eu.dp.example.com/any');
    // Without a declared base_url every reported URL is refused.
    expect((await call('PATCH', `/v2/listeners/${l}`, { body: { base_url: null } })).body.base_url).toBeNull();
    const none = await report('https://dp.example.com/agents/x');
    expect(none.status).toBe(422);
    expect(none.body.detail[0].msg).toContain('base_url');
    await call('PATCH', `/v2/listeners/${l}`, { body: { base_url: 'https://dp.example.com/agents' } });

    // Pushed logs are bounded as local builds are: long lines cut, then the caps, then one line saying so; more
    // reports store nothing more.
    const line = (i: number) => ({ id: String(i), message: `${i}:${'x'.repeat(20_000)}` });
    expect((await report('https://dp.example.com/agents/x', [line(1), line(2)])).status).toBe(200);
    const first = (await call('GET', `${revPath}/logs?type=build`)).body.logs as { message: string }[];
    expect(first.map((e) => e.message.length)).toEqual([8192 + ' [line cut]'.length, 8192 + ' [line cut]'.length]);
    for (let batch = 0; batch < 4; batch++) {
      const lines = Array.from({ length: 10 }, (_, i) => line(3 + batch * 10 + i));
      expect((await report('https://dp.example.com/agents/x', lines)).status).toBe(200);
    }
    const stored = (await call('GET', `${revPath}/logs?type=build&limit=1000`)).body.logs as { message: string }[];
    const bytes = stored.reduce((n, e) => n + Buffer.byteLength(e.message) + 1, 0);
    expect(bytes).toBeLessThanOrEqual(LOG_LIMITS.maxBytes + 200);
    expect(stored.filter((e) => e.message.startsWith('[log truncated')).length).toBe(1);
    expect(stored.at(-1)!.message).toMatch(/^\[log truncated/);
    // Many short lines hit the line cap the same way (on the deploy log, its own budget).
    const many = Array.from({ length: 100 }, (_, i) => ({ id: String(i + 1), message: `line ${i}` }));
    await call('POST', `/v2/listeners/${l}/report`, {
      key,
      body: {
        deployments: [
          { deployment_id: depId, status: {}, revisions: [{ name: revName, status: {}, logs: { deploy: many } }] },
        ],
      },
    });
    const deploy = (await call('GET', `${revPath}/logs?type=deploy&limit=1000`)).body.logs as { message: string }[];
    expect(deploy.length).toBe(LOG_LIMITS.maxLines + 1);
    expect(deploy.at(-1)!.message).toMatch(/^\[log truncated/);
  });

  it('never hands a listener key or a platform key to the agents', async () => {
    const l = String(
      (await call('POST', '/v2/listeners', { body: { compute_type: 'local', compute_id: 'k' } })).body.id,
    );
    const key = await call('POST', `/v2/listeners/${l}/keys`, { body: { name: 'dp' } });
    expect(key.status).toBe(201);
    const snap = await call('GET', `/v2/listeners/${l}/watch?timeout=0`, { key: String(key.body.key) });
    const { createHash } = await import('node:crypto');
    const hash = createHash('sha256').update(String(key.body.key)).digest('hex');
    expect(snap.body.key_hashes).not.toContain(hash);
    // The bootstrap (admin) key acts for every workspace: a listener's agents must not accept it.
    expect(snap.body.key_hashes).not.toContain(createHash('sha256').update(ADMIN).digest('hex'));
  });
});

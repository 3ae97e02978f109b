// API keys: admins list, create and revoke them (API and CLI); the key publisher hands each tenant's agents the
// hashes of exactly the keys that may act for that tenant. Both stores.
import { existsSync, mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import type { FastifyInstance } from 'fastify';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { CoreV1Api } from '@kubernetes/client-node';
import { createControlPlane } from '../../../src/control-plane/app.ts';
import { KeyPublisher, fileKeySink, tenantKeysFileName } from '../../../src/control-plane/api-keys/key-publisher.ts';
import type { TenantKeySink } from '../../../src/state/api-keys.ts';
import { createApiKey, hashKey } from '../../../src/control-plane/api-keys/keys.ts';
import { loadKubeConfig, tenantKeysSecretName } from '../../../src/state/kubernetes/index.ts';
import { silentLogger } from '../../../src/lib/logger.ts';
import { githubBody } from '../helpers/harness.ts';
import { storeEntries, type OpenedStore } from '../helpers/stores.ts';
import { cli, cliFails } from '../helpers/process.ts';

const ADMIN = 'bootstrap-admin-key-0123456789';

type Setup = OpenedStore;

const stores = storeEntries('ap-cp-keys-', 'agents');

describe.each(stores)('API keys (%s store)', (_name, open) => {
  let s: Setup;
  let app: FastifyInstance;
  let tenantKey: string;
  let changes = 0;
  let deploymentsCreated = 0;
  const call = (method: string, url: string, key: string, tenant = 'team-a', body?: unknown) =>
    app.inject({
      method: method as 'GET',
      url,
      headers: { 'x-api-key': key, 'x-tenant-id': tenant },
      ...(body === undefined ? {} : { payload: body as object }),
    });

  beforeAll(async () => {
    s = await open();
    app = await createControlPlane({
      store: s.store,
      logger: silentLogger(),
      bootstrapKeys: [{ key: ADMIN, tenants: ['*'] }],
      onKeysChanged: () => changes++,
      onDeploymentCreated: () => deploymentsCreated++,
    });
    tenantKey = (await createApiKey(s.store, { tenants: ['team-a'], name: 'ci' })).key;
  });
  afterAll(async () => {
    await app?.close();
    await s?.close();
  });

  it('an ordinary workspace key may not list, create or revoke keys (403), and sees no hashes anywhere', async () => {
    expect((await call('GET', '/v2/api-keys', tenantKey)).statusCode).toBe(403);
    expect((await call('POST', '/v2/api-keys', tenantKey, 'team-a', { tenants: ['*'] })).statusCode).toBe(403);
    const [own] = (await s.store.listApiKeys()).filter((k) => k.name === 'ci');
    expect((await call('DELETE', `/v2/api-keys/${own!.id}`, tenantKey)).statusCode).toBe(403);
    expect((await call('DELETE', `/api-host/v2/api-keys/${own!.id}`, tenantKey)).statusCode).toBe(403);
    expect((await call('GET', '/v2/deployments', tenantKey)).statusCode).toBe(200);
  });

  it('an admin creates a key (shown once), lists keys without secrets, and revokes one: it stops working at once', async () => {
    const created = await call('POST', '/v2/api-keys', ADMIN, 'team-b', { name: 'deploy bot', tenants: ['team-b'] });
    expect(created.statusCode, created.body).toBe(201);
    const { key, id } = created.json();
    expect(key).toMatch(/^apk_/);
    expect((await call('GET', '/v2/deployments', key, 'team-b')).statusCode).toBe(200);
    expect((await call('GET', '/v2/deployments', key, 'team-a')).statusCode).toBe(403);

    const listed = await call('GET', '/v2/api-keys', ADMIN);
    expect(listed.statusCode).toBe(200);
    expect(listed.json().resources).toEqual(
      expect.arrayContaining([expect.objectContaining({ id, name: 'deploy bot', tenants: ['team-b'] })]),
    );
    expect(listed.body).not.toContain(key);
    expect(listed.body).not.toContain(hashKey(key));

    const before = changes;
    expect((await call('DELETE', `/v2/api-keys/${id}`, ADMIN)).statusCode).toBe(204);
    expect(changes).toBe(before + 1);
    expect((await call('GET', '/v2/deployments', key, 'team-b')).statusCode).toBe(401);
    expect((await call('DELETE', `/v2/api-keys/${id}`, ADMIN)).statusCode).toBe(404);
  });

  it('bad bodies and ids are 422 and store nothing', async () => {
    const count = (await s.store.listApiKeys()).length;
    for (const body of [
      {},
      { tenants: [] },
      { tenants: ['bad tenant!'] },
      { tenants: ['a'], name: 'x\u0000y' },
      { tenants: ['a'], extra: 1 },
    ]) {
      const res = await call('POST', '/v2/api-keys', ADMIN, 'team-a', body);
      expect([JSON.stringify(body), res.statusCode]).toEqual([JSON.stringify(body), 422]);
    }
    expect((await call('DELETE', '/v2/api-keys/not-a-uuid', ADMIN)).statusCode).toBe(422);
    expect((await s.store.listApiKeys()).length).toBe(count);
  });

  it('the publisher gives each tenant exactly its own keys, never "*", bootstrap or multi-workspace keys; revocations follow', async () => {
    const written = new Map<string, string[]>();
    const sink: TenantKeySink = { write: async (tenant, hashes) => void written.set(tenant, hashes) };
    const publisher = new KeyPublisher({
      store: s.store,
      sink,
      logger: silentLogger(),
    });
    const before = deploymentsCreated;
    for (const tenant of ['team-a', 'team-b']) {
      const res = await call('POST', '/v2/deployments', ADMIN, tenant, githubBody(`agent-${tenant}`));
      expect(res.statusCode, res.body).toBe(201);
    }
    // Each creation is announced (the server publishes the new tenant's key set then, not on its next pass); a refused
    // one is not.
    expect((await call('POST', '/v2/deployments', ADMIN, 'team-c', { name: 'no-source' })).statusCode).toBe(422);
    expect(deploymentsCreated - before).toBe(2);
    const everyone = await createApiKey(s.store, { tenants: ['*'], name: 'ops' });
    const bKey = await createApiKey(s.store, { tenants: ['team-b'] });
    const both = await createApiKey(s.store, { tenants: ['team-a', 'team-b'] });
    await publisher.sync();
    expect([...written.keys()].sort()).toEqual(['team-a', 'team-b']);
    const a = written.get('team-a')!;
    const b = written.get('team-b')!;
    expect(a).toContain(hashKey(tenantKey));
    expect(b).toEqual([hashKey(bKey.key)]);
    // A platform key (the bootstrap key, a '*' key) or a key of two workspaces would put a credential of another
    // workspace in reach of tenant code: no agent accepts one.
    for (const foreign of [bKey.key, everyone.key, ADMIN, both.key]) expect(a).not.toContain(hashKey(foreign));
    for (const foreign of [tenantKey, everyone.key, ADMIN, both.key]) expect(b).not.toContain(hashKey(foreign));
    // Hashes only: no key itself is handed out.
    expect(JSON.stringify([...written.values()])).not.toContain(tenantKey);

    written.clear();
    await publisher.sync();
    expect(written.size).toBe(0); // nothing changed, nothing written
    await s.store.deleteApiKey(bKey.record.id);
    await publisher.sync();
    expect([...written.keys()]).toEqual(['team-b']);
    expect(written.get('team-b')).not.toContain(hashKey(bKey.key));
  });

  it("the store's own sink (kubernetes) or a file sink (one machine) holds the hashes where agents read them", async () => {
    const sink = s.store.tenantKeySink?.();
    if (s.kubeconfig) {
      expect(sink).toBeDefined();
      await sink!.write('team-a', [hashKey('one')]);
      await sink!.write('team-a', [hashKey('two')]);
      const core = loadKubeConfig(s.kubeconfig).makeApiClient(CoreV1Api);
      const secret = await core.readNamespacedSecret({ namespace: 'agents', name: tenantKeysSecretName('team-a') });
      expect(secret.metadata?.labels?.['agentplane.dev/tenant']).toBe('team-a');
      expect(JSON.parse(Buffer.from(secret.data!['keys.json']!, 'base64').toString())).toEqual({
        hashes: [hashKey('two')],
      });
    } else {
      expect(sink).toBeUndefined();
      const dir = mkdtempSync(join(tmpdir(), 'ap-keys-'));
      const files = fileKeySink(dir);
      await files.write('Team_A.x', [hashKey('one')]);
      expect(files.pathFor('Team_A.x')).toBe(join(dir, tenantKeysFileName('Team_A.x')));
      expect(tenantKeysFileName('Team_A.x')).toMatch(/^tenant-[0-9a-f]{16}\/keys\.json$/);
      expect(JSON.parse(readFileSync(files.pathFor('Team_A.x'), 'utf8'))).toEqual({ hashes: [hashKey('one')] });
      rmSync(dir, { recursive: true, force: true });
    }
  });
});

describe('agentplane api-key list / revoke', () => {
  it('lists keys without secrets and revokes one by id', async () => {
    const dir = mkdtempSync(join(tmpdir(), 'ap-cli-keys-'));
    try {
      const { stdout } = await cli([
        'api-key',
        'create',
        '--tenant',
        'team-1',
        '--name',
        'laptop',
        '--json',
        '--init',
        '--data-dir',
        dir,
      ]);
      const created = JSON.parse(stdout) as { key: string; id: string };
      const table = (await cli(['api-key', 'list', '--data-dir', dir])).stdout;
      expect(table).toMatch(/^ID\s+NAME\s+TENANTS\s+CREATED/);
      expect(table).toContain(created.id);
      expect(table).toContain('laptop');
      expect(table).not.toContain(created.key);
      const listed = JSON.parse((await cli(['api-key', 'list', '--json', '--data-dir', dir])).stdout);
      expect(listed).toEqual([expect.objectContaining({ id: created.id, name: 'laptop', tenants: ['team-1'] })]);
      const revoked = await cli(['api-key', 'revoke', created.id, '--data-dir', dir]);
      expect(revoked.stderr).toMatch(/Revoked API key/);
      expect(JSON.parse((await cli(['api-key', 'list', '--json', '--data-dir', dir])).stdout)).toEqual([]);
      const again = await cliFails(['api-key', 'revoke', created.id, '--data-dir', dir]);
      expect(again.code).toBe(1);
      expect(again.stderr).toMatch(/no API key with id/);
      expect((await cliFails(['api-key', 'revoke', '--data-dir', dir])).code).toBe(2);
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  });

  it('refuses a folder with no store instead of starting an empty one there, unless --init', async () => {
    const dir = mkdtempSync(join(tmpdir(), 'ap-cli-nostore-'));
    try {
      for (const argv of [['create', '--tenant', 'team-1'], ['list']]) {
        const r = await cliFails(['api-key', ...argv, '--data-dir', join(dir, 'wrong')]);
        expect(r.code).toBe(1);
        expect(r.stderr).toMatch(
          /^agentplane api-key: no control-plane store in .*wrong: pass the folder your platform uses as --data-dir/,
        );
        expect(r.stderr.trim().split('\n')).toHaveLength(1);
        expect(existsSync(join(dir, 'wrong'))).toBe(false);
      }
      expect((await cliFails(['api-key', 'create', '--tenant', 'team-1', '--data-dir', dir])).stderr).toContain(
        'or add --init to start a new store there',
      );
      const made = await cli(['api-key', 'create', '--tenant', 'team-1', '--init', '--data-dir', dir]);
      expect(made.stdout.trim()).toMatch(/\S{20,}/);
      // Once the store is there, --init is not needed.
      expect((await cli(['api-key', 'create', '--tenant', 'team-2', '--data-dir', dir])).stdout.trim()).toMatch(
        /\S{20,}/,
      );
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  });
});

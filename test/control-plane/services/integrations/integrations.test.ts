// Integrations v1 (plain git credentials): create, list, get, delete under /v1 and /api-host/v1; the token is
// write-only and scoped to the workspace; at rest it is never plaintext in the embedded store. Both stores.
import { randomUUID } from 'node:crypto';
import { readdirSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import type { FastifyInstance } from 'fastify';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createControlPlane } from '../../../../src/control-plane/app.ts';
import { createApiKey } from '../../../../src/control-plane/api-keys/keys.ts';
import { AlreadyExistsError } from '../../../../src/state/errors.ts';
import { silentLogger } from '../../../../src/lib/logger.ts';
import { githubBody } from '../../helpers/harness.ts';
import { storeEntries, type OpenedStore } from '../../helpers/stores.ts';

const TOKEN = 'ghp_integration-token-4d1f9a7c2b';

type Setup = OpenedStore;

const stores = storeEntries('ap-cp-int-', 'agents');

describe.each(stores)('integrations v1 (%s store)', (_name, open) => {
  let s: Setup;
  let app: FastifyInstance;
  let keyA: string;
  let keyB: string;
  const answers: string[] = [];
  const call = async (method: string, url: string, key: string, tenant: string, body?: unknown) => {
    const res = await app.inject({
      method: method as 'GET',
      url,
      headers: { 'x-api-key': key, 'x-tenant-id': tenant },
      ...(body === undefined ? {} : { payload: body as object }),
    });
    answers.push(res.body);
    return res;
  };

  beforeAll(async () => {
    s = await open();
    app = await createControlPlane({ store: s.store, logger: silentLogger(), consoleDir: false });
    keyA = (await createApiKey(s.store, { tenants: ['team-a'] })).key;
    keyB = (await createApiKey(s.store, { tenants: ['team-b'] })).key;
  });
  afterAll(async () => {
    await app?.close();
    await s?.close();
  });

  it('creates, lists, gets and deletes a credential; the token is never in an answer; other workspaces get 404', async () => {
    const created = await call('POST', '/v1/integrations', keyA, 'team-a', {
      name: 'gitea',
      host: 'Git.Example.com:8443',
      username: 'bot',
      token: TOKEN,
    });
    expect(created.statusCode).toBe(201);
    const body = created.json();
    expect(body).toMatchObject({ name: 'gitea', type: 'git', host: 'git.example.com:8443', username: 'bot' });
    const id = body.id as string;

    const tokenOnly = await call('POST', '/api-host/v1/integrations', keyA, 'team-a', {
      name: 'plain',
      host: 'github.com',
      token: TOKEN,
    });
    expect(tokenOnly.statusCode).toBe(201);
    expect(tokenOnly.json()).toMatchObject({ host: 'github.com', username: null });

    const list = await call('GET', '/v1/integrations', keyA, 'team-a');
    expect(list.json().resources.map((r: { id: string }) => r.id)).toEqual([id, tokenOnly.json().id]);
    expect((await call('GET', `/api-host/v1/integrations/${id}`, keyA, 'team-a')).json()).toEqual(body);

    // Another workspace: nothing listed, the id is unknown to it, it cannot delete it.
    expect((await call('GET', '/v1/integrations', keyB, 'team-b')).json()).toEqual({ resources: [] });
    expect((await call('GET', `/v1/integrations/${id}`, keyB, 'team-b')).statusCode).toBe(404);
    expect((await call('DELETE', `/v1/integrations/${id}`, keyB, 'team-b')).statusCode).toBe(404);
    // A key of team-b cannot act for team-a.
    expect((await call('GET', `/v1/integrations/${id}`, keyB, 'team-a')).statusCode).toBe(403);

    // Builds read the token through the store, for the owning workspace only.
    expect(await s.store.integrationToken('team-a', id)).toBe(TOKEN);
    expect(await s.store.integrationToken('team-b', id)).toBeUndefined();

    expect((await call('DELETE', `/v1/integrations/${id}`, keyA, 'team-a')).statusCode).toBe(204);
    expect((await call('GET', `/v1/integrations/${id}`, keyA, 'team-a')).statusCode).toBe(404);
    expect(await s.store.integrationToken('team-a', id)).toBeUndefined();

    for (const a of answers) expect(a).not.toContain(TOKEN);
  });

  it('bad input is a 422 naming the field', async () => {
    const bad: [Record<string, unknown>, string][] = [
      [{ name: 'x', host: 'https://github.com/org', token: 't' }, 'host'],
      [{ name: 'x', host: 'user:pw@github.com', token: 't' }, 'host'],
      [{ name: 'x', host: 'github.com' }, 'token'],
      [{ name: 'x', host: 'github.com', token: 'a\nb' }, 'token'],
      [{ name: 'x', host: 'github.com', token: 't', username: 'a:b' }, 'username'],
      [{ name: 'x', host: 'github.com', token: 't', type: 'github_app' }, 'type'],
      [{ name: 'x', host: 'github.com', token: 't', extra: 1 }, ''],
    ];
    for (const [payload, field] of bad) {
      const res = await call('POST', '/v1/integrations', keyA, 'team-a', payload);
      expect(res.statusCode, JSON.stringify(payload)).toBe(422);
      if (field)
        expect(
          res.json().detail.some((d: { loc: unknown[] }) => d.loc.includes(field)),
          res.body,
        ).toBe(true);
    }
    expect((await call('GET', '/v1/integrations/not-a-uuid', keyA, 'team-a')).statusCode).toBe(422);
    expect((await call('GET', '/v1/integrations', 'wrong-key', 'team-a')).statusCode).toBe(401);
  });

  it('a deployment names an integration of its own workspace whose host is the repository host', async () => {
    const created = await call('POST', '/v1/integrations', keyA, 'team-a', {
      name: 'gh',
      host: 'github.com',
      token: TOKEN,
    });
    const id = created.json().id as string;
    const deploy = (key: string, tenant: string, name: string, repoUrl: string) =>
      call('POST', '/v2/deployments', key, tenant, {
        ...githubBody(name),
        source_config: { ...githubBody(name).source_config, integration_id: id, repo_url: repoUrl },
      });

    const other = await deploy(keyB, 'team-b', 'stolen', 'https://github.com/example/agent');
    expect(other.statusCode).toBe(404);

    const wrongHost = await deploy(keyA, 'team-a', 'elsewhere', 'https://gitlab.com/example/agent');
    expect(wrongHost.statusCode).toBe(422);
    expect(wrongHost.json().detail[0].loc).toEqual(['body', 'source_config', 'repo_url']);

    const ok = await deploy(keyA, 'team-a', 'private', 'https://GitHub.com/example/agent');
    expect(ok.statusCode, ok.body).toBe(201);
    expect(ok.json().source_config.integration_id).toBe(id);
    for (const a of answers) expect(a).not.toContain(TOKEN);
  });

  it('an SSH key integration: write-only key and known_hosts, ssh repo URLs only, bad shapes are 422', async () => {
    const KEY =
      '-----BEGIN OPENSSH PRIVATE KEY-----\nb3BlbnNzaC1rZXktdjEAAAAABG5vbmUAAAAEbm9uZQ-ssh-key-body\n-----END OPENSSH PRIVATE KEY-----\n';
    const KNOWN = 'git.example.com ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIHostKeyBodyxyz';
    const created = await call('POST', '/v1/integrations', keyA, 'team-a', {
      name: 'ssh',
      host: 'git.example.com',
      ssh_private_key: KEY,
      known_hosts: KNOWN,
    });
    expect(created.statusCode, created.body).toBe(201);
    expect(created.json()).toMatchObject({ type: 'git', auth: 'ssh', host: 'git.example.com' });
    const id = created.json().id as string;
    for (const [payload, field] of [
      [{ name: 'x', host: 'git.example.com', ssh_private_key: KEY }, 'known_hosts'],
      [{ name: 'x', host: 'git.example.com', ssh_private_key: KEY, known_hosts: 'nonsense' }, 'known_hosts'],
      [{ name: 'x', host: 'git.example.com', ssh_private_key: 'not a key', known_hosts: KNOWN }, 'ssh_private_key'],
      [{ name: 'x', host: 'git.example.com', ssh_private_key: KEY, known_hosts: KNOWN, token: 't' }, 'token'],
      [{ name: 'x', host: 'git.example.com', token: 't', known_hosts: KNOWN }, 'known_hosts'],
      [{ name: 'x', host: 'git.example.com', token: 't', webhook_secret: 'short' }, 'webhook_secret'],
    ] as const) {
      const res = await call('POST', '/v1/integrations', keyA, 'team-a', payload);
      expect(res.statusCode, JSON.stringify(payload)).toBe(422);
      expect(
        res.json().detail.some((d: { loc: unknown[] }) => d.loc.includes(field)),
        res.body,
      ).toBe(true);
    }
    const deploy = (name: string, repoUrl: string) =>
      call('POST', '/v2/deployments', keyA, 'team-a', {
        ...githubBody(name),
        source_config: { ...githubBody(name).source_config, integration_id: id, repo_url: repoUrl },
      });
    const https = await deploy('ssh-over-https', 'https://git.example.com/team/agent.git');
    expect(https.statusCode).toBe(422);
    expect(https.json().detail[0].loc).toEqual(['body', 'source_config', 'repo_url']);
    expect((await deploy('ssh-scp', 'git@git.example.com:team/agent.git')).statusCode).toBe(201);
    expect((await deploy('ssh-url', 'ssh://git@git.example.com/team/agent.git')).statusCode).toBe(201);
    for (const a of answers) expect(a).not.toContain('ssh-key-body');
  });

  it('a GitHub installation belongs to one workspace; webhooks find integrations across workspaces by id', async () => {
    const record = (tenant: string) => ({
      id: randomUUID(),
      tenant,
      name: 'acme',
      host: 'github.com',
      type: 'github' as const,
      installationId: 4242,
      account: 'acme',
      createdAt: new Date().toISOString(),
    });
    const first = record('team-a');
    await s.store.putIntegration(first, 'agentplane-credential-v2:{}');
    await expect(s.store.putIntegration(record('team-b'), 'agentplane-credential-v2:{}')).rejects.toBeInstanceOf(
      AlreadyExistsError,
    );
    expect(await s.store.findIntegrations({ installationId: 4242 })).toEqual([first]);
    expect(await s.store.findIntegrations({ id: first.id })).toEqual([first]);
    expect(await s.store.findIntegrations({ id: randomUUID() })).toEqual([]);
    expect(await s.store.getIntegration('team-b', first.id)).toBeUndefined();
    expect(await s.store.deleteIntegration('team-a', first.id)).toBe(true);
    expect(await s.store.findIntegrations({ installationId: 4242 })).toEqual([]);
  });

  it('the token is not plaintext at rest (embedded data dir)', async (ctx) => {
    if (!s.dir) return ctx.skip();
    await call('POST', '/v1/integrations', keyA, 'team-a', { name: 'kept', host: 'github.com', token: TOKEN });
    for (const f of readdirSync(s.dir))
      expect(readFileSync(join(s.dir, f)).includes(Buffer.from(TOKEN)), f).toBe(false);
  });
});

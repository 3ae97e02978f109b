// Registry push tokens through the real app: what `langgraph deploy` gets from POST /push-token, what a registry
// client gets from the token endpoint for it, and what an attacker tries there (no, forged, tampered, expired or
// another workspace's credentials; scopes of other repositories; another deployment's image in a revision). The
// real registry and a real push are in test/kube/registry-push.test.ts.
import { generateKeyPairSync } from 'node:crypto';
import { writeFileSync } from 'node:fs';
import { join } from 'node:path';
import type { FastifyInstance } from 'fastify';
import { createPublicKey } from 'node:crypto';
import { decodeProtectedHeader, jwtVerify } from 'jose';
import { workspacesApp, type WorkspacesApp } from '../../helpers/harness.ts';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { parseControlPlaneConfig } from '../../../../src/control-plane/config.ts';
import { mintPushToken } from '../../../../src/control-plane/services/registry-tokens/push-token.ts';
import { grantedAccess, parseScopes } from '../../../../src/control-plane/services/registry-tokens/scopes.ts';
import { registrySignerFromPem } from '../../../../src/control-plane/services/registry-tokens/signer.ts';

const REGISTRY = 'registry.example.com:5000/agents';
const SERVICE = 'registry.example.com:5000';
const pem = generateKeyPairSync('ec', { namedCurve: 'P-256' }).privateKey.export({ type: 'pkcs8', format: 'pem' });
const signer = registrySignerFromPem(String(pem));
const DIGEST = `sha256:${'a'.repeat(64)}`;

let dir: string;
let cp: FastifyInstance;
let clock = Date.now();
let headersA: Record<string, string>;
let headersB: Record<string, string>;
let bed: WorkspacesApp;

beforeAll(async () => {
  bed = await workspacesApp('ap-cp-regtok-', () => ({
    registryTokens: { signer, issuer: 'agentplane-test', service: SERVICE, registry: REGISTRY, now: () => clock },
  }));
  ({ app: cp, dir, headersA, headersB } = bed);
});

afterAll(async () => bed?.close());

async function imageDeployment(headers: Record<string, string>, name: string): Promise<string> {
  const res = await cp.inject({
    method: 'POST',
    url: '/v2/deployments',
    headers,
    payload: {
      name,
      source: 'external_docker',
      source_revision_config: { image_uri: `docker.io/library/a@${DIGEST}` },
    },
  });
  expect(res.statusCode, res.body).toBe(201);
  return res.json().id as string;
}

/** What `langgraph deploy` creates before a local build: no image yet. */
async function pushedDeployment(headers: Record<string, string>, name: string): Promise<string> {
  const res = await cp.inject({
    method: 'POST',
    url: '/v2/deployments',
    headers,
    payload: { name, source: 'internal_docker', source_config: { deployment_type: 'dev' }, source_revision_config: {} },
  });
  expect(res.statusCode, res.body).toBe(201);
  return res.json().id as string;
}

async function pushToken(headers: Record<string, string>, id: string) {
  const res = await cp.inject({ method: 'POST', url: `/v2/deployments/${id}/push-token`, headers });
  expect(res.statusCode, res.body).toBe(200);
  return res.json() as { token: string; username: string; registry_url: string; repository_url: string };
}

const basic = (user: string, password: string) => `Basic ${Buffer.from(`${user}:${password}`).toString('base64')}`;

/** What a registry client sends after the registry's challenge. */
const tokenRequest = (authorization: string | undefined, scopes: string[], prefix = '', service = SERVICE) =>
  cp.inject({
    method: 'GET',
    url: `${prefix}/v2/registry/token`,
    query: { service, scope: scopes, account: 'agentplane' },
    headers: authorization ? { authorization } : {},
  });

async function verified(token: string) {
  const { payload, protectedHeader } = await jwtVerify(token, createPublicKey(signer.privateKey), {
    issuer: 'agentplane-test',
    audience: SERVICE,
    currentDate: new Date(clock),
  });
  return { payload: payload as { access: unknown; exp: number; sub: string }, protectedHeader };
}

describe('push tokens', () => {
  it("answers what the CLI logs in and pushes with: the deployment's own repository", async () => {
    const id = await pushedDeployment(headersA, 'pt-own');
    const t = await pushToken(headersA, id);
    expect(t).toMatchObject({ username: 'agentplane', registry_url: REGISTRY, repository_url: `${REGISTRY}/ag-${id}` });
    const res = await tokenRequest(basic(t.username, t.token), [`repository:agents/ag-${id}:push,pull`]);
    expect(res.statusCode, res.body).toBe(200);
    expect(res.headers['cache-control']).toBe('no-store');
    const body = res.json();
    expect(body.access_token).toBe(body.token);
    expect(body.expires_in).toBe(300);
    const { payload, protectedHeader } = await verified(body.token);
    expect(protectedHeader).toMatchObject({ alg: 'ES256', kid: signer.kid });
    expect(payload.access).toEqual([{ type: 'repository', name: `agents/ag-${id}`, actions: ['pull', 'push'] }]);
    expect(payload.sub).toBe(`team-a/${id}`);
    // The same under /api-host, where the CLI's --host-url may point.
    const host = await tokenRequest(
      basic('oauth2accesstoken', t.token),
      [`repository:agents/ag-${id}:pull`],
      '/api-host',
    );
    expect(host.statusCode).toBe(200);
    expect((await verified(host.json().token)).payload.access).toEqual([
      { type: 'repository', name: `agents/ag-${id}`, actions: ['pull'] },
    ]);
  });

  it('grants nothing on any other repository, whatever is asked', async () => {
    const a = await pushedDeployment(headersA, 'pt-a');
    const a2 = await pushedDeployment(headersA, 'pt-a2');
    const b = await pushedDeployment(headersB, 'pt-b');
    const t = await pushToken(headersA, a);
    const res = await tokenRequest(basic('x', t.token), [
      `repository:agents/ag-${a2}:push,pull`,
      `repository:agents/ag-${b}:push,pull`,
      `repository:agents/ag-${a}/../ag-${b}:push`,
      'registry:catalog:*',
      `repository:agents/ag-${a}:delete,*`,
    ]);
    expect(res.statusCode, res.body).toBe(200);
    expect((await verified(res.json().token)).payload.access).toEqual([]);
    // Space-separated scopes in one value (the OAuth2 form) are read too; only the own one is granted.
    const mixed = await tokenRequest(basic('x', t.token), [
      `repository:agents/ag-${b}:push repository:agents/ag-${a}:push`,
    ]);
    expect((await verified(mixed.json().token)).payload.access).toEqual([
      { type: 'repository', name: `agents/ag-${a}`, actions: ['push'] },
    ]);
  });

  it('refuses no, forged, tampered, expired and orphaned push tokens with a 401', async () => {
    const id = await pushedDeployment(headersA, 'pt-attacks');
    const t = await pushToken(headersA, id);
    const scope = [`repository:agents/ag-${id}:push,pull`];
    const none = await tokenRequest(undefined, scope);
    expect(none.statusCode).toBe(401);
    expect(none.headers['www-authenticate']).toMatch(/^Basic realm=/);
    expect((await tokenRequest(basic('x', 'hunter2'), scope)).statusCode).toBe(401);
    // A token for team-b's deployment made up by team-a: the payload is changed, the signature kept.
    const [payload, sig] = t.token.slice(4).split('.');
    const claims = JSON.parse(Buffer.from(payload!, 'base64url').toString());
    const forgedPayload = Buffer.from(JSON.stringify({ ...claims, t: 'team-b' })).toString('base64url');
    expect((await tokenRequest(basic('x', `apr_${forgedPayload}.${sig}`), scope)).statusCode).toBe(401);
    const flipped = sig!.slice(0, -2) + (sig!.endsWith('AA') ? 'BB' : 'AA');
    expect((await tokenRequest(basic('x', `apr_${payload}.${flipped}`), scope)).statusCode).toBe(401);
    // Signed with another control plane's key.
    const other = registrySignerFromPem(
      String(generateKeyPairSync('ec', { namedCurve: 'P-256' }).privateKey.export({ type: 'pkcs8', format: 'pem' })),
    );
    const foreign = mintPushToken(other.pushTokenKey, { tenant: 'team-a', deploymentId: id, expires: claims.e });
    expect((await tokenRequest(basic('x', foreign), scope)).statusCode).toBe(401);
    // The registry's own bearer token is no push token.
    const bearer = (await tokenRequest(basic('x', t.token), scope)).json().token as string;
    expect((await tokenRequest(basic('x', bearer), scope)).statusCode).toBe(401);

    const saved = clock;
    clock += 15 * 60 * 1000 + 1000;
    try {
      const expired = await tokenRequest(basic('x', t.token), scope);
      expect(expired.statusCode).toBe(401);
      expect(expired.json().detail).toMatch(/expired at/);
    } finally {
      clock = saved;
    }
    // The registry token never outlives the push token that bought it.
    clock += 14 * 60 * 1000;
    try {
      const late = await tokenRequest(basic('x', t.token), scope);
      expect(late.json().expires_in).toBeLessThanOrEqual(60);
      expect((await verified(late.json().token)).payload.exp).toBe(claims.e);
    } finally {
      clock = saved;
    }

    const del = await cp.inject({ method: 'DELETE', url: `/v2/deployments/${id}`, headers: headersA });
    expect(del.statusCode, del.body).toBeLessThan(300);
    const orphan = await tokenRequest(basic('x', t.token), scope);
    expect(orphan.statusCode).toBe(401);
    expect(orphan.json().detail).toMatch(/no longer exists/);
  });

  it('asks for an API key of the deployment’s workspace, and says which service and scope are wrong', async () => {
    const id = await pushedDeployment(headersA, 'pt-keys');
    const wrong = await cp.inject({
      method: 'POST',
      url: `/v2/deployments/${id}/push-token`,
      headers: { ...headersA, 'x-api-key': 'ap_not-a-key-of-this-control-plane' },
    });
    expect(wrong.statusCode).toBe(401);
    const otherTenant = await cp.inject({ method: 'POST', url: `/v2/deployments/${id}/push-token`, headers: headersB });
    expect(otherTenant.statusCode).toBe(404);
    const t = await pushToken(headersA, id);
    const service = await tokenRequest(basic('x', t.token), [`repository:agents/ag-${id}:push`], '', 'docker.io');
    expect(service.statusCode).toBe(400);
    expect(service.json().detail).toContain(`"${SERVICE}"`);
    const scope = await tokenRequest(basic('x', t.token), ['push']);
    expect(scope.statusCode).toBe(400);
    expect(scope.json().detail).toMatch(/scope "push"/);
  });
});

describe('internal_docker deployments (what `langgraph deploy` makes for a local build)', () => {
  it('takes its pushed image from its own repository only, as the CLI PATCHes it', async () => {
    const id = await pushedDeployment(headersA, 'dock-own');
    const created = await cp.inject({ method: 'GET', url: `/v2/deployments/${id}`, headers: headersA });
    expect(created.json()).toMatchObject({ source: 'internal_docker' });
    const t = await pushToken(headersA, id);
    // The CLI's PATCH after `docker push`: the digest docker recorded, revision_source internal_docker.
    const image = `${t.repository_url}@${DIGEST}`;
    const patched = await cp.inject({
      method: 'PATCH',
      url: `/v2/deployments/${id}`,
      headers: headersA,
      payload: { revision_source: 'internal_docker', source_revision_config: { image_uri: image }, secrets: [] },
    });
    expect(patched.statusCode, patched.body).toBe(200);
    expect(patched.json().latest_revision_id).toBeTruthy();
    const revs = await cp.inject({ method: 'GET', url: `/v2/deployments/${id}/revisions?limit=1`, headers: headersA });
    expect(revs.json().resources[0]).toMatchObject({
      source: 'internal_docker',
      source_revision_config: { image_uri: image },
    });
    // Any image elsewhere, even a public one: pushed images come from the deployment's repository.
    for (const other of ['ghcr.io/x/y:1', `${REGISTRY}/ag-${await pushedDeployment(headersA, 'dock-2')}@${DIGEST}`]) {
      const refused = await cp.inject({
        method: 'PATCH',
        url: `/v2/deployments/${id}`,
        headers: headersA,
        payload: { revision_source: 'internal_docker', source_revision_config: { image_uri: other } },
      });
      expect(refused.statusCode, other).toBe(400);
      expect(refused.json().detail).toContain(`${REGISTRY}/ag-${id}`);
    }
  });

  it('is created without an image, and push tokens are for it alone', async () => {
    const withImage = await cp.inject({
      method: 'POST',
      url: '/v2/deployments',
      headers: headersA,
      payload: {
        name: 'dock-img',
        source: 'internal_docker',
        source_revision_config: { image_uri: `ghcr.io/a@${DIGEST}` },
      },
    });
    expect(withImage.statusCode).toBe(422);
    const listener = await cp.inject({
      method: 'POST',
      url: '/v2/deployments',
      headers: headersA,
      payload: { name: 'dock-listener', source: 'internal_docker', source_config: { listener_id: 'l-1' } },
    });
    expect(listener.statusCode).toBe(422);
    expect(listener.body).toContain("listener's cluster");
    const external = await imageDeployment(headersA, 'dock-ext');
    const refused = await cp.inject({
      method: 'POST',
      url: `/v2/deployments/${external}/push-token`,
      headers: headersA,
    });
    expect(refused.statusCode).toBe(400);
    // The words `langgraph deploy` looks for to tell the user to create a new deployment.
    expect(refused.json().detail).toContain("only available for 'internal_docker' source deployments");
    const mismatch = await cp.inject({
      method: 'PATCH',
      url: `/v2/deployments/${external}`,
      headers: headersA,
      payload: {
        revision_source: 'internal_docker',
        source_revision_config: { image_uri: `${REGISTRY}/ag-${external}:1` },
      },
    });
    expect(mismatch.statusCode).toBe(400);
    expect(mismatch.json().detail).toMatch(/does not match the deployment's source external_docker/);
  });
});

describe("images in the build registry are their own deployment's", () => {
  it("refuses another deployment's repository in a revision, at create and in a PATCH", async () => {
    const a = await imageDeployment(headersA, 'img-a');
    const b = await imageDeployment(headersB, 'img-b');
    const aImage = `${REGISTRY}/ag-${a}@${DIGEST}`;
    // team-b names team-a's pushed (or built) image: the cluster would pull it with the platform's credentials.
    for (const image of [
      aImage,
      `REGISTRY.EXAMPLE.COM:5000/agents/ag-${a}:latest`,
      `${REGISTRY}/ag-${b}/x@${DIGEST}`,
    ]) {
      const patch = await cp.inject({
        method: 'PATCH',
        url: `/v2/deployments/${b}`,
        headers: headersB,
        payload: { source_revision_config: { image_uri: image } },
      });
      expect(patch.statusCode, image).toBe(400);
      expect(patch.json().detail).toContain(`${REGISTRY}/ag-${b}`);
    }
    const create = await cp.inject({
      method: 'POST',
      url: '/v2/deployments',
      headers: headersB,
      payload: { name: 'img-b2', source: 'external_docker', source_revision_config: { image_uri: aImage } },
    });
    expect(create.statusCode).toBe(400);
    expect(create.json().detail).toMatch(/build registry/);
    // Its own repository, and registries the platform does not pull with its own credentials, are fine.
    for (const image of [`${REGISTRY}/ag-${b}@${DIGEST}`, `${REGISTRY}-other/ag-${a}@${DIGEST}`, `ghcr.io/x/y:1`]) {
      const ok = await cp.inject({
        method: 'PATCH',
        url: `/v2/deployments/${b}`,
        headers: headersB,
        payload: { source_revision_config: { image_uri: image } },
      });
      expect(ok.statusCode, `${image}: ${ok.body}`).toBe(200);
    }
  });
});

describe('scopes (the Docker token spec)', () => {
  it.each([
    [['repository:agents/ag-1:push,pull'], [{ type: 'repository', name: 'agents/ag-1', actions: ['pull', 'push'] }]],
    [
      ['repository:agents/ag-1:pull', 'repository:agents/ag-1:push'],
      [{ type: 'repository', name: 'agents/ag-1', actions: ['pull', 'push'] }],
    ],
    [['repository(plugin):agents/ag-1:pull'], [{ type: 'repository', name: 'agents/ag-1', actions: ['pull'] }]],
    [['repository:agents/ag-1:delete,*'], []],
    [['repository:agents/ag-2:push'], []],
    [['repository:agents/ag-1x:push'], []],
    [['registry:catalog:*'], []],
    [[], []],
  ])('%j grants %j on agents/ag-1', (scopes, access) => {
    const parsed = parseScopes(scopes);
    expect('scopes' in parsed && grantedAccess(parsed.scopes, 'agents/ag-1')).toEqual(access);
  });

  it.each(['push', 'repository:push', 'repository::push', ':a:push'])('%s is malformed', (scope) => {
    expect(parseScopes([scope])).toEqual({ malformed: scope });
  });
});

describe('control-plane flags', () => {
  const env = {} as NodeJS.ProcessEnv;
  const write = (name: string, content: string) => {
    const file = join(dir, name);
    writeFileSync(file, content);
    return file;
  };

  it('turns push tokens on with a key file and the registry prefix', () => {
    const key = write('ec.pem', String(pem));
    const config = parseControlPlaneConfig(
      ['--registry', `http://${REGISTRY}/`, '--registry-token-key-file', key],
      env,
    );
    expect(config?.registry).toBe(REGISTRY);
    expect(config?.registryTokens).toMatchObject({ issuer: 'agentplane', service: SERVICE, registry: REGISTRY });
    expect(config?.registryTokens?.signer.kid).toBe(signer.kid);
    const rsa = generateKeyPairSync('rsa', { modulusLength: 2048 }).privateKey.export({ type: 'pkcs1', format: 'pem' });
    const rsaConfig = parseControlPlaneConfig(
      [
        '--registry',
        REGISTRY,
        '--registry-token-key-file',
        write('rsa.pem', String(rsa)),
        '--registry-token-service',
        's',
      ],
      env,
    );
    expect(rsaConfig?.registryTokens).toMatchObject({ service: 's', signer: { alg: 'RS256' } });
  });

  it('says what is wrong with the key or a missing prefix', () => {
    const key = write('ec2.pem', String(pem));
    expect(() => parseControlPlaneConfig(['--registry-token-key-file', key], env)).toThrow(/needs --registry/);
    expect(() =>
      parseControlPlaneConfig(['--registry', REGISTRY, '--registry-token-key-file', join(dir, 'none.pem')], env),
    ).toThrow(/cannot read/);
    const p384 = generateKeyPairSync('ec', { namedCurve: 'P-384' }).privateKey.export({ type: 'pkcs8', format: 'pem' });
    expect(() =>
      parseControlPlaneConfig(
        ['--registry', REGISTRY, '--registry-token-key-file', write('p384.pem', String(p384))],
        env,
      ),
    ).toThrow(/EC P-256 or an RSA .* not ec secp384r1/);
    const certLike = write('cert.pem', '-----BEGIN CERTIFICATE-----\nMIIB\n-----END CERTIFICATE-----\n');
    expect(() => parseControlPlaneConfig(['--registry', REGISTRY, '--registry-token-key-file', certLike], env)).toThrow(
      /is not a PEM private key/,
    );
  });

  it('names the key as the registry does (its JWK thumbprint) in every token header', async () => {
    const id = await pushedDeployment(headersA, 'pt-kid');
    const t = await pushToken(headersA, id);
    const res = await tokenRequest(basic('x', t.token), []);
    expect(decodeProtectedHeader(res.json().token)).toEqual({ alg: 'ES256', kid: signer.kid, typ: 'JWT' });
  });
});

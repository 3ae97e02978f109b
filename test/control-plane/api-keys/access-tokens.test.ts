// POST /v2/deployments/{id}/access-tokens through the real control-plane app: who gets a token, for what, and the
// answer when the control plane cannot make one. (Agents accepting them: test/e2e/origin-isolation.test.ts.)
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createControlPlane } from '../../../src/control-plane/app.ts';
import { createApiKey } from '../../../src/control-plane/api-keys/keys.ts';
import { DEFAULT_INPUT_POLICY } from '../../../src/api/input-rules.ts';
import { openEmbeddedPlatformState } from '../../../src/state/embedded/index.ts';
import type { PlatformState } from '../../../src/state/types.ts';
import { mintDeploymentToken, verifyAccessToken } from '../../../src/lib/deployment-token.ts';
import { silentLogger } from '../../../src/lib/logger.ts';
import { githubBody } from '../helpers/harness.ts';

const TOKEN_KEY = Buffer.alloc(32, 3);
let dir: string;
let store: PlatformState;
let keyA: string;
let keyB: string;

const app = (deploymentTokenKey?: Buffer) =>
  createControlPlane({
    store,
    logger: silentLogger(),
    policy: DEFAULT_INPUT_POLICY,
    auth: deploymentTokenKey ? { deploymentTokenKey } : undefined,
  });

beforeAll(async () => {
  dir = mkdtempSync(join(tmpdir(), 'ap-cp-access-'));
  store = openEmbeddedPlatformState({ dataDir: dir });
  keyA = (await createApiKey(store, { tenants: ['team-a'] })).key;
  keyB = (await createApiKey(store, { tenants: ['team-b'] })).key;
});

afterAll(async () => {
  await store.close();
  rmSync(dir, { recursive: true, force: true });
});

describe('access tokens from the control plane', () => {
  it("gives one for a deployment of the caller's workspace, good on that deployment only", async () => {
    const cp = await app(TOKEN_KEY);
    const headers = { 'x-api-key': keyA, 'x-tenant-id': 'team-a' };
    const created = await cp.inject({ method: 'POST', url: '/v2/deployments', headers, payload: githubBody('a1') });
    expect(created.statusCode, created.body).toBe(201);
    const id = created.json().id as string;
    const res = await cp.inject({ method: 'POST', url: `/api-host/v2/deployments/${id}/access-tokens`, headers });
    expect(res.statusCode, res.body).toBe(200);
    const { token, deployment_id } = res.json() as { token: string; deployment_id: string };
    expect(deployment_id).toBe(id);
    expect(verifyAccessToken(mintDeploymentToken(TOKEN_KEY, 'team-a', id), token)).toBe(true);
    expect(verifyAccessToken(mintDeploymentToken(TOKEN_KEY, 'team-b', id), token)).toBe(false);

    // Another workspace cannot get one (the deployment is not found for it), nor can the token itself.
    const stranger = await cp.inject({
      method: 'POST',
      url: `/v2/deployments/${id}/access-tokens`,
      headers: { 'x-api-key': keyB, 'x-tenant-id': 'team-b' },
    });
    expect(stranger.statusCode).toBe(404);
    const byToken = await cp.inject({
      method: 'POST',
      url: `/v2/deployments/${id}/access-tokens`,
      headers: { 'x-api-key': token, 'x-tenant-id': 'team-a' },
    });
    expect(byToken.statusCode).toBe(401);
    const unknown = await cp.inject({ method: 'POST', url: '/v2/deployments/no-such-id/access-tokens', headers });
    expect(unknown.statusCode).toBe(404);
    await cp.close();
  });

  it('answers 503 naming the setting when it has no deployment token key', async () => {
    const cp = await app();
    const headers = { 'x-api-key': keyA, 'x-tenant-id': 'team-a' };
    const created = await cp.inject({ method: 'POST', url: '/v2/deployments', headers, payload: githubBody('a2') });
    expect(created.statusCode, created.body).toBe(201);
    const res = await cp.inject({
      method: 'POST',
      url: `/v2/deployments/${created.json().id as string}/access-tokens`,
      headers,
    });
    expect(res.statusCode).toBe(503);
    expect(res.json().detail).toContain('AGENTPLANE_DEPLOYMENT_TOKEN_KEY');
    await cp.close();
  });
});

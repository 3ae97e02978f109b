// The auth service's keys: the keyring (parsing, AES-256-GCM values bound to their record, rotation through the
// service over a real embedded store), deployment tokens (minting, tampering) and the settings that carry them to
// the control plane and the operator.
import { randomBytes } from 'node:crypto';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { createControlPlane } from '../../../src/control-plane/app.ts';
import { createApiKey } from '../../../src/control-plane/api-keys/keys.ts';
import { parseControlPlaneConfig } from '../../../src/control-plane/config.ts';
import {
  AuthKeyError,
  derivedAuthKeyring,
  openValue,
  parseAuthKeyring,
  sealValue,
} from '../../../src/lib/auth-crypto.ts';
import { openEmbeddedPlatformState } from '../../../src/state/embedded/index.ts';
import { UsageError } from '../../../src/lib/cli-args.ts';
import {
  AGENT_ENV,
  deploymentAuthEnv,
  mintDeploymentToken,
  verifyDeploymentToken,
} from '../../../src/lib/deployment-token.ts';
import { silentLogger } from '../../../src/lib/logger.ts';
import { parseOperatorConfig } from '../../../src/operator/config.ts';
import { helm } from '../../support/helm/index.ts';

const b64key = () => randomBytes(32).toString('base64');

describe('auth keyring', () => {
  it('parses id=key lists; the first key is current; bad lists are refused with the reason', () => {
    const ring = parseAuthKeyring(`new=${b64key()}, old=${b64key()}`);
    expect(ring.currentId).toBe('new');
    expect([...ring.keys.keys()]).toEqual(['new', 'old']);
    expect(() => parseAuthKeyring('')).toThrow(AuthKeyError);
    expect(() => parseAuthKeyring(`k=${randomBytes(16).toString('base64')}`)).toThrow(/32 bytes/);
    expect(() => parseAuthKeyring(b64key())).toThrow(/<id>=/);
    const k = b64key();
    expect(() => parseAuthKeyring(`a=${k},a=${k}`)).toThrow(/twice/);
  });

  it('seals with the current key; old keys still open; a value is bound to its place', () => {
    const oldRing = parseAuthKeyring(`old=${b64key()}`);
    const sealed = sealValue(oldRing, 'the-secret', 'auth/token/a/x');
    expect(sealed.startsWith('ak1:old:')).toBe(true);
    expect(sealed).not.toContain('the-secret');
    const rotated = parseAuthKeyring(`new=${b64key()},old=${Buffer.from(oldRing.keys.get('old')!).toString('base64')}`);
    expect(openValue(rotated, sealed, 'auth/token/a/x')).toEqual({ value: 'the-secret', stale: true });
    expect(openValue(oldRing, sealed, 'auth/token/a/x')).toEqual({ value: 'the-secret', stale: false });
    expect(() => openValue(oldRing, sealed, 'auth/token/b/x')).toThrow(AuthKeyError);
    expect(() => openValue(parseAuthKeyring(`new=${b64key()}`), sealed, 'auth/token/a/x')).toThrow(
      /not in the keyring/,
    );
    expect(() => openValue(parseAuthKeyring(`old=${b64key()}`), sealed, 'auth/token/a/x')).toThrow(/does not open/);
    const a = derivedAuthKeyring(Buffer.alloc(32, 1));
    expect(a.keys.get('store')).toEqual(derivedAuthKeyring(Buffer.alloc(32, 1)).keys.get('store'));
    expect(a.keys.get('store')).not.toEqual(Buffer.alloc(32, 1));
  });

  it('rotation: after adding a new first key, reads re-seal old values; then the old key can go', async () => {
    const dir = mkdtempSync(join(tmpdir(), 'ap-cp-authrot-'));
    const store = openEmbeddedPlatformState({ dataDir: dir });
    try {
      const k1 = `k1=${b64key()}`;
      const k2 = `k2=${b64key()}`;
      const app = (keys: string) =>
        createControlPlane({
          store,
          logger: silentLogger(),
          consoleDir: false,
          auth: { keyring: parseAuthKeyring(keys), publicUrl: 'https://cp.example.com' },
        });
      const key = (await createApiKey(store, { tenants: ['team-a'] })).key;
      const headers = { 'x-api-key': key, 'x-tenant-id': 'team-a' };
      const first = await app(k1);
      const created = await first.inject({
        method: 'POST',
        url: '/v2/auth/providers',
        headers,
        payload: {
          provider_id: 'gh',
          auth_url: 'https://idp.example.com/authorize',
          token_url: 'https://idp.example.com/token',
          client_id: 'c',
          client_secret: 'rotating-secret',
        },
      });
      expect(created.statusCode, created.body).toBe(201);
      const sealedWith = async () => (await store.listAuthObjects('provider', 'team-a'))[0]!.sealed.split(':')[1];
      expect(await sealedWith()).toBe('k1');

      // Only the new key: the old value cannot be opened, the answer says why (503), nothing leaks.
      const onlyNew = await app(k2);
      const refused = await onlyNew.inject({ method: 'GET', url: '/v2/auth/providers/gh', headers });
      expect(refused.statusCode).toBe(503);
      expect(refused.body).toContain('k1');

      const both = await app(`${k2},${k1}`);
      const read = await both.inject({ method: 'GET', url: '/v2/auth/providers/gh', headers });
      expect(read.json()).toMatchObject({ provider_id: 'gh', has_client_secret: true });
      expect(await sealedWith()).toBe('k2');
      expect((await onlyNew.inject({ method: 'GET', url: '/v2/auth/providers/gh', headers })).statusCode).toBe(200);
      await Promise.all([first.close(), onlyNew.close(), both.close()]);

      // Without any key the auth service says which setting is missing.
      const none = await createControlPlane({ store, logger: silentLogger(), consoleDir: false });
      const res = await none.inject({ method: 'GET', url: '/v2/auth/providers', headers });
      expect(res.statusCode).toBe(503);
      expect(res.body).toContain('AGENTPLANE_AUTH_ENCRYPTION_KEYS');
      await none.close();
    } finally {
      await store.close();
      rmSync(dir, { recursive: true, force: true });
    }
  });
});

describe('deployment tokens', () => {
  const key = randomBytes(32);
  const id = '0b5a3c2e-8f7d-4d1e-9a6b-3c2d1e0f9a8b';

  it('verify what was minted, for tenants with dots too; refuse tampering and other keys', () => {
    const token = mintDeploymentToken(key, 'team.a', id);
    expect(verifyDeploymentToken(key, token)).toEqual({ tenant: 'team.a', deploymentId: id });
    expect(verifyDeploymentToken(randomBytes(32), token)).toBeUndefined();
    expect(verifyDeploymentToken(key, token.slice(0, -2))).toBeUndefined();
    expect(verifyDeploymentToken(key, token.replace(id, id.replace('0b', '0c')))).toBeUndefined();
    expect(verifyDeploymentToken(key, `${token}.x`)).toBeUndefined();
    expect(verifyDeploymentToken(key, 'apk_something')).toBeUndefined();
  });

  it('agents get URL, token and tenant only when both settings are there', () => {
    expect(deploymentAuthEnv(undefined, 't', id)).toEqual({});
    expect(deploymentAuthEnv({ controlPlaneUrl: 'http://cp' }, 't', id)).toEqual({});
    const env = deploymentAuthEnv({ controlPlaneUrl: 'http://cp', tokenKey: key }, 't', id);
    expect(env).toEqual({
      [AGENT_ENV.url]: 'http://cp',
      [AGENT_ENV.token]: mintDeploymentToken(key, 't', id),
      [AGENT_ENV.tenant]: 't',
    });
  });
});

describe('settings', () => {
  it('control plane: keys, deployment token key, public URL, private providers; bad values name the flag', () => {
    const k = b64key();
    const c = parseControlPlaneConfig([], {
      AGENTPLANE_AUTH_ENCRYPTION_KEYS: `a=${k}`,
      AGENTPLANE_DEPLOYMENT_TOKEN_KEY: k,
      AGENTPLANE_PUBLIC_URL: 'https://cp.example.com/api-host/',
    })!;
    expect(c.auth.keyring?.currentId).toBe('a');
    expect(c.auth.deploymentTokenKey?.length).toBe(32);
    expect(c.auth.publicUrl).toBe('https://cp.example.com/api-host');
    expect(c.auth.allowPrivateProviders).toBe(false);
    expect(() => parseControlPlaneConfig([], { AGENTPLANE_AUTH_ENCRYPTION_KEYS: 'a=short' })).toThrow(
      /--auth-encryption-keys.*32 bytes/,
    );
    expect(() => parseControlPlaneConfig([], { AGENTPLANE_PUBLIC_URL: 'ftp://x' })).toThrow(/--public-url/);
    // Keys turn the auth service on, and it refuses to start without the public URL its redirects are built from.
    expect(() => parseControlPlaneConfig([], { AGENTPLANE_AUTH_ENCRYPTION_KEYS: `a=${k}` })).toThrow(
      /--public-url is required/,
    );
    expect(() => parseControlPlaneConfig(['--auth-allow-private-providers', 'maybe'], {})).toThrow(
      /--auth-allow-private-providers/,
    );
  });

  it('operator: --control-plane-url and --deployment-token-key go together into the runtime settings', () => {
    const base = { AGENTPLANE_BASE_IMAGE: 'registry.example.com/agentplane:1' };
    const k = b64key();
    const c = parseOperatorConfig([], {
      ...base,
      AGENTPLANE_CONTROL_PLANE_URL: 'https://cp.example.com',
      AGENTPLANE_DEPLOYMENT_TOKEN_KEY: k,
    })!;
    expect(c.runtime.agentAuth?.controlPlaneUrl).toBe('https://cp.example.com');
    expect(c.runtime.agentAuth?.tokenKey).toEqual(Buffer.from(k, 'base64'));
    expect(parseOperatorConfig([], base)!.runtime.agentAuth).toBeUndefined();
    expect(() => parseOperatorConfig([], { ...base, AGENTPLANE_CONTROL_PLANE_URL: 'https://cp' })).toThrow(UsageError);
    expect(() =>
      parseOperatorConfig([], {
        ...base,
        AGENTPLANE_CONTROL_PLANE_URL: 'https://cp',
        AGENTPLANE_DEPLOYMENT_TOKEN_KEY: 'eA==',
      }),
    ).toThrow(/--deployment-token-key/);
  });

  it('chart: controlPlane.authService wires the Secret into the control plane and the operator', () => {
    const chart = join(import.meta.dirname, '../../../charts/agentplane');
    const render = (...set: string[]) => {
      const r = helm(['template', 'ap', chart, '--namespace', 'platform', ...set.flatMap((v) => ['--set', v])]);
      expect(r.ok, JSON.stringify(r).slice(0, 500)).toBe(true);
      return (r as { stdout: string }).stdout;
    };
    expect(render()).not.toContain('AGENTPLANE_DEPLOYMENT_TOKEN_KEY');
    // Keys without the public URL: the chart refuses, as the control plane would.
    const bare = helm(['template', 'ap', chart, '--set', 'controlPlane.authService.existingSecret=ap-auth']);
    expect(bare.ok).toBe(false);
    expect(JSON.stringify(bare)).toContain('controlPlane.authService.publicUrl');
    const pub = render(
      'controlPlane.authService.existingSecret=ap-auth',
      'controlPlane.authService.publicUrl=https://cp.example.com',
    );
    expect(pub.match(/name: AGENTPLANE_DEPLOYMENT_TOKEN_KEY/g)).toHaveLength(2);
    expect(pub).toContain('name: AGENTPLANE_AUTH_ENCRYPTION_KEYS');
    expect(pub).toContain('value: "https://cp.example.com"');
    expect(pub).toContain('name: AGENTPLANE_PUBLIC_URL');
  });
});

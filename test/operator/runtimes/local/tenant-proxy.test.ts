// What the local proxy lets through from tenant code to a browser, and the short-lived access tokens agents accept:
// table tests of the pure rules (the end-to-end attacks are in test/e2e/origin-isolation.test.ts).
import { createServer, type Server } from 'node:net';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { cookieReachesPlatform, tenantResponseHeaders } from '../../../../src/operator/runtimes/local/proxy.ts';
import { TENANT_CSP } from '../../../../src/lib/http.ts';
import { AgentOrigins } from '../../../../src/operator/runtimes/local/agent-origins.ts';
import { mintAccessToken, mintDeploymentToken, verifyAccessToken } from '../../../../src/lib/deployment-token.ts';
import { createLogger } from '../../../../src/lib/logger.ts';

describe('cookies from tenant code', () => {
  it.each([
    ['a=1; Path=/', '/app/x', true],
    ['a=1', '/login', true], // default path of /login is /
    ['a=1; Path=/v2', '/app', true],
    ['a=1; Path=/v2/deployments', '/app', true],
    ['a=1; Path=/api-host', '/app', true],
    ['a=1; Path=/v', '/app', false], // "/v" does not path-match "/v2"
    ['a=1; Path=/app', '/', false],
    ['a=1', '/app/login', false], // default path /app
    ['a=1; Domain=127.0.0.1; Path=/app', '/app', true], // Domain widens who gets it
    ['a=1; path=/V2', '/app', false], // paths are case-sensitive
  ])('%s set on %s reaches the platform: %s', (cookie, path, expected) => {
    expect(cookieReachesPlatform(cookie, path)).toBe(expected);
  });

  it('keeps the tenant CSP and adds the sandbox, drops Service-Worker-Allowed and platform cookies', () => {
    const out = tenantResponseHeaders(
      {
        'content-type': 'text/html',
        'Content-Security-Policy': "default-src 'self'",
        'service-worker-allowed': '/',
        'set-cookie': ['keep=1; Path=/app', 'drop=1; Path=/v2'],
      },
      '/app/page',
    );
    expect(out['content-security-policy']).toEqual(["default-src 'self'", TENANT_CSP]);
    expect(out['Content-Security-Policy']).toBeUndefined();
    expect(out['service-worker-allowed']).toBeUndefined();
    expect(out['set-cookie']).toEqual(['keep=1; Path=/app']);
    expect(out['content-type']).toBe('text/html');
    expect(TENANT_CSP).toMatch(/^sandbox /);
    expect(TENANT_CSP).not.toContain('allow-same-origin');
    expect(tenantResponseHeaders({ 'set-cookie': 'x=1; Path=/' }, '/')['set-cookie']).toBeUndefined();
  });
});

describe('access tokens', () => {
  const key = Buffer.alloc(32, 7);
  const now = Date.parse('2026-01-01T00:00:00Z');
  const own = mintDeploymentToken(key, 'team-a', 'dep-1');

  it('open their own deployment only, until they expire', () => {
    const { token, expiresAt } = mintAccessToken(key, 'team-a', 'dep-1', now);
    expect(expiresAt.getTime() - now).toBe(15 * 60_000);
    expect(verifyAccessToken(own, token, now)).toBe(true);
    expect(verifyAccessToken(own, token, expiresAt.getTime())).toBe(false);
    expect(verifyAccessToken(mintDeploymentToken(key, 'team-a', 'dep-2'), token, now)).toBe(false);
    expect(verifyAccessToken(mintDeploymentToken(key, 'team-b', 'dep-1'), token, now)).toBe(false);
    expect(verifyAccessToken(mintDeploymentToken(Buffer.alloc(32, 8), 'team-a', 'dep-1'), token, now)).toBe(false);
  });

  it('refuse forged, stretched or foreign tokens', () => {
    const { token } = mintAccessToken(key, 'team-a', 'dep-1', now);
    const [head, exp, sig] = token.split('.') as [string, string, string];
    for (const forged of [
      `${head}.${Number(exp) + 3600}.${sig}`,
      `${head}.${exp}.${sig.slice(0, -2)}`,
      `${head}.${exp}`,
      token.replace('apa_dep-1', 'apa_dep-2'),
      own, // the deployment token itself is not an access token
      `${token}.x`,
      '',
    ])
      expect(verifyAccessToken(own, forged, now)).toBe(false);
  });
});

describe('agent origins', () => {
  const dir = mkdtempSync(join(tmpdir(), 'ap-origins-'));
  const held: Server[] = [];
  afterAll(async () => {
    await Promise.all(held.map((s) => new Promise((r) => s.close(r))));
    rmSync(dir, { recursive: true, force: true });
  });
  const origins = (stateFile: string) =>
    new AgentOrigins({
      host: '127.0.0.1',
      ports: 'auto',
      stateFile,
      handler: (_req, res) => res.end('ok'),
      logger: createLogger({ level: 'silent', name: 'test' }),
    });

  it('gives each deployment a port of its own, keeps it across restarts, waits for it when it is taken', async () => {
    const file = join(dir, 'ports.json');
    const first = origins(file);
    const a = await first.open('a');
    const b = await first.open('b');
    expect(a).toMatch(/^http:\/\/127\.0\.0\.1:\d+$/);
    expect(new URL(a).port).not.toBe(new URL(b).port);
    expect(await first.open('a')).toBe(a);
    expect(await (await fetch(a)).text()).toBe('ok');
    await first.close();

    const second = origins(file);
    await second.restore(['a', 'b']);
    expect(await second.open('a')).toBe(a);
    await second.forget('b');
    await second.close();

    // b is forgotten; a's port is taken by someone else meanwhile: a keeps its URL and waits for the port (a moved
    // URL would free the old one for the next deployment; test/operator/runtimes/local/local-agent-ports.test.ts plays that out).
    const squatter = createServer();
    held.push(squatter);
    await new Promise<void>((r) => squatter.listen(Number(new URL(a).port), '127.0.0.1', () => r()));
    const third = origins(file);
    await third.restore(['a']);
    await expect(third.open('a')).rejects.toMatchObject({ code: 'EADDRINUSE' });
    await new Promise((r) => squatter.close(r));
    expect(await third.open('a')).toBe(a);
    await third.close();
  });
});

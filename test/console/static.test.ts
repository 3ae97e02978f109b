// The control plane serves the console bundle at / and /api-host/ without shadowing the API or its JSON 404s.
// A bundle folder made by the test stands in for dist/console, so this suite does not need a build.
import { mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join, resolve } from 'node:path';
import type { FastifyInstance } from 'fastify';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createControlPlane } from '../../src/control-plane/app.ts';
import { openEmbeddedPlatformState } from '../../src/state/embedded/index.ts';
import type { PlatformState } from '../../src/state/types.ts';
import { silentLogger } from '../../src/lib/logger.ts';

const KEY = 'console-static-key-0123456789';
let dir: string;
let store: PlatformState;
let app: FastifyInstance;
let bare: FastifyInstance;

beforeAll(async () => {
  dir = mkdtempSync(join(tmpdir(), 'ap-console-static-'));
  const bundle = join(dir, 'bundle');
  mkdirSync(join(bundle, 'assets'), { recursive: true });
  writeFileSync(
    join(bundle, 'index.html'),
    '<!doctype html><title>console</title><script type="module" src="./assets/app-1.js"></script>',
  );
  writeFileSync(join(bundle, 'assets/app-1.js'), 'console.log("hi")');
  writeFileSync(join(bundle, 'assets/app-1.css'), 'body{}');
  writeFileSync(join(dir, 'secret.txt'), 'outside the bundle');
  store = openEmbeddedPlatformState({ dataDir: join(dir, 'store') });
  app = await createControlPlane({
    store,
    logger: silentLogger(),
    bootstrapKeys: [{ key: KEY, tenants: ['*'] }],
    consoleDir: bundle,
  });
  bare = await createControlPlane({ store, logger: silentLogger(), consoleDir: join(dir, 'not-built') });
});

afterAll(async () => {
  await app.close();
  await bare.close();
  await store.close();
  rmSync(dir, { recursive: true, force: true });
});

describe('console static files', () => {
  it("sends the link langgraph deploy prints to the deployment's page, and nowhere else", async () => {
    const id = 'ae73a92c-0e11-41da-a9a6-b04b36302658';
    for (const prefix of ['', '/api-host']) {
      const res = await app.inject({ method: 'GET', url: `${prefix}/o/team-a/host/deployments/${id}` });
      expect(res.statusCode).toBe(302);
      expect(res.headers.location).toBe(`${prefix}/#/deployments/${id}`);
    }
    const hostile = await app.inject({ method: 'GET', url: '/o/t/host/deployments/%2F%2Fevil.example.com' });
    expect(hostile.headers.location).toBe('/#/deployments/%2F%2Fevil.example.com');
  });

  it('serves the page at / and /api-host/ with a strict content security policy', async () => {
    for (const path of ['/', '/api-host/']) {
      const res = await app.inject({ method: 'GET', url: path });
      expect(res.statusCode).toBe(200);
      expect(res.headers['content-type']).toContain('text/html');
      expect(res.body).toContain('<title>console</title>');
      expect(res.headers['content-security-policy']).toContain("script-src 'self'");
      expect(res.headers['x-frame-options']).toBe('DENY');
    }
    const redirect = await app.inject({ method: 'GET', url: '/api-host' });
    expect(redirect.statusCode).toBe(302);
    expect(redirect.headers.location).toBe('/api-host/');
  });

  it('serves hashed assets under both prefixes, with their types and a long cache', async () => {
    for (const prefix of ['', '/api-host']) {
      const js = await app.inject({ method: 'GET', url: `${prefix}/assets/app-1.js` });
      expect(js.statusCode).toBe(200);
      expect(js.headers['content-type']).toContain('text/javascript');
      expect(js.headers['cache-control']).toContain('immutable');
      expect(js.body).toBe('console.log("hi")');
      const css = await app.inject({ method: 'GET', url: `${prefix}/assets/app-1.css` });
      expect(css.headers['content-type']).toContain('text/css');
    }
  });

  it('answers only files of the bundle: traversal and unknown names are JSON 404s', async () => {
    for (const url of [
      '/assets/../secret.txt',
      '/assets/..%2Fsecret.txt',
      '/assets/%2e%2e/%2e%2e/secret.txt',
      '/assets/nope.js',
      '/assets/',
    ]) {
      const res = await app.inject({ method: 'GET', url });
      expect(res.statusCode, url).toBe(404);
      expect(res.body, url).not.toContain('outside the bundle');
      expect(res.json().detail, url).toMatch(/^Not found/);
    }
  });

  it('leaves the API and its 404s alone', async () => {
    const unknown = await app.inject({ method: 'GET', url: '/v2/not-a-route' });
    expect(unknown.statusCode).toBe(404);
    expect(unknown.json()).toEqual({ detail: 'Not found: GET /v2/not-a-route' });
    const deep = await app.inject({ method: 'GET', url: '/deployments/some-id' });
    expect(deep.statusCode).toBe(404);
    expect(deep.headers['content-type']).toContain('application/json');
    const list = await app.inject({
      method: 'GET',
      url: '/v2/deployments',
      headers: { 'x-api-key': KEY, 'x-tenant-id': 't1' },
    });
    expect(list.statusCode).toBe(200);
    expect(list.json()).toMatchObject({ resources: [] });
    const noKey = await app.inject({ method: 'GET', url: '/api-host/v2/deployments' });
    expect(noKey.statusCode).toBe(401);
    const spec = await app.inject({ method: 'GET', url: '/openapi.json' });
    expect(JSON.stringify(spec.json().paths)).not.toContain('/assets');
  });

  it('says how to build the console when the bundle is missing', async () => {
    const res = await bare.inject({ method: 'GET', url: '/' });
    expect(res.statusCode).toBe(404);
    expect(res.json().detail).toContain('npm run build:console');
  });
});

describe('console in the image', () => {
  it('the Dockerfile builds the bundle in a stage and copies only dist/console into the final image', () => {
    const root = resolve(import.meta.dirname, '../..');
    const dockerfile = readFileSync(join(root, 'Dockerfile'), 'utf8');
    const stage = /FROM \S+ AS console\n([\s\S]*?)\nFROM /.exec(dockerfile)?.[1] ?? '';
    expect(stage).toContain('RUN node console/build.mjs');
    const final = dockerfile.slice(dockerfile.lastIndexOf('\nFROM '));
    expect(final).toContain('COPY --from=console /app/dist/console ./dist/console');
    expect(readFileSync(join(root, '.dockerignore'), 'utf8').split('\n')).not.toContain('console');
  });
});

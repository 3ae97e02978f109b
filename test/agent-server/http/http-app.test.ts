// Custom routes from langgraph.json ("http": {"app": "./app.ts:app"}), a real Hono app in front of the built-in
// API of a real server process: its routes answer (before built-in ones of the same path), its middleware rewrites
// run requests on their way into the built-in routes and stamps their responses, unknown paths keep our 404.
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { Client } from '@langchain/langgraph-sdk';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startServerProcess, type ServerProc } from '../helpers/process.ts';

const APP_CONFIG = new URL('../fixtures/auth-http-app/langgraph.json', import.meta.url).pathname;
const ROUTE_AUTH_CONFIG = new URL('../fixtures/auth-http-routeauth/langgraph.json', import.meta.url).pathname;
const AUTH_FIRST_CONFIG = new URL('../fixtures/auth-http-first/langgraph.json', import.meta.url).pathname;
const PREFIX_CONFIG = new URL('../fixtures/auth-http-prefix/langgraph.json', import.meta.url).pathname;

describe('a Hono app with custom auth', () => {
  let dir: string;
  let server: ServerProc;
  let alice: Client;

  beforeAll(async () => {
    dir = mkdtempSync(join(tmpdir(), 'ap-as-http-app-'));
    server = await startServerProcess(['--config', APP_CONFIG, '--data-dir', dir]);
    alice = new Client({
      apiUrl: server.url,
      apiKey: null,
      defaultHeaders: { Authorization: 'Bearer token-alice' },
      callerOptions: { maxRetries: 0 },
    });
  });
  afterAll(async () => {
    await server?.stop();
    rmSync(dir, { recursive: true, force: true });
  });

  it('answers its own routes (without authentication, as on the platform) and shadows a built-in one', async () => {
    const hello = await fetch(`${server.url}/custom/hello`);
    expect(hello.status).toBe(200);
    expect(await hello.json()).toEqual({ hello: 'world', user: null });
    expect(hello.headers.get('x-custom-middleware')).toBe('seen');
    const info = await fetch(`${server.url}/info`);
    expect(await info.json()).toEqual({ from: 'custom app' });
    const echo = await fetch(`${server.url}/custom/echo`, {
      method: 'POST',
      headers: { 'content-type': 'application/json' },
      body: JSON.stringify({ a: [1, 2] }),
    });
    expect(echo.status).toBe(201);
    expect(await echo.json()).toEqual({ echoed: { a: [1, 2] } });
  });

  it("sandboxes its pages: a CSP sandbox beside the app's own policy, no Service-Worker-Allowed", async () => {
    const page = await fetch(`${server.url}/custom/page`);
    expect(page.status).toBe(200);
    const csp = page.headers.get('content-security-policy') ?? '';
    expect(csp).toContain("img-src 'self'");
    expect(csp).toMatch(/(^|, )sandbox allow-scripts/);
    expect(csp).not.toContain('allow-same-origin');
    expect(page.headers.get('service-worker-allowed')).toBeNull();
  });

  it('leaves unknown paths to the built-in 404 and built-in routes to custom auth', async () => {
    const res = await fetch(`${server.url}/nothing/here`, { headers: { Authorization: 'Bearer token-alice' } });
    expect(res.status).toBe(404);
    expect(await res.json()).toEqual({ detail: 'Not found: GET /nothing/here' });
    const anonymous = await fetch(`${server.url}/threads/search`, {
      method: 'POST',
      headers: { 'content-type': 'application/json' },
      body: '{}',
    });
    expect(anonymous.status).toBe(401);
  });

  it('its middleware rewrites a run request before the built-in route reads it and adds a response header', async () => {
    const t = await alice.threads.create();
    const res = await fetch(`${server.url}/threads/${t.thread_id}/runs/wait`, {
      method: 'POST',
      headers: { 'content-type': 'application/json', Authorization: 'Bearer token-alice' },
      body: JSON.stringify({ assistant_id: 'counter', input: { count: 1 }, metadata: { mine: true } }),
    });
    expect(res.status).toBe(200);
    expect(res.headers.get('x-custom-middleware')).toBe('seen');
    // 1 became 100 on the way in; the graph adds 1 and 10.
    expect(await res.json()).toEqual({ count: 111, steps: ['first', 'second'] });
    const [run] = await alice.runs.list(t.thread_id);
    expect(run!.metadata).toEqual({ mine: true, rewritten_by: 'middleware' });
    // The SDK goes through the same path, streams included.
    const streamed: unknown[] = [];
    for await (const part of alice.runs.stream(t.thread_id, 'counter', { input: { count: 2 }, streamMode: 'values' })) {
      if (part.event === 'values') streamed.push(part.data);
    }
    expect(streamed.at(-1)).toMatchObject({ count: 111 + 200 + 11 });
  });

  it('middleware_first: its middleware sees an anonymous request to a built-in route first and may answer it', async () => {
    const probe = `/threads/${crypto.randomUUID()}`;
    const early = await fetch(`${server.url}${probe}`, { headers: { 'x-answer-early': '1' } });
    expect(early.status).toBe(418);
    expect(await early.json()).toEqual({ answered: 'by middleware' });
    // Authentication had not run yet: the middleware saw no caller, for alice's request neither.
    await fetch(`${server.url}${probe}`, { headers: { Authorization: 'Bearer token-alice' } });
    const seen = (await (await fetch(`${server.url}/custom/seen`)).json()) as Array<{ path: string }>;
    expect(seen.filter((s) => s.path === probe)).toEqual([
      { method: 'GET', path: probe, user: null },
      { method: 'GET', path: probe, user: null },
    ]);
  });

  it('logs ignored nested keys of "http"', () => {
    expect(server.output()).toMatch(/langgraph.json keys ignored by this server: http.logging_headers/);
  });
});

describe('http.middleware_order "auth_first"', () => {
  let dir: string;
  let server: ServerProc;

  beforeAll(async () => {
    dir = mkdtempSync(join(tmpdir(), 'ap-as-auth-first-'));
    server = await startServerProcess(['--config', AUTH_FIRST_CONFIG, '--data-dir', dir]);
  });
  afterAll(async () => {
    await server?.stop();
    rmSync(dir, { recursive: true, force: true });
  });

  const seenAt = async (path: string) =>
    ((await (await fetch(`${server.url}/custom/seen`)).json()) as Array<{ path: string }>).filter(
      (s) => s.path === path,
    );

  it('refuses an anonymous caller of a built-in route before the middleware runs: no answer, no trace', async () => {
    const probe = `/threads/${crypto.randomUUID()}`;
    const early = await fetch(`${server.url}${probe}`, { headers: { 'x-answer-early': '1' } });
    expect(early.status).toBe(401);
    expect(early.headers.get('www-authenticate')).toBe('Bearer');
    const forged = await fetch(`${server.url}/threads/search`, {
      method: 'POST',
      headers: { 'content-type': 'application/json', Authorization: 'Bearer token-mallory' },
      body: '{}',
    });
    expect(forged.status).toBe(401);
    expect(await seenAt(probe)).toEqual([]);
    expect(await seenAt('/threads/search')).toEqual([]);
  });

  it('hands the middleware the authenticated caller, and built-in routes keep working through it', async () => {
    const alice = new Client({
      apiUrl: server.url,
      apiKey: null,
      defaultHeaders: { Authorization: 'Bearer token-alice' },
      callerOptions: { maxRetries: 0 },
    });
    const t = await alice.threads.create();
    expect(await alice.runs.wait(t.thread_id, 'counter', { input: { count: 1 } })).toEqual({
      count: 111,
      steps: ['first', 'second'],
    });
    expect(await seenAt(`/threads/${t.thread_id}/runs/wait`)).toEqual([
      { method: 'POST', path: `/threads/${t.thread_id}/runs/wait`, user: 'alice' },
    ]);
  });

  it('keeps custom routes open without http.enable_custom_route_auth, and tells them the caller when there is one', async () => {
    const anonymous = await fetch(`${server.url}/custom/hello`);
    expect(anonymous.status).toBe(200);
    expect(await anonymous.json()).toEqual({ hello: 'world', user: null });
    await fetch(`${server.url}/custom/hello`, { headers: { Authorization: 'Bearer token-bob' } });
    expect(await seenAt('/custom/hello')).toEqual([
      { method: 'GET', path: '/custom/hello', user: null },
      { method: 'GET', path: '/custom/hello', user: 'bob' },
    ]);
    // A path that is neither a custom route nor a built-in one is still refused to an anonymous caller.
    expect((await fetch(`${server.url}/nothing/here`)).status).toBe(401);
  });
});

describe('http.mount_prefix and disable_* flags', () => {
  let dir: string;
  let server: ServerProc;

  beforeAll(async () => {
    dir = mkdtempSync(join(tmpdir(), 'ap-as-http-prefix-'));
    server = await startServerProcess(['--config', PREFIX_CONFIG, '--data-dir', dir]);
  });
  afterAll(async () => {
    await server?.stop();
    rmSync(dir, { recursive: true, force: true });
  });

  it('serves the API and the custom routes under the prefix; /ok stays at the root', async () => {
    const client = new Client({ apiUrl: `${server.url}/api`, apiKey: null, callerOptions: { maxRetries: 0 } });
    const t = await client.threads.create();
    expect(await client.runs.wait(t.thread_id, 'counter', { input: { count: 1 } })).toMatchObject({ count: 111 });
    expect((await fetch(`${server.url}/api/custom/hello`)).status).toBe(200);
    expect((await fetch(`${server.url}/ok`)).status).toBe(200);
    const outside = await fetch(`${server.url}/threads/${t.thread_id}`);
    expect(outside.status).toBe(404);
    expect(await outside.json()).toEqual({ detail: `Not found: GET /threads/${t.thread_id}` });
  });

  it('answers 404 for a disabled group of routes and keeps the others', async () => {
    const res = await fetch(`${server.url}/api/assistants/search`, {
      method: 'POST',
      headers: { 'content-type': 'application/json' },
      body: '{}',
    });
    expect(res.status).toBe(404);
    const threads = await fetch(`${server.url}/api/threads/search`, {
      method: 'POST',
      headers: { 'content-type': 'application/json' },
      body: '{}',
    });
    expect(threads.status).toBe(200);
  });
});

describe('http.enable_custom_route_auth', () => {
  it('puts the custom routes behind custom auth too', async () => {
    const dir = mkdtempSync(join(tmpdir(), 'ap-as-route-auth-'));
    const server = await startServerProcess(['--config', ROUTE_AUTH_CONFIG, '--data-dir', dir]);
    try {
      const anonymous = await fetch(`${server.url}/custom/hello`);
      expect(anonymous.status).toBe(401);
      const alice = await fetch(`${server.url}/custom/hello`, { headers: { Authorization: 'Bearer token-alice' } });
      expect(alice.status).toBe(200);
      expect(await alice.json()).toEqual({ hello: 'world', user: 'Bearer token-alice' });
      // /info stays an open path, whoever answers it.
      expect((await fetch(`${server.url}/info`)).status).toBe(200);
    } finally {
      await server.stop();
      rmSync(dir, { recursive: true, force: true });
    }
  });
});

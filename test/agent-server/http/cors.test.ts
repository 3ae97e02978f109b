// CORS as a browser sees it, against a real server process: by default any origin may call and read the headers
// the SDK needs; with "http.cors" only the listed origins, methods and headers. Preflights never need auth.
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startServerProcess, type ServerProc } from '../helpers/process.ts';

const AUTH_CONFIG = new URL('../fixtures/auth-owner/langgraph.json', import.meta.url).pathname;
const CORS_CONFIG = new URL('../fixtures/auth-http-prefix/langgraph.json', import.meta.url).pathname;

const preflight = (url: string, origin: string, method = 'POST', headers = 'authorization,content-type') =>
  fetch(url, {
    method: 'OPTIONS',
    headers: { Origin: origin, 'Access-Control-Request-Method': method, 'Access-Control-Request-Headers': headers },
  });

/** The preflight Chrome sends before a public page (LangGraph Studio) calls a server on a private address. */
const privateNetworkPreflight = (url: string, origin: string) =>
  fetch(url, {
    method: 'OPTIONS',
    headers: {
      Origin: origin,
      'Access-Control-Request-Method': 'GET',
      'Access-Control-Request-Headers': 'content-type',
      'Access-Control-Request-Private-Network': 'true',
    },
  });

describe('default CORS (custom auth on)', () => {
  let dir: string;
  let server: ServerProc;
  beforeAll(async () => {
    dir = mkdtempSync(join(tmpdir(), 'ap-as-cors-default-'));
    server = await startServerProcess(['--config', AUTH_CONFIG, '--data-dir', dir]);
  });
  afterAll(async () => {
    await server?.stop();
    rmSync(dir, { recursive: true, force: true });
  });

  it('answers a preflight from any origin without a token, allowing the headers asked for', async () => {
    const res = await preflight(`${server.url}/threads/search`, 'https://elsewhere.example.org');
    expect(res.status).toBe(204);
    expect(res.headers.get('access-control-allow-origin')).toBe('*');
    expect(res.headers.get('access-control-allow-methods')).toMatch(/POST/);
    expect(res.headers.get('access-control-allow-methods')).toMatch(/PATCH/);
    expect(res.headers.get('access-control-allow-headers')).toBe('authorization,content-type');
    // Not asked for Private Network Access: not given.
    expect(res.headers.get('access-control-allow-private-network')).toBeNull();
  });

  it('lets LangGraph Studio (a public origin) reach this private server: Private Network Access on preflight', async () => {
    const res = await privateNetworkPreflight(`${server.url}/info`, 'https://smith.langchain.com');
    expect(res.status).toBe(204);
    expect(res.headers.get('access-control-allow-origin')).toBe('*');
    expect(res.headers.get('access-control-allow-private-network')).toBe('true');
  });

  it('lets the browser read the headers the SDK uses, on errors too', async () => {
    const created = await fetch(`${server.url}/threads`, {
      method: 'POST',
      headers: {
        Origin: 'https://elsewhere.example.org',
        Authorization: 'Bearer token-alice',
        'content-type': 'application/json',
      },
      body: '{}',
    });
    expect(created.status).toBe(200);
    expect(created.headers.get('access-control-allow-origin')).toBe('*');
    const exposed = created.headers.get('access-control-expose-headers')!.split(', ');
    expect(exposed).toEqual(
      expect.arrayContaining(['content-location', 'location', 'x-pagination-next', 'x-pagination-total']),
    );
    const refused = await fetch(`${server.url}/threads/search`, {
      method: 'POST',
      headers: { Origin: 'https://x.example' },
    });
    expect(refused.status).toBe(401);
    expect(refused.headers.get('access-control-allow-origin')).toBe('*');
  });
});

describe('http.cors from langgraph.json', () => {
  let dir: string;
  let server: ServerProc;
  beforeAll(async () => {
    dir = mkdtempSync(join(tmpdir(), 'ap-as-cors-config-'));
    server = await startServerProcess(['--config', CORS_CONFIG, '--data-dir', dir]);
  });
  afterAll(async () => {
    await server?.stop();
    rmSync(dir, { recursive: true, force: true });
  });

  it('allows the listed origin with its methods, headers, credentials and max age', async () => {
    const res = await preflight(
      `${server.url}/api/threads/search`,
      'https://app.example.com',
      'POST',
      'authorization,x-other',
    );
    expect(res.status).toBe(204);
    expect(res.headers.get('access-control-allow-origin')).toBe('https://app.example.com');
    expect(res.headers.get('access-control-allow-credentials')).toBe('true');
    expect(res.headers.get('access-control-allow-methods')).toBe('GET, POST');
    expect(res.headers.get('access-control-allow-headers')).toBe('authorization, content-type');
    expect(res.headers.get('access-control-max-age')).toBe('120');
    expect(res.headers.get('vary')).toMatch(/Origin/);
    const get = await fetch(`${server.url}/api/custom/hello`, { headers: { Origin: 'https://app.example.com' } });
    expect(get.headers.get('access-control-allow-origin')).toBe('https://app.example.com');
    expect(get.headers.get('access-control-expose-headers')).toMatch(/x-custom-middleware.*content-location/);
  });

  it('gives other origins no CORS headers (and refuses their preflight)', async () => {
    const res = await preflight(`${server.url}/api/threads/search`, 'https://evil.example.net');
    expect(res.status).toBe(400);
    expect(res.headers.get('access-control-allow-origin')).toBeNull();
    const get = await fetch(`${server.url}/api/custom/hello`, { headers: { Origin: 'https://evil.example.net' } });
    expect(get.status).toBe(200);
    expect(get.headers.get('access-control-allow-origin')).toBeNull();
  });

  it('grants Private Network Access to the listed origin only', async () => {
    const listed = await privateNetworkPreflight(`${server.url}/api/threads/search`, 'https://app.example.com');
    expect(listed.status).toBe(204);
    expect(listed.headers.get('access-control-allow-private-network')).toBe('true');
    const other = await privateNetworkPreflight(`${server.url}/api/threads/search`, 'https://evil.example.net');
    expect(other.status).toBe(400);
    expect(other.headers.get('access-control-allow-private-network')).toBeNull();
  });
});

// The one client of the control plane's REST API (src/api), which the deploy CLI and the listener both use, against
// real HTTP servers on loopback: what it sends (key, workspace, version, the base URL's path prefix), how it words
// each failure (the API's detail, a 422 list, a body that is not JSON, no answer, no server), and that a control
// plane URL that redirects never gets the key sent on to wherever it points (an attacker's host).
import { execFile } from 'node:child_process';
import { createServer, type IncomingHttpHeaders, type ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';
import { resolve } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { ApiError, ConnectionError, createClient } from '../../src/api/client.ts';
import { listenerCredentialResolver } from '../../src/api/git-credential.ts';

const BIN = resolve(import.meta.dirname, '../../bin/agentplane.mjs');
const KEY = 'ap-secret-key-of-the-workspace';
const LISTENER = '0b5f3f4e-9a51-4c36-8f55-2d1c1e1f6a01';
const INTEGRATION = '6f1d2c3b-4a59-4e8d-9c7b-1a2b3c4d5e6f';

type Seen = { method: string; url: string; headers: IncomingHttpHeaders; body: string };
type Server = { url: string; seen: Seen[]; close(): Promise<void> };

/** A server that records each request and lets `answer` answer it (or leave it hanging). */
async function serve(answer: (req: Seen, res: ServerResponse) => unknown): Promise<Server> {
  const seen: Seen[] = [];
  const server = createServer((req, res) => {
    let body = '';
    req.on('data', (d: Buffer) => (body += d.toString()));
    req.on('end', () => {
      const s = { method: req.method!, url: req.url!, headers: req.headers, body };
      seen.push(s);
      answer(s, res);
    });
  });
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
  return {
    url: `http://127.0.0.1:${(server.address() as AddressInfo).port}`,
    seen,
    close: () =>
      new Promise<void>((r) => {
        server.closeAllConnections();
        server.close(() => r());
      }),
  };
}

const json = (res: ServerResponse, status: number, body: unknown) => {
  res.writeHead(status, { 'content-type': 'application/json' });
  res.end(JSON.stringify(body));
};

let attacker: Server;
let redirecting: Server;
let api: Server;
/** The requests that reached the other host carrying the key. */
const keysAtAttacker = () => attacker.seen.filter((s) => JSON.stringify(s.headers).includes(KEY));

beforeAll(async () => {
  attacker = await serve((_req, res) => json(res, 200, { resources: [], offset: 0 }));
  // A control plane URL that answers with a redirect to another origin: a hijacked DNS name, a proxy rule, or an
  // attacker who got the user to configure their URL.
  redirecting = await serve((req, res) => {
    res.writeHead(307, { location: `${attacker.url}${req.url}` });
    res.end();
  });
  api = await serve((req, res) => {
    const path = req.url.split('?')[0];
    if (path === '/api-host/v2/deployments') return json(res, 200, { resources: [], offset: 0 });
    if (path === '/v2/deployments/bad') {
      return json(res, 422, {
        detail: [
          { loc: ['body', 'name'], msg: 'must not be blank' },
          { loc: ['body', 'source'], msg: 'is required' },
        ],
      });
    }
    if (path === '/v2/deployments/gone') return json(res, 404, { detail: 'Deployment gone not found.' });
    if (path === '/v2/deployments/html') {
      res.writeHead(502, { 'content-type': 'text/html' });
      return res.end('<html>\n  <body>Bad   gateway</body>\n</html>');
    }
    if (path === '/v2/deployments/slow') return false;
    if (path === `/v2/listeners/${LISTENER}/git-credential`) {
      const asked = JSON.parse(req.body) as { repo_url: string };
      if (asked.repo_url.includes('refused'))
        return json(res, 409, { detail: `No deployment assigned to listener uses ${asked.repo_url}` });
      if (asked.repo_url.includes('empty')) return json(res, 200, { host: 'github.com', username: 'x', token: '' });
      return json(res, 200, { host: 'github.com', username: 'x-access-token', token: 'ghs_fresh' });
    }
    return json(res, 404, { detail: 'Not Found' });
  });
});

afterAll(async () => {
  await Promise.all([attacker, redirecting, api].map((s) => s?.close()));
});

describe('a control plane URL that redirects', () => {
  it('never sends the key on: the client stops at the redirect and names where it pointed', async () => {
    const client = createClient({ url: redirecting.url, apiKey: KEY, tenant: 'acme' });
    const err = await client.listDeployments().catch((e: unknown) => e);
    expect(err).toBeInstanceOf(ApiError);
    expect((err as ApiError).status).toBe(307);
    expect((err as ApiError).message).toMatch(/redirect to http:\/\/127\.0\.0\.1:\d+\/v2\/deployments/);
    expect(keysAtAttacker()).toEqual([]);
  });

  it('gives the CLI one line saying so, and the key still never leaves for the other host', async () => {
    const out = await new Promise<{ code: number; stderr: string }>((res) =>
      execFile(
        process.execPath,
        [BIN, 'deployments', 'list'],
        { env: { ...process.env, AGENTPLANE_URL: redirecting.url, AGENTPLANE_API_KEY: KEY, AGENTPLANE_TENANT: 'a' } },
        (err, _stdout, stderr) => res({ code: err ? ((err as { code?: number }).code ?? 1) : 0, stderr }),
      ),
    );
    expect(out.code).not.toBe(0);
    expect(out.stderr).toMatch(/^agentplane deployments list: HTTP 307: the control plane answered with a redirect/);
    expect(keysAtAttacker()).toEqual([]);
  });

  it('makes a clone-credential request of a listener fail with the redirect, the key kept', async () => {
    const resolve = listenerCredentialResolver({
      controlPlaneUrl: redirecting.url,
      apiKey: KEY,
      tenant: 'acme',
      listenerId: LISTENER,
    });
    await expect(resolve('acme', INTEGRATION, 'https://github.com/acme/agent')).rejects.toThrow(
      /the control plane refused a git credential \(307\): the control plane answered with a redirect/,
    );
    expect(keysAtAttacker()).toEqual([]);
  });
});

describe('what the client sends', () => {
  it('keeps the path prefix of the base URL (/api-host) and sends the key, workspace and version', async () => {
    const client = createClient({ url: `${api.url}/api-host/`, apiKey: KEY, tenant: 'acme', version: '1.2.3' });
    expect(await client.listDeployments({ limit: 5, name_contains: 'a b' })).toEqual({ resources: [], offset: 0 });
    const req = api.seen.at(-1)!;
    expect(req.url).toBe('/api-host/v2/deployments?limit=5&name_contains=a+b');
    expect(req.headers['x-api-key']).toBe(KEY);
    expect(req.headers['x-tenant-id']).toBe('acme');
    expect(req.headers['x-agentplane-version']).toBe('1.2.3');
  });

  it('leaves X-Tenant-Id out for a key of one workspace', async () => {
    await createClient({ url: `${api.url}/api-host`, apiKey: KEY }).listDeployments();
    expect(api.seen.at(-1)!.headers).not.toHaveProperty('x-tenant-id');
  });
});

describe('how failures are worded', () => {
  const client = () => createClient({ url: api.url, apiKey: KEY, tenant: 'acme', timeoutMs: 300 });

  it("carries the API's detail, and a 422 list as one line of place: message", async () => {
    await expect(client().getDeployment('gone')).rejects.toThrow(/^HTTP 404: Deployment gone not found\.$/);
    await expect(client().getDeployment('bad')).rejects.toThrow(
      /^HTTP 422: body\.name: must not be blank; body\.source: is required$/,
    );
  });

  it('turns a body that is not JSON into one bounded line', async () => {
    await expect(client().getDeployment('html')).rejects.toThrow(
      /^HTTP 502: <html> <body>Bad gateway<\/body> <\/html>$/,
    );
  });

  it('says when nothing answers in time, and when nothing listens', async () => {
    const slow = await client()
      .getDeployment('slow')
      .catch((e: unknown) => e);
    expect(slow).toBeInstanceOf(ConnectionError);
    expect((slow as Error).message).toBe(`cannot reach the control plane at ${api.url}: no answer in time`);
    const closed = await serve(() => undefined);
    await closed.close();
    const refused = await createClient({ url: closed.url, apiKey: KEY })
      .listDeployments()
      .catch((e: unknown) => e);
    expect(refused).toBeInstanceOf(ConnectionError);
    expect((refused as Error).message).toBe(`cannot reach the control plane at ${closed.url}: ECONNREFUSED`);
  });

  it("lets a caller's own abort through as an abort, not as an unreachable control plane", async () => {
    const stop = new AbortController();
    const watching = createClient({ url: api.url, apiKey: KEY, tenant: 'acme' })
      .listener(LISTENER)
      .watch({ timeout: 25 }, stop.signal);
    stop.abort();
    const err = await watching.catch((e: unknown) => e);
    expect(err).not.toBeInstanceOf(ConnectionError);
    expect((err as Error).name).toBe('AbortError');
  });
});

describe("the listener's clone-credential resolver", () => {
  const resolver = () =>
    listenerCredentialResolver({ controlPlaneUrl: api.url, apiKey: KEY, tenant: 'acme', listenerId: LISTENER });

  it('hands back the fresh token the control plane mints for the repository', async () => {
    expect(await resolver()('acme', INTEGRATION, 'https://github.com/acme/agent')).toEqual({
      host: 'github.com',
      username: 'x-access-token',
      token: 'ghs_fresh',
    });
    expect(JSON.parse(api.seen.at(-1)!.body)).toEqual({
      integration_id: INTEGRATION,
      repo_url: 'https://github.com/acme/agent',
    });
  });

  it("words a refusal as the build's failure reason, one line without the URL's credentials", async () => {
    const refusal = await resolver()('acme', INTEGRATION, 'https://user:hunter2@github.com/acme/refused').catch(
      (e: unknown) => (e as Error).message,
    );
    expect(refusal).toMatch(
      /^the control plane refused a git credential \(409\): No deployment assigned to listener uses https:\/\/\S*github\.com\/acme\/refused$/,
    );
    expect(refusal).not.toContain('hunter2');
    await expect(resolver()('acme', INTEGRATION, 'https://github.com/acme/empty')).rejects.toThrow(
      'the control plane answered no git credential',
    );
  });

  it('asks nothing for another workspace or for an integration label that is not an id', async () => {
    const before = api.seen.length;
    await expect(resolver()('other', INTEGRATION, 'https://github.com/acme/agent')).rejects.toThrow(
      'this listener serves workspace acme, not other: no git credential',
    );
    expect(await resolver()('acme', 'my-label', 'https://github.com/acme/agent')).toBeUndefined();
    expect(api.seen.length).toBe(before);
  });
});

// A deployed agent answers only callers with one of its tenant's keys: tried the way an outsider would, against a
// real server process, with plain HTTP and with the real SDK.
import { mkdtempSync, rmSync, writeFileSync, renameSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { Client } from '@langchain/langgraph-sdk';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { hashApiKey } from '../../../src/agent-server/http/api-keys.ts';
import { FIXTURE_CONFIG } from '../helpers/harness.ts';
import { startServerProcess, type ServerProc } from '../helpers/process.ts';

const OWN_KEY = 'apk_own-tenant-key-0123456789';
const CUSTOM_AUTH_CONFIG = new URL('../fixtures/auth-http-app/langgraph.json', import.meta.url).pathname;
const OTHER_KEY = 'apk_other-tenant-key-0123456789';
const LATER_KEY = 'apk_created-later-0123456789';

async function until(check: () => Promise<boolean>, what: string, ms = 15_000): Promise<void> {
  const deadline = Date.now() + ms;
  while (!(await check())) {
    if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}`);
    await new Promise((r) => setTimeout(r, 100));
  }
}

describe('agent server with --auth-keys-file', () => {
  let dir: string;
  let keysFile: string;
  let server: ServerProc;
  const writeKeys = (keys: string[]) => {
    // Replaced atomically, as the runtime does.
    writeFileSync(`${keysFile}.tmp`, JSON.stringify({ hashes: keys.map(hashApiKey) }));
    renameSync(`${keysFile}.tmp`, keysFile);
  };
  const post = (path: string, key?: string) =>
    fetch(`${server.url}${path}`, {
      method: 'POST',
      headers: { 'content-type': 'application/json', ...(key === undefined ? {} : { 'x-api-key': key }) },
      body: '{}',
    });

  beforeAll(async () => {
    dir = mkdtempSync(join(tmpdir(), 'ap-as-keys-'));
    keysFile = join(dir, 'keys.json');
    writeKeys([OWN_KEY]);
    server = await startServerProcess([
      '--config',
      FIXTURE_CONFIG,
      '--data-dir',
      join(dir, 'data'),
      '--auth-keys-file',
      keysFile,
    ]);
  });
  afterAll(async () => {
    await server?.stop();
    rmSync(dir, { recursive: true, force: true });
  });

  it("refuses callers without a key, with a wrong key or another tenant's key; /ok stays open", async () => {
    expect((await fetch(`${server.url}/ok`)).status).toBe(200);
    for (const key of [undefined, '', OTHER_KEY, OWN_KEY.toUpperCase(), `${OWN_KEY}x`, hashApiKey(OWN_KEY)]) {
      for (const path of ['/threads/search', '/assistants/search', '/threads', '/runs/wait']) {
        const res = await post(path, key);
        expect([path, key, res.status]).toEqual([path, key, 401]);
        expect(((await res.json()) as { detail: string }).detail).toMatch(/API key/);
      }
    }
    for (const path of [
      '/info',
      '/openapi.json',
      '/threads/00000000-0000-0000-0000-000000000000',
      '/nothing-here',
      '/ok/../threads/search',
    ]) {
      expect([path, (await fetch(`${server.url}${path}`)).status]).toEqual([path, 401]);
    }
    // A query string on an open path does not open anything else.
    expect((await fetch(`${server.url}/threads/search?x=/ok`, { method: 'POST' })).status).toBe(401);
    expect(server.output()).toMatch(/requests need an X-Api-Key/);
  });

  it('answers the real SDK with its own key; nothing an outsider tried was written', async () => {
    const client = new Client({ apiUrl: server.url, apiKey: OWN_KEY, callerOptions: { maxRetries: 0 } });
    expect(await client.threads.search()).toEqual([]);
    const thread = await client.threads.create({ metadata: { owner: 'me' } });
    const values = await client.runs.wait(thread.thread_id, 'counter', { input: { count: 1 } });
    expect(values).toMatchObject({ count: 12 });
    const outsider = new Client({ apiUrl: server.url, apiKey: OTHER_KEY, callerOptions: { maxRetries: 0 } });
    await expect(outsider.threads.get(thread.thread_id)).rejects.toThrow(/401/);
    expect((await client.threads.search()).map((t) => t.thread_id)).toEqual([thread.thread_id]);
  });

  it('follows the key file: a new key works and a revoked one stops working within seconds, without a restart', async () => {
    writeKeys([OWN_KEY, LATER_KEY]);
    await until(async () => (await post('/threads/search', LATER_KEY)).status === 200, 'the new key to be accepted');
    writeKeys([LATER_KEY]);
    await until(async () => (await post('/threads/search', OWN_KEY)).status === 401, 'the revoked key to be refused');
    expect((await post('/threads/search', LATER_KEY)).status).toBe(200);
  });

  it('fails closed while the key file is missing or garbage, and recovers', async () => {
    rmSync(keysFile);
    await until(async () => (await post('/threads/search', LATER_KEY)).status === 401, 'refusal without a key file');
    writeFileSync(`${keysFile}.tmp`, '{"hashes": "everyone"}');
    renameSync(`${keysFile}.tmp`, keysFile);
    await new Promise((r) => setTimeout(r, 2500));
    expect((await post('/threads/search', LATER_KEY)).status).toBe(401);
    writeKeys([LATER_KEY]);
    await until(async () => (await post('/threads/search', LATER_KEY)).status === 200, 'recovery');
    expect(server.output()).toMatch(/API key file unreadable/);
  });
});

describe('agent server with --auth-keys-file and custom auth', () => {
  let dir: string;
  let server: ServerProc;
  beforeAll(async () => {
    dir = mkdtempSync(join(tmpdir(), 'ap-as-keys-custom-'));
    const keysFile = join(dir, 'keys.json');
    writeFileSync(keysFile, JSON.stringify({ hashes: [hashApiKey(OWN_KEY)] }));
    server = await startServerProcess([
      '--config',
      CUSTOM_AUTH_CONFIG,
      '--data-dir',
      join(dir, 'data'),
      '--auth-keys-file',
      keysFile,
    ]);
  });
  afterAll(async () => {
    await server?.stop();
    rmSync(dir, { recursive: true, force: true });
  });

  it("never lets another workspace's or an admin's key reach custom auth or custom routes, in any header", async () => {
    const ask = (headers: Record<string, string>, path = '/threads/search') =>
      fetch(`${server.url}${path}`, {
        method: path === '/threads/search' ? 'POST' : 'GET',
        headers: { 'content-type': 'application/json', ...headers },
        body: path === '/threads/search' ? '{}' : undefined,
      }).then(async (r) => (await r.arrayBuffer(), r.status));
    // Custom auth decides for everything else: a user token is in, nothing is out.
    expect(await ask({ authorization: 'Bearer token-alice' })).toBe(200);
    expect(await ask({})).toBe(401);
    for (const headers of <Record<string, string>[]>[
      { authorization: 'Bearer token-alice', 'x-api-key': OTHER_KEY },
      { authorization: `Bearer ${OTHER_KEY}` },
      { 'x-api-key': OTHER_KEY },
    ]) {
      expect(await ask(headers)).toBe(401);
      expect(await ask(headers, '/custom/hello')).toBe(401);
    }
    // The workspace's own key may pass on to custom auth, which decides.
    expect(await ask({ authorization: 'Bearer token-alice', 'x-api-key': OWN_KEY })).toBe(200);
    expect(await ask({ 'x-api-key': OWN_KEY }, '/custom/hello')).toBe(200);
  });
});

describe('agent server without a key file', () => {
  it("stays open, as a developer's local server is, and says so at start", async () => {
    const dir = mkdtempSync(join(tmpdir(), 'ap-as-open-'));
    const server = await startServerProcess(['--config', FIXTURE_CONFIG, '--data-dir', dir]);
    try {
      const res = await fetch(`${server.url}/threads/search`, {
        method: 'POST',
        headers: { 'content-type': 'application/json' },
        body: '{}',
      });
      expect(res.status).toBe(200);
      expect(server.output()).toMatch(/every request is accepted without an API key/);
    } finally {
      await server.stop();
      rmSync(dir, { recursive: true, force: true });
    }
  });
});

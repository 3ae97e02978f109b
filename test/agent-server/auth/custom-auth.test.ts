// Custom auth from langgraph.json ("auth": {"path": "./auth.ts:auth"}), against a real server process and the
// real SDK sending bearer tokens: users see only what they own, handlers write metadata, deny, or answer with
// their own status, runs know who started them, and a broken auth file answers 500 without taking the server down.
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { Client } from '@langchain/langgraph-sdk';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { hashApiKey } from '../../../src/agent-server/http/api-keys.ts';
import { createTestDatabase } from '../helpers/pg.ts';
import { startServerProcess, type ServerProc } from '../helpers/process.ts';

const OWNER_CONFIG = new URL('../fixtures/auth-owner/langgraph.json', import.meta.url).pathname;
const BROKEN_CONFIG = new URL('../fixtures/auth-broken/langgraph.json', import.meta.url).pathname;
const PLATFORM_KEY = 'apk_platform-key-0123456789';

const client = (url: string, token?: string) =>
  new Client({
    apiUrl: url,
    apiKey: null,
    defaultHeaders: token ? { Authorization: `Bearer ${token}` } : {},
    callerOptions: { maxRetries: 0 },
  });

describe.each(['embedded', 'postgres'] as const)(
  'custom auth (owner-only threads), --auth-keys-file also set, %s store',
  (store) => {
    let dir: string;
    let server: ServerProc;
    let alice: Client;
    let bob: Client;
    let dropDb: (() => Promise<void>) | undefined;

    beforeAll(async () => {
      dir = mkdtempSync(join(tmpdir(), 'ap-as-custom-auth-'));
      const keysFile = join(dir, 'keys.json');
      writeFileSync(keysFile, JSON.stringify({ hashes: [hashApiKey(PLATFORM_KEY)] }));
      const storeArgs = ['--data-dir', join(dir, 'data')];
      if (store === 'postgres') {
        const db = await createTestDatabase();
        dropDb = db.drop;
        storeArgs.push('--database-url', db.url);
      }
      server = await startServerProcess(['--config', OWNER_CONFIG, ...storeArgs, '--auth-keys-file', keysFile]);
      alice = client(server.url, 'token-alice');
      bob = client(server.url, 'token-bob');
    });
    afterAll(async () => {
      await server?.stop();
      await dropDb?.();
      rmSync(dir, { recursive: true, force: true });
    });

    it("refuses requests without a valid token with the handler's 401 (a platform key alone is not enough); /ok and /info stay open", async () => {
      for (const headers of [{}, { Authorization: 'Bearer nope' }, { 'x-api-key': PLATFORM_KEY }] as Record<
        string,
        string
      >[]) {
        const res = await fetch(`${server.url}/threads/search`, {
          method: 'POST',
          headers: { 'content-type': 'application/json', ...headers },
          body: '{}',
        });
        expect(res.status).toBe(401);
        expect(res.headers.get('www-authenticate')).toBe('Bearer');
        expect(await res.json()).toEqual({ detail: 'Invalid or missing token' });
      }
      await expect(client(server.url).threads.search()).rejects.toThrow(/401/);
      expect((await fetch(`${server.url}/ok`)).status).toBe(200);
      expect((await fetch(`${server.url}/info`)).status).toBe(200);
      expect((await fetch(`${server.url}/openapi.json`)).status).toBe(401);
      expect(server.output()).toMatch(/custom auth from langgraph.json decides who may call/);
    });

    it('writes the owner into new threads and shows each user only their own', async () => {
      const mine = await alice.threads.create({ metadata: { topic: 'a' } });
      expect(mine.metadata).toEqual({ topic: 'a', owner: 'alice' });
      const bobs = await bob.threads.create();
      expect(bobs.metadata).toEqual({ owner: 'bob' });

      expect((await alice.threads.get(mine.thread_id)).thread_id).toBe(mine.thread_id);
      await expect(bob.threads.get(mine.thread_id)).rejects.toThrow(/404/);
      const raw = await fetch(`${server.url}/threads/${mine.thread_id}`, {
        headers: { Authorization: 'Bearer token-bob' },
      });
      expect(raw.status).toBe(404);
      expect(((await raw.json()) as { detail: string }).detail).toMatch(/Thread .*not found/);

      expect((await alice.threads.search()).map((t) => t.thread_id)).toEqual([mine.thread_id]);
      expect((await bob.threads.search()).map((t) => t.thread_id)).toEqual([bobs.thread_id]);
      // Asking for someone else's threads by metadata finds nothing instead of widening the filter.
      expect(await bob.threads.search({ metadata: { owner: 'alice' } })).toEqual([]);
      expect(await bob.threads.count({ metadata: { owner: 'alice' } })).toBe(0);
      expect(await alice.threads.count()).toBe(1);

      // Every thread-scoped route hides the thread: state, history, update, runs, copy.
      await expect(bob.threads.getState(mine.thread_id)).rejects.toThrow(/404/);
      await expect(bob.threads.getHistory(mine.thread_id)).rejects.toThrow(/404/);
      await expect(bob.threads.update(mine.thread_id, { metadata: { owner: 'bob' } })).rejects.toThrow(/404/);
      await expect(bob.runs.wait(mine.thread_id, 'counter', { input: { count: 1 } })).rejects.toThrow(/404/);
      await expect(bob.runs.list(mine.thread_id)).rejects.toThrow(/404/);
      await expect(bob.threads.copy(mine.thread_id)).rejects.toThrow(/404/);
      const streamed = await fetch(`${server.url}/threads/${mine.thread_id}/runs/stream`, {
        method: 'POST',
        headers: { 'content-type': 'application/json', Authorization: 'Bearer token-bob' },
        body: JSON.stringify({ assistant_id: 'counter', input: { count: 1 } }),
      });
      expect(streamed.status).toBe(404);
      expect((await alice.threads.get(mine.thread_id)).metadata).toEqual({ topic: 'a', owner: 'alice' });
    });

    it('store handlers rewrite namespaces: each user reads and searches only their own memory', async () => {
      await alice.store.putItem(['notes'], 'n1', { text: 'alice secret' });
      expect((await alice.store.getItem(['notes'], 'n1'))?.value).toEqual({ text: 'alice secret' });
      expect((await alice.store.getItem(['notes'], 'n1'))?.namespace).toEqual(['alice', 'notes']);
      expect(await bob.store.getItem(['notes'], 'n1')).toBeNull();
      expect((await bob.store.searchItems(['notes'])).items).toEqual([]);
      expect((await bob.store.searchItems(['alice', 'notes'])).items).toEqual([]); // lands under bob's own id
      expect((await alice.store.searchItems(['notes'])).items.map((i) => i.key)).toEqual(['n1']);
    });

    it('streamed runs know their user too, and threads they create belong to the caller', async () => {
      const id = crypto.randomUUID();
      const seen: unknown[] = [];
      for await (const part of alice.runs.stream(id, 'whoami', {
        input: {},
        ifNotExists: 'create',
        streamMode: 'values',
      })) {
        if (part.event === 'values') seen.push(part.data);
      }
      expect(seen.at(-1)).toEqual({ user_id: 'alice', permissions: ['threads:write'], display_name: 'Alice A.' });
      expect((await alice.threads.get(id)).metadata).toMatchObject({ owner: 'alice' });
      const stateless: unknown[] = [];
      for await (const part of bob.runs.stream(null, 'whoami', { input: {}, streamMode: 'values' })) {
        if (part.event === 'values') stateless.push(part.data);
      }
      expect(stateless.at(-1)).toMatchObject({ user_id: 'bob' });
    });

    it('tells the graph who started the run (langgraph_auth_user, _user_id, _permissions); a client cannot pose as someone else', async () => {
      const t = await alice.threads.create();
      const values = await alice.runs.wait(t.thread_id, 'whoami', {
        input: {},
        config: {
          configurable: { langgraph_auth_user_id: 'bob', langgraph_auth_permissions: ['admin'], user_id: 'bob' },
        },
      });
      expect(values).toEqual({ user_id: 'alice', permissions: ['threads:write'], display_name: 'Alice A.' });
      const [run] = await alice.runs.list(t.thread_id);
      const configurable = (run as unknown as { kwargs: { config: { configurable: Record<string, unknown> } } }).kwargs
        .config.configurable;
      expect(configurable).toMatchObject({
        user_id: 'alice',
        langgraph_auth_user_id: 'alice',
        langgraph_auth_permissions: ['threads:write'],
        langgraph_auth_user: {
          identity: 'alice',
          display_name: 'Alice A.',
          is_authenticated: true,
          permissions: ['threads:write'],
        },
      });
    });

    it('a thread created by a run (if_not_exists) belongs to the caller; a stateless run works', async () => {
      const id = crypto.randomUUID();
      await alice.runs.wait(id, 'counter', { input: { count: 1 }, ifNotExists: 'create' });
      expect((await alice.threads.get(id)).metadata).toMatchObject({ owner: 'alice', graph_id: 'counter' });
      await expect(bob.threads.get(id)).rejects.toThrow(/404/);
      expect(await bob.runs.wait(null, 'whoami', { input: {} })).toMatchObject({ user_id: 'bob' });
    });

    it('a handler returning false answers 403; an HTTPException keeps its status', async () => {
      const reader = client(server.url, 'token-reader');
      await expect(reader.threads.create()).rejects.toThrow(/403/);
      await expect(alice.assistants.create({ graphId: 'counter' })).rejects.toThrow(/403/);
      const t = await bob.threads.create();
      const res = await fetch(`${server.url}/threads/${t.thread_id}`, {
        method: 'DELETE',
        headers: { Authorization: 'Bearer token-bob' },
      });
      expect(res.status).toBe(418);
      expect(await res.json()).toEqual({ detail: 'bob may not delete' });
      // Alice may delete her own thread but not Bob's (hidden, so 404).
      await expect(alice.threads.delete(t.thread_id)).rejects.toThrow(/404/);
      const own = await alice.threads.create();
      await alice.threads.delete(own.thread_id);
      await expect(alice.threads.get(own.thread_id)).rejects.toThrow(/404/);
    });

    it('logs the langgraph.json keys it ignores, once', () => {
      const lines = server
        .output()
        .split('\n')
        .filter((l) => l.includes('langgraph.json keys ignored'));
      expect(lines).toHaveLength(1);
      // checkpointer (its ttl) is read; python_version means nothing to a Node server.
      expect(lines[0]).toMatch(/ignored by this server: python_version"/);
    });
  },
);

describe('an auth file whose authenticate throws', () => {
  it('answers 500, logs the error and keeps serving', async () => {
    const dir = mkdtempSync(join(tmpdir(), 'ap-as-broken-auth-'));
    const server = await startServerProcess(['--config', BROKEN_CONFIG, '--data-dir', dir]);
    try {
      for (let i = 0; i < 3; i++) {
        const res = await fetch(`${server.url}/threads/search`, {
          method: 'POST',
          headers: { 'content-type': 'application/json' },
          body: '{}',
        });
        expect(res.status).toBe(500);
        expect(await res.json()).toEqual({ detail: 'Internal server error' });
      }
      // The log line may reach the pipe after the answer did.
      await expect.poll(() => server.output()).toMatch(/token service unreachable \(fixture bug\)/);
      expect(server.proc.exitCode).toBeNull();
      const ok = await fetch(`${server.url}/threads/search`, {
        method: 'POST',
        headers: { 'content-type': 'application/json', 'x-fine': '1' },
        body: '{}',
      });
      expect(ok.status).toBe(200);
    } finally {
      await server.stop();
      rmSync(dir, { recursive: true, force: true });
    }
  });
});

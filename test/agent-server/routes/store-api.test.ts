// The long-term memory store end to end: real server processes on both stores, graphs on the main thread and on
// an executor thread, talked to with the real SDK (client.store) and plain HTTP for what the SDK refuses itself.
// The four set-ups (each its own server and data) run at once; the tests of one set-up run in order.
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { Client } from '@langchain/langgraph-sdk';
import pg from 'pg';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createTestDatabase } from '../helpers/pg.ts';
import { startServerProcess, type ServerProc } from '../helpers/process.ts';

const CONFIG = new URL('../fixtures/store/langgraph.json', import.meta.url).pathname;
const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

describe.concurrent.each([
  ['embedded', 0],
  ['embedded', 1],
  ['postgres', 0],
  ['postgres', 1],
] as const)('store API (%s, executor threads: %i)', (kind, threads) => {
  let dir: string;
  let db: { url: string; drop: () => Promise<void> } | undefined;
  let server: ServerProc;
  let client: Client;
  let pgvector = false;

  beforeAll(async () => {
    dir = mkdtempSync(join(tmpdir(), 'ap-as-store-'));
    const args = ['--config', CONFIG, '--executor-threads', String(threads)];
    if (kind === 'postgres') {
      db = await createTestDatabase();
      args.push('--database-url', db.url);
      const c = new pg.Client({ connectionString: db.url });
      await c.connect();
      pgvector = (await c.query(`SELECT 1 FROM pg_available_extensions WHERE name = 'vector'`)).rows.length > 0;
      await c.end();
    } else args.push('--data-dir', join(dir, 'data'));
    server = await startServerProcess(args);
    client = new Client({ apiUrl: server.url });
  }, 90_000);
  afterAll(async () => {
    await server?.stop();
    await db?.drop();
    rmSync(dir, { recursive: true, force: true });
  });

  const raw = (method: string, path: string, body?: unknown) =>
    fetch(`${server.url}${path}`, {
      method,
      headers: body === undefined ? {} : { 'content-type': 'application/json' },
      body: body === undefined ? undefined : JSON.stringify(body),
    });

  it.sequential('says store: true in /info', async () => {
    const info = (await (await raw('GET', '/info')).json()) as { flags: { store: boolean } };
    expect(info.flags.store).toBe(true);
  });

  it.sequential('puts, gets, searches, lists and deletes items with the SDK', async () => {
    await client.store.putItem(['users', 'u1'], 'prefs', { theme: 'dark', size: 3 });
    const item = await client.store.getItem(['users', 'u1'], 'prefs');
    expect(item).toMatchObject({ namespace: ['users', 'u1'], key: 'prefs', value: { theme: 'dark', size: 3 } });
    // The SDK copies the wire's created_at / updated_at to createdAt / updatedAt.
    const wire = (i: unknown) => i as { created_at: string; updated_at: string };
    expect(Date.parse(wire(item).created_at)).toBeGreaterThan(Date.now() - 60_000);
    expect(wire(item).updated_at).toBe(wire(item).created_at);

    await sleep(20);
    await client.store.putItem(['users', 'u1'], 'prefs', { theme: 'light', size: 5 });
    const updated = await client.store.getItem(['users', 'u1'], 'prefs');
    expect(updated!.value).toEqual({ theme: 'light', size: 5 });
    expect(wire(updated).created_at).toBe(wire(item).created_at);
    expect(Date.parse(wire(updated).updated_at)).toBeGreaterThan(Date.parse(wire(item).created_at));

    expect(await client.store.getItem(['users', 'u1'], 'nothing')).toBeNull();
    expect(await client.store.getItem(['users', 'nobody'], 'prefs')).toBeNull();

    await client.store.putItem(['users', 'u2'], 'prefs', { theme: 'dark', size: 10 });
    const all = await client.store.searchItems(['users']);
    expect(all.items.map((i) => i.namespace.join('/')).sort()).toEqual(['users/u1', 'users/u2']);
    expect(all.items[0]).toHaveProperty('score');
    expect(
      (await client.store.searchItems(['users'], { filter: { theme: 'dark' } })).items.map((i) => i.namespace[1]),
    ).toEqual(['u2']);
    expect(
      (await client.store.searchItems(['users'], { filter: { size: { $gt: 4 } } })).items
        .map((i) => i.namespace[1])
        .sort(),
    ).toEqual(['u1', 'u2']);
    expect((await client.store.searchItems(['users'], { limit: 1, offset: 1 })).items).toHaveLength(1);

    const ns = await client.store.listNamespaces({ prefix: ['users'] });
    expect(ns.namespaces).toEqual([
      ['users', 'u1'],
      ['users', 'u2'],
    ]);
    expect((await client.store.listNamespaces({ prefix: ['users'], maxDepth: 1 })).namespaces).toEqual([['users']]);
    expect((await client.store.listNamespaces({ suffix: ['u2'] })).namespaces).toEqual([['users', 'u2']]);

    await client.store.deleteItem(['users', 'u1'], 'prefs');
    expect(await client.store.getItem(['users', 'u1'], 'prefs')).toBeNull();
    expect((await client.store.searchItems(['users'])).items.map((i) => i.namespace[1])).toEqual(['u2']);
  });

  it.sequential('matches namespace prefixes label by label; labels keep "_", "%", "~" and "\\"', async () => {
    await client.store.putItem(['p', 'b'], 'k', { n: 1 });
    await client.store.putItem(['p', 'bc'], 'k', { n: 2 });
    await client.store.putItem(['p', 'b', 'deep'], 'k', { n: 3 });
    const under = await client.store.searchItems(['p', 'b']);
    expect(under.items.map((i) => i.value.n).sort()).toEqual([1, 3]);
    expect((await client.store.listNamespaces({ prefix: ['p', 'b'] })).namespaces).toEqual([
      ['p', 'b'],
      ['p', 'b', 'deep'],
    ]);
    expect((await client.store.listNamespaces({ prefix: ['p', '*'], maxDepth: 2 })).namespaces).toEqual([
      ['p', 'b'],
      ['p', 'bc'],
    ]);

    const odd = ['user_1', '50%', 'a~7E', 'back\\slash'];
    await client.store.putItem(odd, 'my.key', { ok: true });
    expect(await client.store.getItem(odd, 'my.key')).toMatchObject({
      namespace: odd,
      key: 'my.key',
      value: { ok: true },
    });
    expect((await client.store.searchItems(['user_1'])).items.map((i) => i.namespace)).toEqual([odd]);
    // "_" and "%" are not wildcards.
    expect((await client.store.searchItems(['user11'])).items).toEqual([]);
    expect((await client.store.listNamespaces({ prefix: ['user_1'] })).namespaces).toEqual([odd]);
    // An empty prefix searches everything.
    expect((await client.store.searchItems([], { limit: 100 })).items.length).toBeGreaterThanOrEqual(4);
  });

  it.sequential(
    'gives graphs the same store (getStore() / config.store) on every thread',
    async () => {
      const thread = await client.threads.create();
      const first = (await client.runs.wait(thread.thread_id, 'memory', {
        input: { key: 'k1', text: 'first' },
      })) as Record<string, unknown>;
      expect(first.previous).toBeNull();
      expect(await client.store.getItem(['memories', 'graph'], 'k1')).toMatchObject({
        value: { text: 'first', by: 'graph' },
      });

      await client.store.putItem(['memories', 'sdk'], 'k1', { text: 'from the SDK' });
      await client.store.putItem(['memories', 'graph'], 'k1', { text: 'edited by the SDK' });
      const second = (await client.runs.wait(thread.thread_id, 'memory', {
        input: { key: 'k1', text: 'second' },
      })) as Record<string, unknown>;
      expect(second.previous).toEqual({ text: 'edited by the SDK' });
      expect(second.found).toBe(2);

      if (threads > 0) {
        // Runs go to the executor thread once it is ready; until then they run on the main thread.
        let onThread: Record<string, unknown> | undefined;
        for (let i = 0; i < 60 && !onThread; i++) {
          const r = (await client.runs.wait(thread.thread_id, 'memory', {
            input: { key: `t${i}`, text: `n${i}` },
          })) as Record<string, unknown>;
          if (r.on_main_thread === false) onThread = { ...r, key: `t${i}` };
          else await sleep(250);
        }
        expect(onThread, 'no run reached the executor thread').toBeDefined();
        expect(await client.store.getItem(['memories', 'graph'], onThread!.key as string)).toMatchObject({
          value: { by: 'graph' },
        });
        await client.store.putItem(['memories', 'graph'], 'shared', { text: 'written by the SDK' });
        let seen: unknown;
        for (let i = 0; i < 20; i++) {
          const r = (await client.runs.wait(thread.thread_id, 'memory', {
            input: { key: 'shared', text: 'again' },
          })) as Record<string, unknown>;
          if (r.on_main_thread === false) {
            seen = r.previous;
            break;
          }
          await client.store.putItem(['memories', 'graph'], 'shared', { text: 'written by the SDK' });
        }
        expect(seen).toEqual({ text: 'written by the SDK' });
      } else {
        expect(second.on_main_thread).toBe(true);
      }
    },
    60_000,
  );

  it.sequential(
    'expires items after their TTL and sweeps them',
    async () => {
      await client.store.putItem(['ttl'], 'short', { v: 1 }, { ttl: 0.05 });
      await client.store.putItem(['ttl'], 'long', { v: 2 }, { ttl: 60 });
      await client.store.putItem(['ttl'], 'forever', { v: 3 });
      expect(await client.store.getItem(['ttl'], 'short')).toMatchObject({ value: { v: 1 } });
      await sleep(4_000);
      expect(await client.store.getItem(['ttl'], 'short')).toBeNull();
      expect((await client.store.searchItems(['ttl'])).items.map((i) => i.key).sort()).toEqual(['forever', 'long']);
      if (kind === 'postgres') {
        // The sweep (every 0.01 minutes here) deleted the row itself.
        const c = new pg.Client({ connectionString: db!.url });
        await c.connect();
        const { rows } = await c.query(`SELECT key FROM agentplane.store WHERE namespace_path = 'ttl' ORDER BY key`);
        await c.end();
        expect(rows.map((r) => r.key)).toEqual(['forever', 'long']);
      }
    },
    20_000,
  );

  it.sequential(
    'searches by meaning with store.index (embedded: cosine over stored vectors; Postgres: needs pgvector)',
    async () => {
      await client.store.putItem(['pets'], 'a', { text: 'my cat sleeps' });
      await client.store.putItem(['pets'], 'b', { text: 'the dog barks' });
      await client.store.putItem(['pets'], 'c', { text: 'a fish swims' });
      const found = await client.store.searchItems(['pets'], { query: 'which dog?' });
      if (kind === 'embedded' || pgvector) {
        expect(found.items[0]!.key).toBe('b');
        expect(found.items[0]!.score).toBeGreaterThan(found.items[1]!.score as number);
      } else {
        expect(found.items).toHaveLength(3);
        expect(server.output()).toMatch(/needs the pgvector extension/);
      }
    },
  );

  it.sequential('refuses bad namespaces, keys and values with 422 naming the field', async () => {
    const cases: Array<[string, string, unknown, RegExp]> = [
      ['PUT', '/store/items', { namespace: ['a.b'], key: 'k', value: {} }, /namespace[\s\S]*must not contain "\."/],
      ['PUT', '/store/items', { namespace: ['a', ''], key: 'k', value: {} }, /namespace[\s\S]*must not be empty/],
      ['PUT', '/store/items', { namespace: ['a:b'], key: 'k', value: {} }, /namespace[\s\S]*":"/],
      ['PUT', '/store/items', { namespace: ['langgraph', 'x'], key: 'k', value: {} }, /namespace[\s\S]*langgraph/],
      ['PUT', '/store/items', { namespace: [], key: 'k', value: {} }, /namespace[\s\S]*at least one label/],
      ['PUT', '/store/items', { namespace: ['a'], key: '', value: {} }, /key[\s\S]*must not be empty/],
      ['PUT', '/store/items', { namespace: ['a'], key: 'k', value: 'text' }, /value/],
      [
        'PUT',
        '/store/items',
        { namespace: ['a'], key: 'k', value: { big: 'x'.repeat(1024 * 1024) } },
        /value[\s\S]*1048576 bytes/,
      ],
      ['PUT', '/store/items', { namespace: ['a'], key: 'k', value: {}, ttl: -1 }, /ttl/],
      ['DELETE', '/store/items', { namespace: ['a.b'], key: 'k' }, /namespace/],
      ['POST', '/store/items/search', { namespace_prefix: ['langgraph'] }, /namespace_prefix/],
      ['POST', '/store/items/search', { namespace_prefix: ['a'], limit: 0 }, /limit/],
      ['POST', '/store/namespaces', { prefix: ['a.b'] }, /prefix/],
    ];
    for (const [method, path, body, detail] of cases) {
      const res = await raw(method, path, body);
      const answer = (await res.json()) as { detail: string };
      expect([method, path, JSON.stringify(body).slice(0, 80), res.status]).toEqual([
        method,
        path,
        JSON.stringify(body).slice(0, 80),
        422,
      ]);
      expect(answer.detail).toMatch(detail);
    }
    for (const q of ['namespace=&key=k', 'namespace=a..b&key=k', 'namespace=langgraph.x&key=k', 'namespace=a&key=']) {
      const res = await raw('GET', `/store/items?${q}`);
      expect([q, res.status]).toEqual([q, 422]);
    }
    // Nothing was written by the refused requests.
    expect((await client.store.searchItems(['a'])).items).toEqual([]);
  });
});

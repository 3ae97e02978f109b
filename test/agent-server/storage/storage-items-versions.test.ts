// Both adapters: the memory store's items (TTLs, the BaseStore graphs get, semantic search) and the versions of an
// assistant.
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { randomUUID } from 'node:crypto';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { openEmbeddedStorage } from '../../../src/agent-server/storage/embedded/index.ts';
import { openPostgresStorage } from '../../../src/agent-server/storage/postgres/index.ts';
import { itemsConfig } from '../../../src/agent-server/storage/items.ts';
import type { EngineStorage } from '../../../src/agent-server/storage/ports/run-queue.ts';
import { NotFoundError } from '../../../src/lib/errors.ts';
import { createTestDatabase } from '../helpers/pg.ts';
import { embeddedFactory, postgresFactory } from '../helpers/storage-factories.ts';

describe.each(['embedded', 'postgres'] as const)('memory store items (%s)', (kind) => {
  let storage: EngineStorage;
  let cleanup: () => Promise<void>;
  const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));
  const embedder = {
    embedDocuments: async (texts: string[]) => texts.map((t) => [t.includes('cat') ? 1 : 0, 1]),
    embedQuery: async (t: string) => [t.includes('cat') ? 1 : 0, 1],
  };
  const items = itemsConfig({
    ttl: { default_ttl: 0.04 },
    index: { embed: './unused.ts:e', dims: 2, fields: ['text'] },
  });

  beforeAll(async () => {
    if (kind === 'embedded') {
      const dir = mkdtempSync(join(tmpdir(), 'ap-as-items-'));
      storage = openEmbeddedStorage({ dataDir: dir, items, embedder });
      cleanup = async () => rmSync(dir, { recursive: true, force: true });
    } else {
      const db = await createTestDatabase();
      storage = await openPostgresStorage({ databaseUrl: db.url, poolSize: 4, items, embedder });
      cleanup = () => db.drop();
    }
  });
  afterAll(async () => {
    await storage?.close();
    await cleanup?.();
  });

  it('keeps created_at across puts and moves updated_at', async () => {
    await storage.items.put(['c', 'x'], 'k', { v: 1 }, { ttl: 60 });
    const a = await storage.items.get(['c', 'x'], 'k');
    await sleep(15);
    await storage.items.put(['c', 'x'], 'k', { v: 2 }, { ttl: 60 });
    const b = await storage.items.get(['c', 'x'], 'k');
    expect(b).toMatchObject({ namespace: ['c', 'x'], key: 'k', value: { v: 2 }, created_at: a!.created_at });
    expect(Date.parse(b!.updated_at)).toBeGreaterThan(Date.parse(a!.updated_at));
    await storage.items.delete(['c', 'x'], 'k');
    expect(await storage.items.get(['c', 'x'], 'k')).toBeNull();
  });

  it("applies the default TTL; a read restarts the item's own TTL; sweep deletes what expired", async () => {
    await storage.items.put(['ttl'], 'default', { v: 1 });
    await storage.items.put(['ttl'], 'refreshed', { v: 2 }, { ttl: 0.04 });
    await storage.items.put(['ttl'], 'kept', { v: 3 }, { ttl: 60 });
    await sleep(1_500);
    expect(await storage.items.get(['ttl'], 'refreshed')).not.toBeNull();
    await sleep(1_500);
    // 3 s after the put (TTL 2.4 s): only the refreshed one (and the long one) are still there.
    expect(await storage.items.get(['ttl'], 'default')).toBeNull();
    expect(await storage.items.get(['ttl'], 'refreshed', { refresh_ttl: false })).not.toBeNull();
    await sleep(1_500);
    expect(await storage.items.get(['ttl'], 'refreshed')).toBeNull();
    expect(await storage.items.sweep()).toBe(2);
    expect((await storage.items.search({ namespace_prefix: ['ttl'], limit: 10, offset: 0 })).map((i) => i.key)).toEqual(
      ['kept'],
    );
  }, 20_000);

  it("is the BaseStore graphs get, with LangGraph's namespace checks", async () => {
    await storage.items.store.put(['g'], 'a', { text: 'a cat' });
    await storage.items.store.put(['g'], 'b', { text: 'a dog' });
    expect((await storage.items.get(['g'], 'a'))?.value).toEqual({ text: 'a cat' });
    expect((await storage.items.store.get(['g'], 'b'))?.value).toEqual({ text: 'a dog' });
    expect((await storage.items.store.search(['g'], { filter: { text: 'a dog' } })).map((i) => i.key)).toEqual(['b']);
    expect(await storage.items.store.listNamespaces({ prefix: ['g'] })).toEqual([['g']]);
    await expect(storage.items.store.put(['a.b'], 'k', {})).rejects.toThrow(/periods/);
    await expect(storage.items.store.put(['langgraph'], 'k', {})).rejects.toThrow(/langgraph/);
    await storage.items.store.delete(['g'], 'a');
    expect(await storage.items.get(['g'], 'a')).toBeNull();
  });

  it('searches by meaning when it can (Postgres: only with pgvector)', async () => {
    await storage.items.put(['s'], 'dog', { text: 'dog' }, { ttl: 60 });
    await storage.items.put(['s'], 'cat', { text: 'cat' }, { ttl: 60 });
    const found = await storage.items.search({ namespace_prefix: ['s'], query: 'cat?', limit: 10, offset: 0 });
    if (storage.items.semantic) {
      expect(found[0]).toMatchObject({ key: 'cat' });
      expect(found[0]!.score).toBeGreaterThan(found[1]!.score!);
    } else {
      expect(kind).toBe('postgres');
      expect(found.map((i) => i.score ?? null)).toEqual([null, null]);
    }
  });
});

describe.each([embeddedFactory, postgresFactory])('assistant versions (%o)', (makeFactory) => {
  const factory = makeFactory();
  let store: EngineStorage;
  beforeAll(async () => {
    store = await factory.open();
  });
  afterAll(async () => {
    await store?.close();
    await factory.cleanup();
  });

  const base = { graph_id: 'g', config: {}, context: {}, metadata: { team: 'a' }, name: 'v1', description: null };

  it('create is version 1, each patch adds one; listVersions is newest first and filters by metadata', async () => {
    const id = randomUUID();
    await store.assistants.create({ assistant_id: id, ...base }, 'raise');
    expect((await store.assistants.patch(id, { name: 'v2', metadata: { stage: 'beta' } })).version).toBe(2);
    expect((await store.assistants.patch(id, { name: 'v3', config: { recursion_limit: 5 } })).version).toBe(3);
    const versions = await store.assistants.listVersions(id, { limit: 10, offset: 0 });
    expect(versions.map((v) => [v.version, v.name])).toEqual([
      [3, 'v3'],
      [2, 'v2'],
      [1, 'v1'],
    ]);
    expect(versions[0]).toMatchObject({
      assistant_id: id,
      graph_id: 'g',
      config: { recursion_limit: 5 },
      metadata: { team: 'a', stage: 'beta' },
    });
    expect(Date.parse(versions[2]!.created_at)).toBeGreaterThan(0);
    expect(
      (await store.assistants.listVersions(id, { metadata: { stage: 'beta' }, limit: 10, offset: 0 })).map(
        (v) => v.version,
      ),
    ).toEqual([3, 2]);
    expect((await store.assistants.listVersions(id, { limit: 1, offset: 1 })).map((v) => v.version)).toEqual([2]);
  });

  it('setLatest brings an earlier version back; the next patch is newest + 1', async () => {
    const id = randomUUID();
    await store.assistants.create({ assistant_id: id, ...base }, 'raise');
    await store.assistants.patch(id, { name: 'v2', config: { x: 1 } });
    const back = await store.assistants.setLatest(id, 1);
    expect(back).toMatchObject({ version: 1, name: 'v1', config: {} });
    expect(await store.assistants.get(id)).toMatchObject({ version: 1, name: 'v1' });
    expect((await store.assistants.patch(id, { name: 'v3' })).version).toBe(3);
    await expect(store.assistants.setLatest(id, 9)).rejects.toBeInstanceOf(NotFoundError);
    await expect(store.assistants.setLatest(randomUUID(), 1)).rejects.toBeInstanceOf(NotFoundError);
    await expect(store.assistants.listVersions(randomUUID(), { limit: 10, offset: 0 })).rejects.toBeInstanceOf(
      NotFoundError,
    );
  });

  it('system assistants have a version; deleting an assistant deletes its versions', async () => {
    const id = randomUUID();
    await store.assistants.upsertSystem({ assistant_id: id, ...base, metadata: { created_by: 'system' } });
    await store.assistants.upsertSystem({ assistant_id: id, ...base, metadata: { created_by: 'system', again: true } });
    expect(
      (await store.assistants.listVersions(id, { limit: 10, offset: 0 })).map((v) => [v.version, v.metadata]),
    ).toEqual([[1, { created_by: 'system', again: true }]]);
    await store.assistants.delete(id);
    await store.assistants.create({ assistant_id: id, ...base }, 'raise');
    expect((await store.assistants.listVersions(id, { limit: 10, offset: 0 })).map((v) => v.version)).toEqual([1]);
  });
});

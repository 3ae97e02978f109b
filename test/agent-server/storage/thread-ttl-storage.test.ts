// Thread TTL sweeps at the store level (storage/thread-ttl.ts), both stores: which threads a sweep deletes or prunes
// (strategy per thread), that an idle keep_latest thread is pruned once, and that databases made before the
// strategy columns open and sweep.
import { randomUUID } from 'node:crypto';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import Database from 'better-sqlite3';
import pg from 'pg';
import { afterAll, describe, expect, it } from 'vitest';
import { openEmbeddedStorage } from '../../../src/agent-server/storage/embedded/index.ts';
import { openPostgresStorage } from '../../../src/agent-server/storage/postgres/index.ts';
import type { ThreadTtlConfig } from '../../../src/agent-server/storage/thread-ttl.ts';
import type { Storage } from '../../../src/agent-server/storage/types.ts';
import { createTestDatabase } from '../helpers/pg.ts';

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));
/** Threads created under the default expire after 60 ms; the background sweeper never fires during a test. */
const KEEP_LATEST: ThreadTtlConfig = {
  defaultMinutes: 0.001,
  strategy: 'keep_latest',
  sweepMinutes: 10_000,
  sweepLimit: 1000,
};

interface Backend {
  open(ttl: ThreadTtlConfig): Promise<Storage>;
  /** Drops the columns the keep_latest strategy added and the record of schema steps, as in a database made before
   * both (store closed). */
  dropNewColumns(): Promise<void>;
  cleanup(): Promise<void>;
}

function embedded(): Backend {
  const dir = mkdtempSync(join(tmpdir(), 'ap-as-ttl-store-'));
  return {
    open: async (threadTtl) => openEmbeddedStorage({ dataDir: dir, threadTtl }),
    dropNewColumns: async () => {
      const db = new Database(join(dir, 'agentplane.sqlite'));
      db.exec('ALTER TABLE ap_threads DROP COLUMN ttl_strategy');
      db.exec('ALTER TABLE ap_threads DROP COLUMN ttl_pruned_updated_at');
      db.exec('DROP TABLE schema_migrations');
      db.close();
    },
    cleanup: async () => rmSync(dir, { recursive: true, force: true }),
  };
}

function postgres(): Backend {
  let db: Awaited<ReturnType<typeof createTestDatabase>> | undefined;
  return {
    open: async (threadTtl) => {
      db ??= await createTestDatabase();
      return openPostgresStorage({ databaseUrl: db.url, poolSize: 4, threadTtl });
    },
    dropNewColumns: async () => {
      const c = new pg.Client({ connectionString: db!.url });
      await c.connect();
      try {
        await c.query('ALTER TABLE agentplane.threads DROP COLUMN ttl_strategy, DROP COLUMN ttl_pruned_updated_at');
        await c.query('DROP TABLE IF EXISTS agentplane.schema_migrations');
      } finally {
        await c.end();
      }
    },
    cleanup: async () => db?.drop(),
  };
}

describe.each([
  ['embedded', embedded],
  ['postgres', postgres],
] as const)('thread ttl sweeps (%s)', (_name, make) => {
  const backend = make();
  afterAll(() => backend.cleanup());

  it('prunes an expired keep_latest thread once per update, deletes one with a ttl of its own', async () => {
    const store = await backend.open(KEEP_LATEST);
    try {
      const kept = await store.threads.create({ thread_id: randomUUID(), metadata: {} }, 'raise');
      const own = await store.threads.create({ thread_id: randomUUID(), metadata: {}, ttl_minutes: 0.001 }, 'raise');
      await sleep(150);
      const first = await store.threads.sweepExpired(1000);
      expect(first.pruned).toContain(kept.thread_id);
      expect(first.deleted).toContain(own.thread_id);
      expect(first.deleted).not.toContain(kept.thread_id);
      expect(await store.threads.get(own.thread_id)).toBeNull();
      expect(await store.threads.get(kept.thread_id)).toEqual(kept);

      // Idle since: later sweeps leave it alone.
      await sleep(150);
      const again = await store.threads.sweepExpired(1000);
      expect(again.pruned).not.toContain(kept.thread_id);
      expect(again.deleted).not.toContain(kept.thread_id);
      expect(await store.threads.get(kept.thread_id)).toEqual(kept);

      // Updated, then idle for its ttl again: pruned again.
      await store.threads.patch(kept.thread_id, { metadata: { touched: true } });
      expect((await store.threads.sweepExpired(1000)).pruned).not.toContain(kept.thread_id);
      await sleep(150);
      expect((await store.threads.sweepExpired(1000)).pruned).toContain(kept.thread_id);
      expect((await store.threads.sweepExpired(1000)).pruned).not.toContain(kept.thread_id);

      // A ttl of its own (PATCH) has strategy delete.
      await store.threads.patch(kept.thread_id, { ttl_minutes: 0.001 });
      await sleep(150);
      expect((await store.threads.sweepExpired(1000)).deleted).toContain(kept.thread_id);
      expect(await store.threads.get(kept.thread_id)).toBeNull();
    } finally {
      await store.close();
    }
  });

  it('opens a database made before the strategy columns; its threads keep strategy delete', async () => {
    const old = await backend.open({ ...KEEP_LATEST, strategy: 'delete' });
    const before = await old.threads.create({ thread_id: randomUUID(), metadata: {} }, 'raise');
    const lasting = await old.threads.create({ thread_id: randomUUID(), metadata: {}, ttl_minutes: 1000 }, 'raise');
    await old.threads.patch(lasting.thread_id, { metadata: { x: 1 } });
    await old.close();
    await backend.dropNewColumns();

    const store = await backend.open(KEEP_LATEST);
    try {
      const after = await store.threads.create({ thread_id: randomUUID(), metadata: {} }, 'raise');
      await sleep(150);
      const swept = await store.threads.sweepExpired(1000);
      expect(swept.deleted).toContain(before.thread_id);
      expect(swept.pruned).toContain(after.thread_id);
      expect(await store.threads.get(after.thread_id)).not.toBeNull();
      expect(swept.deleted).not.toContain(lasting.thread_id);
      expect((await store.threads.search({ metadata: { x: 1 } })).map((t) => t.thread_id)).toContain(lasting.thread_id);
    } finally {
      await store.close();
    }
  });
});

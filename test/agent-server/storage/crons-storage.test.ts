// The cron store on both adapters: records, filters, and `fire` claiming a tick exactly once with its run (on
// Postgres also from many connections at once, the way replicas race).
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { randomUUID } from 'node:crypto';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { openEmbeddedStorage } from '../../../src/agent-server/storage/embedded/index.ts';
import { openPostgresStorage } from '../../../src/agent-server/storage/postgres/index.ts';
import { isoNow } from '../../../src/agent-server/storage/common.ts';
import type { NewCron, NewRun } from '../../../src/agent-server/storage/types.ts';
import type { EngineStorage } from '../../../src/agent-server/storage/ports/run-queue.ts';
import { NotFoundError } from '../../../src/lib/errors.ts';
import { createTestDatabase } from '../helpers/pg.ts';

const ASSISTANT = '11111111-1111-5111-8111-111111111111';

function newCron(extra: Partial<NewCron> = {}): NewCron {
  return {
    cron_id: randomUUID(),
    assistant_id: ASSISTANT,
    thread_id: null,
    on_run_completed: 'keep',
    end_time: null,
    schedule: '* * * * *',
    timezone: null,
    payload: { input: { n: 1 } },
    user_id: null,
    next_run_date: isoNow(Date.now() - 1_000),
    metadata: {},
    owner_metadata: {},
    owner_auth: null,
    enabled: true,
    ...extra,
  };
}

function newRun(threadId: string, extra: Partial<NewRun> = {}): NewRun {
  return {
    run_id: randomUUID(),
    thread_id: threadId,
    assistant_id: ASSISTANT,
    metadata: {},
    kwargs: { input: { n: 1 } },
    multitask_strategy: 'reject',
    if_not_exists: 'create',
    thread_metadata: { graph_id: 'g' },
    ...extra,
  };
}

type Opened = { store: EngineStorage; more?: () => Promise<EngineStorage>; cleanup: () => Promise<void> };

async function embedded(): Promise<Opened> {
  const dir = mkdtempSync(join(tmpdir(), 'ap-as-crons-store-'));
  const store = openEmbeddedStorage({ dataDir: dir });
  return {
    store,
    cleanup: async () => {
      await store.close();
      rmSync(dir, { recursive: true, force: true });
    },
  };
}

async function postgres(): Promise<Opened> {
  const db = await createTestDatabase();
  const opened: EngineStorage[] = [];
  const open = async () => {
    const s = await openPostgresStorage({ databaseUrl: db.url, poolSize: 6 });
    opened.push(s);
    return s;
  };
  const store = await open();
  return {
    store,
    more: open,
    cleanup: async () => {
      for (const s of opened) await s.close();
      await db.drop();
    },
  };
}

describe.each([
  ['embedded', embedded],
  ['postgres', postgres],
] as const)('cron store (%s)', (_name, open) => {
  let o: Opened;
  beforeAll(async () => {
    o = await open();
  });
  afterAll(async () => o?.cleanup());

  it('creates, reads, filters, patches and deletes', async () => {
    const thread = randomUUID();
    await o.store.threads.create({ thread_id: thread, metadata: {} }, 'raise');
    const a = await o.store.crons.create(
      newCron({
        metadata: { owner: 'a' },
        owner_metadata: { owner: 'a' },
        owner_auth: { user: { identity: 'a' }, permissions: ['p'] },
      }),
    );
    const b = await o.store.crons.create(newCron({ thread_id: thread, enabled: false }));
    expect(a).toMatchObject({
      cron_id: a.cron_id,
      metadata: { owner: 'a' },
      owner_metadata: { owner: 'a' },
      enabled: true,
      owner_auth: { user: { identity: 'a' }, permissions: ['p'] },
    });
    expect((await o.store.crons.get(a.cron_id))?.owner_auth).toEqual({ user: { identity: 'a' }, permissions: ['p'] });
    expect((await o.store.crons.get(b.cron_id))?.thread_id).toBe(thread);
    expect((await o.store.crons.search({ metadata: { owner: 'a' } })).map((c) => c.cron_id)).toEqual([a.cron_id]);
    expect(await o.store.crons.count({ thread_id: thread })).toBe(1);
    expect(await o.store.crons.count({ enabled: false })).toBe(1);
    const due = (await o.store.crons.due(100)).map((c) => c.cron_id);
    expect(due).toContain(a.cron_id);
    expect(due).not.toContain(b.cron_id);
    const p = await o.store.crons.patch(a.cron_id, { enabled: false, schedule: '0 * * * *' });
    expect(p).toMatchObject({ enabled: false, schedule: '0 * * * *', metadata: { owner: 'a' } });
    await o.store.crons.delete(a.cron_id);
    await o.store.crons.delete(b.cron_id);
    await expect(o.store.crons.delete(a.cron_id)).rejects.toBeInstanceOf(NotFoundError);
    await expect(o.store.crons.patch(a.cron_id, {})).rejects.toBeInstanceOf(NotFoundError);
  });

  it('fires a tick once: the claim moves next_run_date on and creates the run in one go', async () => {
    const cron = await o.store.crons.create(newCron());
    const next = isoNow(Date.now() + 60_000);
    const thread = randomUUID();
    const tick = { cron_id: cron.cron_id, due: cron.next_run_date!, next, run: newRun(thread) };
    const first = await o.store.crons.fire(tick);
    expect(first.kind).toBe('fired');
    expect((await o.store.runs.getById(tick.run.run_id))?.status).toBe('pending');
    expect((await o.store.crons.get(cron.cron_id))?.next_run_date).toBe(next);
    // The same tick again (a replica that read it before the claim): taken, no second run.
    expect((await o.store.crons.fire({ ...tick, run: newRun(randomUUID()) })).kind).toBe('taken');
    await o.store.crons.delete(cron.cron_id);
  });

  it('skips a tick whose run is refused, and one without a run, keeping the claim', async () => {
    const thread = randomUUID();
    await o.store.threads.create({ thread_id: thread, metadata: {} }, 'raise');
    await o.store.queue.create(newRun(thread, { if_not_exists: 'reject' }));
    const cron = await o.store.crons.create(newCron({ thread_id: thread }));
    const busy = newRun(thread, { if_not_exists: 'reject' });
    const next = isoNow(Date.now() + 60_000);
    const r = await o.store.crons.fire({ cron_id: cron.cron_id, due: cron.next_run_date!, next, run: busy });
    expect(r).toMatchObject({ kind: 'skipped' });
    expect(await o.store.runs.getById(busy.run_id)).toBeNull();
    expect((await o.store.crons.get(cron.cron_id))?.next_run_date).toBe(next);
    const none = await o.store.crons.fire({
      cron_id: cron.cron_id,
      due: next,
      next: null,
      run: null,
      reason: 'assistant gone',
    });
    expect(none).toEqual({ kind: 'skipped', reason: 'assistant gone' });
    expect((await o.store.crons.get(cron.cron_id))?.next_run_date).toBeNull();
    await o.store.crons.delete(cron.cron_id);
  });

  it('gives a tick to exactly one of many racing firers', async () => {
    const stores = [o.store, ...(o.more ? [await o.more(), await o.more()] : [])];
    const cron = await o.store.crons.create(newCron());
    const tick = { cron_id: cron.cron_id, due: cron.next_run_date!, next: isoNow(Date.now() + 60_000) };
    const results = await Promise.all(
      Array.from({ length: 12 }, (_, i) =>
        stores[i % stores.length]!.crons.fire({ ...tick, run: newRun(randomUUID()) }),
      ),
    );
    expect(results.filter((r) => r.kind === 'fired')).toHaveLength(1);
    expect(results.filter((r) => r.kind === 'taken')).toHaveLength(11);
    await o.store.crons.delete(cron.cron_id);
  });
});

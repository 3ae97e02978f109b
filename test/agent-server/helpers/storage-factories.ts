// The two storage adapters as the contract tests open them, and a run for them to create.
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { randomUUID } from 'node:crypto';
import { openEmbeddedStorage } from '../../../src/agent-server/storage/embedded/index.ts';
import { openPostgresStorage } from '../../../src/agent-server/storage/postgres/index.ts';
import type { NewRun } from '../../../src/agent-server/storage/types.ts';
import type { EngineStorage } from '../../../src/agent-server/storage/ports/run-queue.ts';
import { createTestDatabase } from './pg.ts';

export type Factory = { name: string; open: () => Promise<EngineStorage>; cleanup: () => Promise<void> };

export function embeddedFactory(): Factory {
  const dir = mkdtempSync(join(tmpdir(), 'ap-as-contract-'));
  return {
    name: 'embedded',
    open: async () => openEmbeddedStorage({ dataDir: dir }),
    cleanup: async () => rmSync(dir, { recursive: true, force: true }),
  };
}

export function postgresFactory(): Factory {
  let db: Awaited<ReturnType<typeof createTestDatabase>> | undefined;
  return {
    name: 'postgres',
    open: async () => {
      db ??= await createTestDatabase();
      return openPostgresStorage({ databaseUrl: db.url, poolSize: 8 });
    },
    cleanup: async () => db?.drop(),
  };
}

export const ASSISTANT = '11111111-1111-5111-8111-111111111111';

export function newRun(threadId: string, extra: Partial<NewRun> = {}): NewRun {
  return {
    run_id: randomUUID(),
    thread_id: threadId,
    assistant_id: ASSISTANT,
    metadata: {},
    kwargs: { input: { n: 1 } },
    multitask_strategy: 'reject',
    if_not_exists: 'reject',
    thread_metadata: { graph_id: 'g' },
    ...extra,
  };
}

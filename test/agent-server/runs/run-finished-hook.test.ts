// The engine's run-finished notice (what sends webhooks) for a run that ends without its worker: the sweep that ends
// it after its last attempt tells the hook once, with the stored error.
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { randomUUID } from 'node:crypto';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { loadGraphs } from '../../../src/agent-server/graphs/index.ts';
import { RunEngine } from '../../../src/agent-server/runs/engine.ts';
import { openEmbeddedStorage } from '../../../src/agent-server/storage/embedded/index.ts';
import { type RunOutcome, type RunRecord } from '../../../src/agent-server/storage/types.ts';
import { MAX_ATTEMPTS, type EngineStorage } from '../../../src/agent-server/storage/ports/run-queue.ts';
import { silentLogger } from '../../../src/lib/logger.ts';
import { FIXTURE_CONFIG } from '../helpers/harness.ts';

describe('run-finished hook', () => {
  let dir: string;
  let storage: EngineStorage;

  beforeAll(() => {
    dir = mkdtempSync(join(tmpdir(), 'ap-as-hook-'));
    storage = openEmbeddedStorage({ dataDir: dir });
  });
  afterAll(async () => {
    await storage.close();
    rmSync(dir, { recursive: true, force: true });
  });

  it('fires once for a run the sweep ends after its last attempt', async () => {
    const thread_id = randomUUID();
    const run = await storage.queue.create({
      run_id: randomUUID(),
      thread_id,
      assistant_id: randomUUID(),
      metadata: {},
      kwargs: { webhook: 'https://example.com/h' },
      multitask_strategy: 'reject',
      if_not_exists: 'create',
      thread_metadata: {},
    });
    // A worker that claims the run and vanishes, every attempt.
    for (let i = 1; i <= MAX_ATTEMPTS; i++) {
      expect((await storage.queue.claim('ghost', 1))?.run_id).toBe(run.run_id);
      await new Promise((r) => setTimeout(r, 5));
      if (i < MAX_ATTEMPTS) expect((await storage.queue.sweep(MAX_ATTEMPTS)).requeued).toEqual([run.run_id]);
    }
    const seen: Array<{ run: RunRecord; outcome: RunOutcome }> = [];
    const engine = new RunEngine({
      storage,
      graphs: await loadGraphs(FIXTURE_CONFIG, { logger: silentLogger() }),
      logger: silentLogger(),
      concurrency: 1,
      runTimeoutMs: 60_000,
      onRunFinished: (r, outcome) => seen.push({ run: r, outcome }),
    });
    await engine.start();
    await expect.poll(() => seen.length, { timeout: 10_000 }).toBe(1);
    await engine.stop(1_000);
    expect(seen[0]!.run.run_id).toBe(run.run_id);
    expect(seen[0]!.outcome).toMatchObject({ status: 'error', error: { error: 'WorkerLost' } });
  });
});

// The claims that ride on other writes: RunEngine.createRun (a run created through a process with a free slot is
// claimed in its create and started there; a process without one leaves it to the queue; a run claimed while the
// process stops goes back to the queue) and finishAndClaim (the slot a finished run frees takes the next run in the
// write that stores the end). The queue's create is watched for the claim the engine asks for.
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { randomUUID } from 'node:crypto';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { loadGraphs, type GraphRegistry } from '../../../src/agent-server/graphs/index.ts';
import { RunEngine } from '../../../src/agent-server/runs/engine.ts';
import { openEmbeddedStorage } from '../../../src/agent-server/storage/embedded/index.ts';
import type { NewRun } from '../../../src/agent-server/storage/types.ts';
import type { ClaimRequest, EngineStorage } from '../../../src/agent-server/storage/ports/run-queue.ts';
import { silentLogger } from '../../../src/lib/logger.ts';
import { FIXTURE_CONFIG } from '../helpers/harness.ts';

function slowRun(delayMs: number): NewRun {
  const thread_id = randomUUID();
  return {
    run_id: randomUUID(),
    thread_id,
    assistant_id: randomUUID(),
    metadata: {},
    kwargs: { input: { delay_ms: delayMs, mark: 'x' }, config: { configurable: { graph_id: 'slow' } } },
    multitask_strategy: 'reject',
    if_not_exists: 'create',
    thread_metadata: {},
  };
}

describe('claim at create', () => {
  let dir: string;
  let storage: EngineStorage;
  let graphs: GraphRegistry;
  /** The claim each queue create was asked for (undefined: none), in order; `onCreate` runs after each. */
  const asked: Array<ClaimRequest | undefined> = [];
  let onCreate: (() => void) | undefined;

  beforeAll(async () => {
    dir = mkdtempSync(join(tmpdir(), 'ap-as-claim-create-'));
    storage = openEmbeddedStorage({ dataDir: dir });
    graphs = await loadGraphs(FIXTURE_CONFIG, { logger: silentLogger() });
    const create = storage.queue.create.bind(storage.queue);
    storage.queue.create = async (run, claim) => {
      asked.push(claim);
      const created = await create(run, claim);
      onCreate?.();
      return created;
    };
  });
  afterAll(async () => {
    await storage.close();
    rmSync(dir, { recursive: true, force: true });
  });

  it('starts the run it created while a slot is free, queues the next, and runs both', async () => {
    const engine = new RunEngine({ storage, graphs, logger: silentLogger(), concurrency: 1, runTimeoutMs: 60_000 });
    await engine.start();
    const claims: string[] = [];
    const inner = storage.queue.claim.bind(storage.queue);
    storage.queue.claim = async (...args) => {
      const r = await inner(...args);
      if (r) claims.push(r.run_id);
      return r;
    };
    const innerFinish = storage.queue.finishAndClaim.bind(storage.queue);
    storage.queue.finishAndClaim = async (...args) => {
      const r = await innerFinish(...args);
      if (r.next) claims.push(`${r.next.run_id} as ${args[0]} finished`);
      return r;
    };
    try {
      const a = await engine.createRun(slowRun(300));
      expect(asked.pop()).toEqual({ workerId: engine.workerId, leaseMs: expect.any(Number) });
      expect(a).toMatchObject({ status: 'running', worker_id: engine.workerId, attempt: 1 });
      expect(engine.runningCount).toBe(1);
      // The only slot is taken: the next run waits in the queue and is claimed once the first is done.
      const b = await engine.createRun(slowRun(0));
      expect(asked.pop()).toBeUndefined();
      expect(b.status).toBe('pending');
      for (const r of [a, b]) {
        await expect
          .poll(async () => (await storage.runs.get(r.thread_id, r.run_id))?.status, { timeout: 10_000 })
          .toBe('success');
      }
      // a never went through a claim; b was claimed for the slot a freed, in the write that stored a's end.
      expect(claims).toEqual([`${b.run_id} as ${a.run_id} finished`]);
    } finally {
      storage.queue.claim = inner;
      storage.queue.finishAndClaim = innerFinish;
      await engine.stop(1_000);
    }
  });

  it('asks for no claim when it runs nothing (not started) or is stopping', async () => {
    const idle = new RunEngine({ storage, graphs, logger: silentLogger(), concurrency: 4, runTimeoutMs: 60_000 });
    idle.listen();
    const r = await idle.createRun(slowRun(0));
    expect(asked.pop()).toBeUndefined();
    expect(r.status).toBe('pending');

    const engine = new RunEngine({ storage, graphs, logger: silentLogger(), concurrency: 4, runTimeoutMs: 60_000 });
    await engine.start();
    // stop() begins while the create is on its way: the claimed run is given back, not started.
    let stopped: Promise<void> | undefined;
    onCreate = () => (stopped = engine.stop(1_000));
    const late = await engine.createRun(slowRun(0)).finally(() => (onCreate = undefined));
    expect(asked.pop()).toBeDefined();
    await stopped;
    expect(late.status).toBe('pending');
    expect(engine.runningCount).toBe(0);
    expect(await storage.runs.get(late.thread_id, late.run_id)).toMatchObject({ status: 'pending', attempt: 0 });
  });
});

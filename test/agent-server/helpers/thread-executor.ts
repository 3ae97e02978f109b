// A ThreadExecutor of one thread on the fixture graphs and an embedded store in a temp folder, closed and removed
// after each test of the suite that asks for it.
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterEach } from 'vitest';
import type { RunExecutor } from '../../../src/agent-server/runs/executor.ts';
import { ThreadExecutor } from '../../../src/agent-server/runs/thread-executor.ts';
import { openEmbeddedStorage } from '../../../src/agent-server/storage/embedded/index.ts';
import type { Logger } from '../../../src/lib/logger.ts';
import { silentLogger } from '../../../src/lib/logger.ts';
import { FIXTURE_CONFIG } from './harness.ts';

export interface ThreadExecutorOptions {
  /** The engine's own executor, for runs given before the thread is ready. */
  inline: RunExecutor;
  logger?: Logger;
  youngMb?: number;
  /** A langgraph.json path, or a function of the temp folder giving one (e.g. one that does not exist). */
  configPath?: string | ((dir: string) => string);
}

/** Registers the cleanup; the returned function starts an executor (not waiting for its thread). */
export function useThreadExecutor(): (opts: ThreadExecutorOptions) => ThreadExecutor {
  const started: Array<() => Promise<void>> = [];
  afterEach(async () => {
    for (const stop of started.splice(0)) await stop();
  });
  return (opts) => {
    const dir = mkdtempSync(join(tmpdir(), 'ap-thread-executor-'));
    const storage = openEmbeddedStorage({ dataDir: dir });
    const configPath =
      typeof opts.configPath === 'function' ? opts.configPath(dir) : (opts.configPath ?? FIXTURE_CONFIG);
    const executor = ThreadExecutor.start(
      1,
      { configPath, source: storage.checkpointerSource, poolSize: 2, youngMb: opts.youngMb },
      opts.logger ?? silentLogger(),
      opts.inline,
    );
    started.push(async () => {
      await executor.close();
      await storage.close();
      rmSync(dir, { recursive: true, force: true });
    });
    return executor;
  };
}

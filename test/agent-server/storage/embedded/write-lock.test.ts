// WriteLock (storage/embedded/write-lock.ts): the threads of one process that write the embedded store's file take
// turns through a word of shared memory instead of meeting SQLite's busy handler, which sleeps 1, 2, 5 ms... Real
// worker threads hold the lock while the test's thread asks for it.
import { mkdtemp, rm } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { describe, expect, it } from 'vitest';
import { openEmbeddedStorage } from '../../../../src/agent-server/storage/embedded/index.ts';
import { WriteLock } from '../../../../src/agent-server/storage/embedded/write-lock.ts';
import { onThread } from '../../helpers/on-thread.ts';

const MODULE = 'agent-server/storage/embedded/write-lock.ts';
/** Flags the worker and the test share: [0] the worker holds the lock, [1] the test asks for it, [2] the worker's write ended. */
const HOLDS = 0;
const ASKED = 1;
const ENDED = 2;

/** Resolves once flags[i] is non-zero (the worker starts on this thread's event loop: no blocking here). */
async function waitFor(flags: Int32Array, i: number): Promise<void> {
  const deadline = Date.now() + 30_000;
  while (Atomics.load(flags, i) === 0) {
    if (Date.now() > deadline) throw new Error(`flag ${i} never set`);
    await new Promise((r) => setTimeout(r, 5));
  }
}

describe('WriteLock between threads', () => {
  it('a thread that finds the lock taken runs its write only after the holder let go', async () => {
    const lock = new WriteLock(undefined, 60_000);
    const flags = new Int32Array(new SharedArrayBuffer(12));
    const worker = onThread(
      MODULE,
      ['WriteLock'],
      `const lock = new WriteLock(workerData.lock);
       const flags = new Int32Array(workerData.flags);
       lock.write(() => {
         Atomics.store(flags, 0, 1);
         Atomics.notify(flags, 0);
         // Held until the test's thread is asking, and a while after (it must be waiting, not writing).
         while (Atomics.load(flags, 1) === 0) Atomics.wait(flags, 1, 0, 50);
         const until = Date.now() + 100;
         while (Date.now() < until);
         Atomics.store(flags, 2, 1);
       });
       return 'done';`,
      undefined,
      { workerData: { lock: lock.buffer, flags: flags.buffer } },
    );
    await waitFor(flags, HOLDS);
    Atomics.store(flags, ASKED, 1);
    Atomics.notify(flags, ASKED);
    // Synchronous, as the store's transactions are: without the lock this would run during the worker's write.
    const seen = lock.write(() => Atomics.load(flags, ENDED));
    expect(seen).toBe(1);
    expect(await worker).toBe('done');
    expect(new Int32Array(lock.buffer)[0]).toBe(0);
  });

  it('nested writes on one thread, also through another WriteLock of the same buffer, do not wait on themselves', () => {
    const a = new WriteLock(undefined, 60_000);
    const b = new WriteLock(a.buffer, 60_000);
    expect(a.write(() => b.write(() => a.write(() => 'inner')))).toBe('inner');
    expect(new Int32Array(a.buffer)[0]).toBe(0);
    // A write that throws lets go too.
    expect(() =>
      a.write(() =>
        b.write(() => {
          throw new Error('rolled back');
        }),
      ),
    ).toThrow('rolled back');
    expect(new Int32Array(a.buffer)[0]).toBe(0);
  });

  it('a thread that ended holding the lock: releaseHeldBy frees it; until then others wait at most maxWaitMs', async () => {
    const buffer = new SharedArrayBuffer(8);
    let threadId = -1;
    const out = await onThread(
      MODULE,
      ['WriteLock'],
      // Ends the thread inside the write: its finally never runs, as when an executor thread is terminated.
      `new WriteLock(workerData.lock).write(() => process.exit(3));`,
      undefined,
      { workerData: { lock: buffer }, started: (w) => (threadId = w.threadId) },
    );
    expect(out).toEqual({ exited: 3 });
    expect(new Int32Array(buffer)[0]).toBe(threadId + 1);

    // Still held by the gone thread: a write goes on without the lock after maxWaitMs and takes nothing.
    const impatient = new WriteLock(buffer, 30);
    expect(impatient.write(() => 'went on')).toBe('went on');
    expect(new Int32Array(buffer)[0]).toBe(threadId + 1);

    // Another thread's id frees nothing; the holder's does.
    expect(WriteLock.releaseHeldBy(buffer, threadId + 1000)).toBe(false);
    expect(WriteLock.releaseHeldBy(buffer, threadId)).toBe(true);
    expect(new Int32Array(buffer)[0]).toBe(0);
    const patient = new WriteLock(buffer, 60_000);
    expect(patient.write(() => new Int32Array(buffer)[0])).not.toBe(0);
    expect(new Int32Array(buffer)[0]).toBe(0);
  });
});

describe('the embedded store and its executor threads', () => {
  it("share the file's lock: a checkpoint written on another thread waits while this one holds it", async () => {
    const dir = await mkdtemp(path.join(os.tmpdir(), 'ap-write-lock-'));
    const storage = openEmbeddedStorage({ dataDir: dir });
    try {
      const source = storage.checkpointerSource;
      if (source.kind !== 'embedded' || !source.writeLock) throw new Error('no write lock in the source');
      const flags = new Int32Array(new SharedArrayBuffer(12));
      // As an executor thread does: its own connections from the source, then a checkpoint written through them.
      const worker = onThread(
        'agent-server/storage/connections.ts',
        ['openStoreConnections'],
        `const { checkpointer, close } = await openStoreConnections(workerData.source, 1);
         const flags = new Int32Array(workerData.flags);
         Atomics.store(flags, 0, 1);
         while (Atomics.load(flags, 1) === 0) Atomics.wait(flags, 1, 0, 50);
         const checkpoint = { v: 1, id: 'cp-1', ts: new Date().toISOString(), channel_values: {}, channel_versions: {},
           versions_seen: {} };
         await checkpointer.put({ configurable: { thread_id: 't-1', checkpoint_ns: '' } }, checkpoint,
           { source: 'input', step: -1, parents: {} }, {});
         Atomics.store(flags, 2, 1);
         Atomics.notify(flags, 2);
         await close();
         return 'written';`,
        undefined,
        { workerData: { source, flags: flags.buffer } },
      );
      await waitFor(flags, HOLDS);
      let during = -1;
      new WriteLock(source.writeLock, 60_000).write(() => {
        Atomics.store(flags, ASKED, 1);
        Atomics.notify(flags, ASKED);
        // Without the shared lock the other thread's commit would land in here.
        Atomics.wait(flags, ENDED, 0, 300);
        during = Atomics.load(flags, ENDED);
      });
      expect(during).toBe(0);
      expect(await worker).toBe('written');
      const tuple = await storage.checkpointer.getTuple({ configurable: { thread_id: 't-1', checkpoint_ns: '' } });
      expect(tuple?.checkpoint.id).toBe('cp-1');
    } finally {
      await storage.close();
      await rm(dir, { recursive: true, force: true });
    }
  });
});

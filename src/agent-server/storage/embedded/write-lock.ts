// The embedded store's file has one writer at a time (SQLite), and one process writes it from several threads: the
// HTTP thread (runs, threads, its own checkpoints) and each executor thread (checkpoints, store items), each with its
// own connection. When two of them start a write transaction at once, SQLite's busy handler makes the second one
// sleep, 1 ms at first, then 2, 5, 10 ms..., and a sleeping HTTP thread answers nobody. At 32 clients that happened
// about 40 times a second on each thread.
//
// WriteLock is the same rule kept between this process's threads with a word of shared memory: a thread that finds
// the file's lock taken waits on it (Atomics.wait) and wakes as soon as the holder lets go. SQLite still locks the
// file as before; this only decides which thread of the process goes first. Its write transactions are synchronous
// (nothing else runs on the thread while one is open), so a holder always lets go soon. A thread that waited
// MAX_WAIT_MS goes on without it and meets SQLite's busy_timeout as before (a thread that ended while it held the
// lock is released by whoever saw it end: releaseHeldBy).
import { threadId } from 'node:worker_threads';

/** [0]: 0 when free, else the holder's threadId + 1; [1]: how many threads wait. */
const STATE = 0;
const WAITERS = 1;
const MAX_WAIT_MS = 2_000;

const me = threadId + 1;

export class WriteLock {
  private readonly words: Int32Array;
  /** Nested write() calls on this thread (the inner ones run under the outer one's lock). */
  private depth = 0;

  /**
   * A new lock, or the one whose shared buffer another thread made (`buffer`, as it came in workerData);
   * `maxWaitMs`: how long write() waits for it before going on without it.
   */
  constructor(
    readonly buffer: SharedArrayBuffer = new SharedArrayBuffer(8),
    private readonly maxWaitMs = MAX_WAIT_MS,
  ) {
    this.words = new Int32Array(buffer);
  }

  /** Runs `fn` (a synchronous write transaction) holding the lock. */
  write<T>(fn: () => T): T {
    if (this.depth > 0) {
      this.depth++;
      try {
        return fn();
      } finally {
        this.depth--;
      }
    }
    const held = this.acquire();
    this.depth = 1;
    try {
      return fn();
    } finally {
      this.depth = 0;
      if (held) this.release();
    }
  }

  private acquire(): boolean {
    const w = this.words;
    let holder = Atomics.compareExchange(w, STATE, 0, me);
    if (holder === 0) return true;
    // This thread holds it through another connection's WriteLock (the same buffer): inside that hold.
    if (holder === me) return false;
    const deadline = performance.now() + this.maxWaitMs;
    Atomics.add(w, WAITERS, 1);
    try {
      for (;;) {
        // Taken again after counting ourselves in: a release in between either shows here or wakes the wait.
        holder = Atomics.compareExchange(w, STATE, 0, me);
        if (holder === 0) return true;
        const left = deadline - performance.now();
        if (left <= 0) return false;
        Atomics.wait(w, STATE, holder, left);
      }
    } finally {
      Atomics.sub(w, WAITERS, 1);
    }
  }

  private release(): void {
    const w = this.words;
    // Only our own hold is released (one that timed out and went on without it holds nothing).
    if (Atomics.compareExchange(w, STATE, me, 0) === me && Atomics.load(w, WAITERS) > 0) Atomics.notify(w, STATE, 1);
  }

  /** Frees the lock if the thread `ownerThreadId` (worker.threadId) holds it: for a thread that ended holding it. */
  static releaseHeldBy(buffer: SharedArrayBuffer, ownerThreadId: number): boolean {
    const w = new Int32Array(buffer);
    if (Atomics.compareExchange(w, STATE, ownerThreadId + 1, 0) !== ownerThreadId + 1) return false;
    Atomics.notify(w, STATE, 1);
    return true;
  }
}

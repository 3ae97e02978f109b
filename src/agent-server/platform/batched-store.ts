// LangGraph wraps the store of every run in `AsyncBatchedStore` (pregel/loop.js, unconditionally), whose queue
// polls with `setTimeout(0)` for as long as the run lives, even when the graph never touches the store. With
// dozens of runs in flight that polling costs measurable CPU (bench/results/agent-server-store-ab.md). We make the
// class event-driven instead: an operation schedules one flush on the next macrotask, and everything enqueued until
// then goes to the wrapped store in one `batch` call, as before. Patched in place because the loop constructs the
// class itself; done per copy of @langchain/langgraph-checkpoint that a graph project loads, guarded by a shape
// check so that a future release that changes the class is left alone.
import { readFile } from 'node:fs/promises';
import { createRequire } from 'node:module';
import path from 'node:path';
import { pathToFileURL } from 'node:url';

const PATCHED = Symbol.for('agentplane.event-driven-batched-store');

interface Pending {
  operation: unknown;
  resolve: (value: unknown) => void;
  reject: (reason: unknown) => void;
}

/** The instance fields of AsyncBatchedStore 1.x the patch relies on. */
interface BatchedStoreLike {
  store: { batch(ops: unknown[]): Promise<unknown[]> };
  queue: Map<number, Pending>;
  nextKey: number;
  running: boolean;
  processingTask: Promise<void> | null;
}

type Proto = Record<string | symbol, unknown>;

function hasExpectedShape(proto: Proto): boolean {
  return ['start', 'stop', 'enqueueOperation', 'processBatchQueue'].every((k) => typeof proto[k] === 'function');
}

/** Sends everything queued to the wrapped store in one batch, then again while more arrived meanwhile. */
async function drain(self: BatchedStoreLike): Promise<void> {
  // Yield one macrotask so that the operations a node issues together (e.g. Promise.all) share a batch.
  await new Promise<void>((resolve) => setImmediate(resolve));
  while (self.queue.size > 0) {
    const batch = [...self.queue.values()];
    self.queue.clear();
    try {
      const results = await self.store.batch(batch.map((p) => p.operation));
      batch.forEach((p, i) => p.resolve(results[i]));
    } catch (err) {
      for (const p of batch) p.reject(err);
    }
  }
}

function schedule(self: BatchedStoreLike): void {
  if (self.processingTask) return;
  self.processingTask = drain(self).finally(() => {
    self.processingTask = null;
    // Operations enqueued while the last batch call was settling.
    if (self.queue.size > 0) schedule(self);
  });
}

/**
 * Makes one AsyncBatchedStore class event-driven. Returns false (and changes nothing) when the class does not
 * look like the 1.x implementation this was written against.
 */
export function makeBatchedStoreEventDriven(cls: unknown): boolean {
  const proto = (cls as { prototype?: Proto } | null)?.prototype;
  if (!proto) return false;
  if (proto[PATCHED]) return true;
  if (!hasExpectedShape(proto)) return false;
  proto.start = function start(this: BatchedStoreLike) {
    this.running = true;
    if (this.queue.size > 0) schedule(this);
  };
  proto.stop = async function stop(this: BatchedStoreLike) {
    this.running = false;
    // Unlike the polling loop, operations already queued are still answered.
    while (this.processingTask) await this.processingTask;
  };
  proto.enqueueOperation = function enqueueOperation(this: BatchedStoreLike, operation: unknown) {
    return new Promise((resolve, reject) => {
      this.queue.set(this.nextKey++, { operation, resolve, reject });
      if (this.running) schedule(this);
    });
  };
  proto.processBatchQueue = function processBatchQueue(this: BatchedStoreLike) {
    schedule(this);
    return this.processingTask;
  };
  Object.defineProperty(proto, PATCHED, { value: true });
  return true;
}

/**
 * Patches the copy of @langchain/langgraph-checkpoint that the given @langchain/langgraph install resolves: its ESM
 * build, and its CommonJS build when something already loaded it (a graph compiled to CommonJS). Never throws: at
 * worst runs keep the polling queue.
 */
export async function patchBatchedStoreOf(langgraphDir: string): Promise<boolean> {
  let manifestPath: string;
  try {
    manifestPath = createRequire(path.join(langgraphDir, 'package.json')).resolve(
      '@langchain/langgraph-checkpoint/package.json',
    );
  } catch {
    return false;
  }
  try {
    const dir = path.dirname(manifestPath);
    const manifest = JSON.parse(await readFile(manifestPath, 'utf8')) as { exports?: Record<string, unknown> };
    const entry = manifest.exports?.['.'] as Record<string, { default?: string } | string> | undefined;
    const esm = typeof entry?.import === 'object' ? entry.import.default : entry?.import;
    const cjs = typeof entry?.require === 'object' ? entry.require.default : entry?.require;
    let ok = false;
    if (typeof esm === 'string') {
      const mod = (await import(pathToFileURL(path.join(dir, esm)).href)) as { AsyncBatchedStore?: unknown };
      ok = makeBatchedStoreEventDriven(mod.AsyncBatchedStore);
    }
    if (typeof cjs === 'string') {
      const req = createRequire(manifestPath);
      const file = path.join(dir, cjs);
      if (req.cache[file])
        ok = makeBatchedStoreEventDriven((req(file) as { AsyncBatchedStore?: unknown }).AsyncBatchedStore) || ok;
    }
    return ok;
  } catch {
    return false;
  }
}

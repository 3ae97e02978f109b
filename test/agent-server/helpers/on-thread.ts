// Runs a piece of code on a new worker thread with a module of src/ imported, as executor threads run: the tests of
// what an executor thread installs on itself (thread-env, thread-random) check it there, not in the test's thread.
import { mkdtemp, rm, writeFile } from 'node:fs/promises';
import { createRequire } from 'node:module';
import os from 'node:os';
import path from 'node:path';
import { pathToFileURL } from 'node:url';
import { Worker } from 'node:worker_threads';

const require = createRequire(import.meta.url);

/**
 * Runs `body` (an async function body, with the named exports of `module` in scope; `module` relative to src/) on a
 * new worker thread and resolves with what it returns (structured-cloned), or with `{ exited: code }` when the thread
 * ends without returning. `workerData` is in scope too; `started` gets the Worker.
 */
export async function onThread(
  module: string,
  names: string[],
  body: string,
  env?: Record<string, string>,
  opts: { workerData?: unknown; started?: (worker: Worker) => void } = {},
): Promise<unknown> {
  const dir = await mkdtemp(path.join(os.tmpdir(), 'ap-on-thread-'));
  const file = path.join(dir, 'entry.mjs');
  // tsx's ESM entry (require.resolve gives the CommonJS one beside it).
  const tsx = pathToFileURL(require.resolve('tsx/esm/api').replace(/\.cjs$/, '.mjs')).href;
  const mod = pathToFileURL(path.resolve(import.meta.dirname, '../../../src', module)).href;
  await writeFile(
    file,
    `import { parentPort, workerData } from 'node:worker_threads';
import { register } from ${JSON.stringify(tsx)};
register();
const { ${names.join(', ')} } = await import(${JSON.stringify(mod)});
const run = async () => { ${body} };
parentPort.postMessage(await run());`,
  );
  const worker = new Worker(file, { ...(env ? { env } : {}), workerData: opts.workerData });
  opts.started?.(worker);
  try {
    return await new Promise((resolve, reject) => {
      worker.once('message', resolve);
      worker.once('error', reject);
      worker.once('exit', (code) => resolve({ exited: code }));
    });
  } finally {
    await worker.terminate();
    await rm(dir, { recursive: true, force: true });
  }
}

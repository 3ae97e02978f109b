// An executor thread (see ThreadExecutor): loads the graphs, opens its own checkpointer connection and runs
// graphs on request, relaying their events and outcome to the engine's thread as plain JSON.
import { parentPort, workerData } from 'node:worker_threads';
import { loadGraphs } from '../graphs/index.ts';
import { createLogger } from '../../lib/logger.ts';
import { ensureTypeScriptImports } from '../../lib/typescript-imports.ts';
import { installWorkerPlatform } from '../platform/index.ts';
import { loadStoreAdapter, openStoreConnections, type StoreConnections } from '../storage/connections.ts';
import { RunCheckpointer } from './checkpointer.ts';
import { installLeanRunContext } from '../shims/lean-run-context.ts';
import { useObjectEnv } from '../shims/thread-env.ts';
import { usePooledRandomValues } from '../shims/thread-random.ts';
import { InlineExecutor, type ExecResult } from './executor.ts';
import type { ToWorker, FromWorker, WorkerInit } from './executor-slots.ts';

const port = parentPort!;
const init = workerData as WorkerInit;
const post = (m: FromWorker) => port.postMessage(m);
// Messages to the engine's thread: a message costs both threads a wake-up and a structured clone, and 32 graphs at
// once send a few every millisecond. The first of an event-loop turn leaves at once (so an event is never held
// behind synchronous graph code that follows it); the others of the turn follow together in one message (FromWorker
// 'batch'), when the turn ends, or sooner once HOLD_MS have passed or HOLD_ITEMS wait (a synchronous loop that
// writes progress events still gets them out as they come). Order is kept.
const HOLD_MS = 2;
const HOLD_ITEMS = 256;
let outbox: FromWorker[] = [];
let turnStarted = false;
let heldSince = 0;
const flushOutbox = () => {
  const items = outbox;
  if (!items.length) return;
  outbox = [];
  post(items.length === 1 ? items[0]! : { type: 'batch', items });
};
const endTurn = () => {
  turnStarted = false;
  flushOutbox();
};
const send = (m: FromWorker) => {
  if (!turnStarted) {
    turnStarted = true;
    setImmediate(endTurn);
    post(m);
    return;
  }
  if (outbox.push(m) === 1) heldSince = performance.now();
  else if (outbox.length >= HOLD_ITEMS || performance.now() - heldSince > HOLD_MS) flushOutbox();
};

try {
  // First: graph modules and LangChain may keep a reference to process.env.
  useObjectEnv();
  usePooledRandomValues();
  // Graph load messages (and failures) were logged by the engine's thread already.
  const logger = createLogger({ level: init.platform ? 'fatal' : 'warn', name: 'agent-server' }).child({
    executor_thread: init.index,
  });
  // Before any graph module is imported: top-level getLogger() and new Client() must find the platform.
  if (init.platform) {
    const graphLogger = createLogger({ level: init.platform.logLevel, name: 'agent-server' }).child({
      executor_thread: init.index,
    });
    installWorkerPlatform(init.platform, graphLogger);
  }
  // The thread's env is a copy of the process's, which already holds langgraph.json's env (applying it again only
  // fills keys that are unset). A graph that failed on the engine's thread fails here too and answers its runs so.
  installLeanRunContext();
  await loadStoreAdapter(init.source);
  // Running from the bundle (this module is not TypeScript there), nothing registered tsx yet: users' graphs may
  // need it. Registered only now, after our modules and LangGraph loaded without its hooks.
  await ensureTypeScriptImports(!import.meta.url.endsWith('.ts'));
  const graphs = await loadGraphs(init.configPath, { logger, isolateFailures: true });
  // Checkpointer and memory store open on the first run: a thread that never gets one holds no connection.
  let opened: Promise<{ connections: StoreConnections; executor: InlineExecutor }> | undefined;
  let executor: InlineExecutor | undefined;
  const open = () => {
    opened ??= openStoreConnections(init.source, init.poolSize).then((connections) => {
      executor = new InlineExecutor(graphs, new RunCheckpointer(connections.checkpointer), connections.items.store);
      return { connections, executor };
    });
    // A failed open fails this run; the next run tries again.
    opened.catch(() => (opened = undefined));
    return opened.then((o) => o.executor);
  };
  const running = new Map<string, AbortController>();

  port.on('message', (m: ToWorker) => {
    switch (m.type) {
      case 'execute': {
        for (const id of m.forget ?? []) executor?.forget(id);
        const runId = m.req.run.run_id;
        const controller = new AbortController();
        running.set(runId, controller);
        // A checkpointer that cannot be opened fails this run, not the thread.
        void Promise.resolve()
          .then(() => open())
          .then((ex) =>
            ex.execute(m.req, (event, json) => send({ type: 'event', runId, event, json }), controller.signal),
          )
          .catch((err: unknown): ExecResult => ({
            ok: false,
            error: { name: (err as Error)?.name ?? 'Error', message: (err as Error)?.message ?? String(err) },
          }))
          .then((result) => {
            running.delete(runId);
            send({ type: 'result', runId, result });
          });
        break;
      }
      case 'abort':
        running.get(m.runId)?.abort(new Error(m.reason));
        break;
      case 'discard':
        executor?.discard(m.runId);
        break;
      case 'settle':
        void Promise.resolve(executor?.settle(m.runId)).then(() => send({ type: 'settled', seq: m.seq }));
        break;
      case 'forget':
        for (const id of m.runIds) executor?.forget(id);
        break;
      case 'close':
        for (const c of running.values()) c.abort(new Error('executor closing'));
        void Promise.resolve(opened?.then((o) => o.connections.close()))
          .catch(() => undefined)
          .finally(() => {
            flushOutbox();
            post({ type: 'closed' });
            port.close();
          });
        break;
    }
  });
  post({ type: 'ready' });
} catch (err) {
  post({ type: 'failed', message: (err as Error).message });
}

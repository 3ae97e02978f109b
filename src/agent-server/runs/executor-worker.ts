// An executor thread (see ThreadExecutor): loads the graphs, opens its own checkpointer connection and runs
// graphs on request, relaying their events and outcome to the engine's thread as plain JSON.
import { parentPort, workerData } from 'node:worker_threads';
import { loadGraphs } from '../graphs/index.ts';
import { createLogger } from '../../lib/logger.ts';
import { toPlain } from '../serde.ts';
import { openEmbeddedCheckpointer } from '../storage/embedded/index.ts';
import { openPostgresCheckpointer } from '../storage/postgres/index.ts';
import type { CheckpointerSource } from '../storage/types.ts';
import { RunCheckpointer } from './checkpointer.ts';
import { InlineExecutor, type ExecResult } from './executor.ts';
import type { ToWorker, FromWorker, WorkerInit } from './thread-executor.ts';

const port = parentPort!;
const init = workerData as WorkerInit;
const send = (m: FromWorker) => port.postMessage(m);

function openCheckpointer(source: CheckpointerSource) {
  return source.kind === 'embedded'
    ? openEmbeddedCheckpointer(source.file)
    : openPostgresCheckpointer(source.databaseUrl, source.schema, init.poolSize);
}

try {
  // Graph load messages were logged by the engine's thread already.
  const logger = createLogger({ level: 'warn', name: 'agent-server' }).child({ executor_thread: init.index });
  // The thread's env is a copy of the process's, which already holds langgraph.json's env (applying it again only
  // fills keys that are unset).
  const graphs = await loadGraphs(init.configPath, { logger });
  // The checkpointer opens on the first run: a thread that never gets one holds no connection.
  let opened: { checkpointer: ReturnType<typeof openCheckpointer>; executor: InlineExecutor } | undefined;
  const open = () => {
    if (!opened) {
      const checkpointer = openCheckpointer(init.source);
      opened = { checkpointer, executor: new InlineExecutor(graphs, new RunCheckpointer(checkpointer.saver)) };
    }
    return opened.executor;
  };
  const running = new Map<string, AbortController>();

  port.on('message', (m: ToWorker) => {
    switch (m.type) {
      case 'execute': {
        const runId = m.req.run.run_id;
        const controller = new AbortController();
        running.set(runId, controller);
        // A checkpointer that cannot be opened fails this run, not the thread.
        void Promise.resolve()
          .then(() => open().execute(m.req, (event, data) => send({ type: 'event', runId, event, data: toPlain(data) }),
            controller.signal))
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
        opened?.executor.discard(m.runId);
        break;
      case 'settle':
        void Promise.resolve(opened?.executor.settle(m.runId)).then(() => send({ type: 'settled', seq: m.seq }));
        break;
      case 'forget':
        opened?.executor.forget(m.runId);
        break;
      case 'close':
        for (const c of running.values()) c.abort(new Error('executor closing'));
        void Promise.resolve(opened?.checkpointer.close()).finally(() => {
          send({ type: 'closed' });
          port.close();
        });
        break;
    }
  });
  send({ type: 'ready' });
} catch (err) {
  send({ type: 'failed', message: (err as Error).message });
}

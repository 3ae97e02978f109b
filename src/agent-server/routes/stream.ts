// Server-sent events for runs: POST /threads/{id}/runs/stream, POST /runs/stream, GET .../runs/{run_id}/stream
// and its thread-less form GET /runs/{run_id}/stream (the SDK's joinStream(null, runId)).
// Events of a run executing in this process are relayed live (first event: metadata {run_id, attempt}); when
// another process runs it, the stream ends with the final values once it finishes. Heartbeat comments every 5 s.
import type { FastifyReply, FastifyRequest } from 'fastify';
import type { FastifyPluginAsyncZod } from 'fastify-type-provider-zod';
import { z } from 'zod';
import { NotFoundError } from '../../lib/errors.ts';
import { matchesFilters } from '../auth/custom.ts';
import { stringify } from '../serde.ts';
import { TERMINAL_RUN_STATUSES, type RunRecord } from '../storage/types.ts';
import type { RouteDeps } from './index.ts';
import { disconnectSignal } from './reply.ts';
import { runCaller } from './runs.ts';
import { JoinQuery, RunCreate, RunParams, ThreadParams } from './schemas.ts';

const JoinStreamQuery = JoinQuery.extend({ stream_mode: z.unknown().optional() });
const LastEventId = z.object({ 'last-event-id': z.string().regex(/^-?\d+$/).optional() }).passthrough();
const RunIdParams = RunParams.pick({ run_id: true });

export const streamRoutes = (deps: RouteDeps): FastifyPluginAsyncZod => async (app) => {
  const { storage, service, engine } = deps;

  async function streamRun(
    req: FastifyRequest,
    reply: FastifyReply,
    run: RunRecord,
    opts: { afterId: number; cancelOnDisconnect: boolean; deleteThreadAfter?: boolean },
  ): Promise<void> {
    const signal = disconnectSignal(req, reply);
    if (opts.cancelOnDisconnect) {
      signal.addEventListener('abort', () => void storage.runs.cancel(run.thread_id, run.run_id, 'interrupt').catch(() => undefined));
    }
    const location = `/threads/${run.thread_id}/runs/${run.run_id}`;
    reply.hijack();
    const res = reply.raw;
    res.writeHead(200, {
      'content-type': 'text/event-stream',
      'cache-control': 'no-cache',
      connection: 'keep-alive',
      'content-location': location,
      location: `${location}/stream`,
    });
    const send = (event: string, data: unknown, id?: number) =>
      res.write(`event: ${event}\ndata: ${stringify(data)}\n${id === undefined ? '' : `id: ${id}\n`}\n`);
    const beat = setInterval(() => res.write(': heartbeat\n\n'), 5_000);
    try {
      if (opts.afterId < 0) send('metadata', { run_id: run.run_id, attempt: Math.max(run.attempt, 1) });
      // Wait until the run starts here (live events) or ends elsewhere (final values only).
      const stop = new AbortController();
      signal.addEventListener('abort', () => stop.abort(), { once: true });
      const ended = engine.waitForRun(run.thread_id, run.run_id, stop.signal).then(() => false);
      const local = await Promise.race([engine.streams.waitOpen(run.run_id, stop.signal), ended]);
      stop.abort();
      let relayed = false;
      if (local && !signal.aborted) {
        await new Promise<void>((resolve) => {
          const unsubscribe = engine.streams.subscribe(run.run_id, opts.afterId, (e) => {
            if (e === null) return resolve();
            relayed = true;
            send(e.event, e.data, e.id);
          });
          if (!unsubscribe) return resolve();
          signal.addEventListener('abort', () => {
            unsubscribe();
            resolve();
          }, { once: true });
        });
      }
      if (signal.aborted) return;
      const final = await engine.waitForRun(run.thread_id, run.run_id);
      if (final && (final.status === 'error' || final.status === 'timeout')) {
        send('error', final.error ?? { error: 'Error', message: `Run ended with status ${final.status}` });
      } else if (!relayed && final && TERMINAL_RUN_STATUSES.has(final.status)) {
        send('values', await service.runResult(run.thread_id, final));
      }
      if (opts.deleteThreadAfter) await storage.threads.delete(run.thread_id).catch(() => undefined);
    } finally {
      clearInterval(beat);
      res.end();
    }
  }

  app.post('/threads/:thread_id/runs/stream', { schema: { params: ThreadParams, body: RunCreate } }, async (req, reply) => {
    const run = await service.createRun(req.params.thread_id, req.body, runCaller(req));
    await streamRun(req, reply, run, { afterId: -1, cancelOnDisconnect: req.body.on_disconnect === 'cancel' });
  });

  app.post('/runs/stream', { schema: { body: RunCreate } }, async (req, reply) => {
    const run = await service.createRun(null, req.body, runCaller(req));
    await streamRun(req, reply, run, {
      afterId: -1,
      cancelOnDisconnect: req.body.on_disconnect === 'cancel',
      deleteThreadAfter: req.body.on_completion !== 'keep',
    });
  });

  app.get('/threads/:thread_id/runs/:run_id/stream', {
    schema: { params: RunParams, querystring: JoinStreamQuery, headers: LastEventId },
  }, async (req, reply) => {
    const run = await storage.runs.get(req.params.thread_id, req.params.run_id);
    if (!run) throw new NotFoundError(`Run ${req.params.run_id} not found on thread ${req.params.thread_id}`);
    const last = req.headers['last-event-id'];
    await streamRun(req, reply, run, {
      afterId: last === undefined ? -1 : Number(last),
      cancelOnDisconnect: req.query.cancel_on_disconnect,
    });
  });

  app.get('/runs/:run_id/stream', {
    schema: { params: RunIdParams, querystring: JoinStreamQuery, headers: LastEventId },
  }, async (req, reply) => {
    const run = await storage.runs.getById(req.params.run_id);
    if (!run) throw new NotFoundError(`Run not found: ${req.params.run_id}`);
    // Custom auth: the run's thread must be one the caller's threads:read filter lets them see.
    const filters = req.authz?.filters;
    if (filters) {
      const thread = await storage.threads.get(run.thread_id);
      if (!thread || !matchesFilters(thread.metadata, filters)) throw new NotFoundError(`Run not found: ${req.params.run_id}`);
    }
    const last = req.headers['last-event-id'];
    await streamRun(req, reply, run, {
      afterId: last === undefined ? -1 : Number(last),
      cancelOnDisconnect: req.query.cancel_on_disconnect,
    });
  });
};

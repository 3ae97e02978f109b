// Server-sent events for runs: POST /threads/{id}/runs/stream, POST /runs/stream, GET .../runs/{run_id}/stream,
// its thread-less form GET /runs/{run_id}/stream (the SDK's joinStream(null, runId)) and GET /threads/{id}/stream
// (every run of the thread, as long as the client stays).
// Every stream is read from the run's durable event log (storage.streams), whichever process executes the run:
// events carry the log's ids, and Last-Event-ID resumes after one on any replica. A client that stops reading
// holds one page in memory; one that has not taken a byte for the stall timeout is disconnected (it can resume).
// A comment line goes out after 5 s without events, so proxies keep the connection. Thread streams and their
// modes (run_modes, lifecycle, state_update): streams/thread-events.ts. Runs started over the thread protocol
// store their events in its own form (streams/run-events.ts): these streams leave them out.
import type { FastifyReply, FastifyRequest } from 'fastify';
import type { FastifyPluginAsyncZod } from 'fastify-type-provider-zod';
import { NotFoundError } from '../../lib/errors.ts';
import { matchesFilters } from '../auth/custom.ts';
import { stringify } from '../serde.ts';
import { eventFilter, followStream, namespaceFilter } from '../streams/follow.ts';
import { isRunDone, isThreadOnly, threadEventFilter } from '../streams/thread-events.ts';
import { TERMINAL_RUN_STATUSES, type RunRecord, type StoredStreamEvent } from '../storage/types.ts';
import type { RouteDeps } from './deps.ts';
import { openSse } from './sse.ts';
import { isProtocolEventName } from '../streams/run-events.ts';
import { runCaller } from './runs.ts';
import { RunParams, ThreadParams } from '../schemas/common.ts';
import { RunCreate } from '../schemas/runs.ts';
import {
  JoinStreamQuery,
  LastEventId,
  RunIdParams,
  StreamNamespaceQuery,
  ThreadStreamQuery,
} from '../schemas/streams.ts';

export const streamRoutes =
  (deps: RouteDeps): FastifyPluginAsyncZod =>
  async (app) => {
    const { engine } = deps;
    const { runs, threads, state, streams } = deps.service;
    const stallMs = deps.streamStallMs ?? 60_000;

    /**
     * Last-Event-ID as a cursor; -1, and an id the log never issued (another store, a wiped one), replay from the
     * start.
     */
    async function cursorOf(header: string | undefined): Promise<number> {
      if (header === undefined) return -1;
      const id = Number(header);
      return id > (await streams.lastId()) ? -1 : id;
    }

    const frame = (event: string, data: string, id?: number) =>
      `event: ${event}\ndata: ${data}\n${id === undefined ? '' : `id: ${id}\n`}\n`;
    // One encoded frame per stored event, shared by every client reading it (a process's readers of a run get the
    // same event objects from the store's tail): 200 clients of a run do not make 200 copies of its stream.
    const frames = new WeakMap<StoredStreamEvent, Buffer>();
    const frameOf = (e: StoredStreamEvent): Buffer => {
      let b = frames.get(e);
      if (!b) frames.set(e, (b = Buffer.from(frame(e.event, e.data, e.id))));
      return b;
    };

    async function streamRun(
      req: FastifyRequest,
      reply: FastifyReply,
      run: RunRecord,
      opts: {
        afterId: number;
        cancelOnDisconnect: boolean;
        deleteThreadAfter?: boolean;
        modes?: string[];
        namespaces?: string[];
      },
    ): Promise<void> {
      const sse = openSse(req, reply, `/threads/${run.thread_id}/runs/${run.run_id}`, stallMs);
      if (opts.cancelOnDisconnect) {
        sse.signal.addEventListener(
          'abort',
          () => void runs.cancel(run.thread_id, run.run_id, 'interrupt').catch(() => undefined),
        );
      }
      const byMode = eventFilter(opts.modes);
      const byNamespace = namespaceFilter(opts.namespaces);
      const keep = byMode && byNamespace ? (e: string) => byMode(e) && byNamespace(e) : (byMode ?? byNamespace);
      // Set once the run is known to have ended: a stream that stops before (the server shuts down and hands the
      // run back to the queue, the store went away) is cut, so the client reconnects instead of taking it as done.
      let finished = false;
      try {
        const stop = new AbortController();
        sse.signal.addEventListener('abort', () => stop.abort(), { once: true });
        const ended = engine.waitForRun(run.thread_id, run.run_id, stop.signal, run);
        let relayed = 0;
        let sawError = false;
        for await (const page of followStream({
          streams,
          key: { run_id: run.run_id },
          afterId: opts.afterId,
          ended,
          signal: sse.signal,
        })) {
          const out: Buffer[] = [];
          for (const e of page) {
            if (e.event === 'error') sawError = true;
            if ((!keep || keep(e.event)) && !isThreadOnly(e) && !isProtocolEventName(e.event)) out.push(frameOf(e));
          }
          relayed += page.length;
          if (!(await sse.write(out))) break;
        }
        stop.abort();
        if (sse.signal.aborted) return;
        const final = await ended;
        finished = !!final && TERMINAL_RUN_STATUSES.has(final.status);
        // A run whose worker died for good ends in error without having said so; a run that never started (or
        // whose events are past retention) has no events: send what the record knows.
        if (final && (final.status === 'error' || final.status === 'timeout') && !sawError) {
          await sse.write([
            frame(
              'error',
              stringify(final.error ?? { error: 'Error', message: `Run ended with status ${final.status}` }),
            ),
          ]);
        } else if (!relayed && opts.afterId < 0 && final && TERMINAL_RUN_STATUSES.has(final.status)) {
          await sse.write([frame('metadata', stringify({ run_id: run.run_id, attempt: Math.max(final.attempt, 1) }))]);
          if (!keep || keep('values'))
            await sse.write([frame('values', stringify(await runs.result(run.thread_id, final)))]);
        }
        if (opts.deleteThreadAfter) await threads.delete(run.thread_id).catch(() => undefined);
      } finally {
        if (finished) sse.end();
        else sse.cut();
      }
    }

    app.post(
      '/threads/:thread_id/runs/stream',
      { schema: { params: ThreadParams, body: RunCreate, querystring: StreamNamespaceQuery } },
      async (req, reply) => {
        const run = await runs.create(req.params.thread_id, req.body, runCaller(req));
        await streamRun(req, reply, run, {
          afterId: -1,
          cancelOnDisconnect: req.body.on_disconnect === 'cancel',
          ...(req.query.namespace ? { namespaces: req.query.namespace } : {}),
        });
      },
    );

    app.post('/runs/stream', { schema: { body: RunCreate, querystring: StreamNamespaceQuery } }, async (req, reply) => {
      const run = await runs.create(null, req.body, runCaller(req));
      await streamRun(req, reply, run, {
        afterId: -1,
        ...(req.query.namespace ? { namespaces: req.query.namespace } : {}),
        cancelOnDisconnect: req.body.on_disconnect === 'cancel',
        deleteThreadAfter: req.body.on_completion !== 'keep',
      });
    });

    app.get(
      '/threads/:thread_id/runs/:run_id/stream',
      {
        schema: { params: RunParams, querystring: JoinStreamQuery, headers: LastEventId },
      },
      async (req, reply) => {
        const run = await runs.get(req.params.thread_id, req.params.run_id);
        if (!run) throw new NotFoundError(`Run ${req.params.run_id} not found on thread ${req.params.thread_id}`);
        await streamRun(req, reply, run, {
          afterId: await cursorOf(req.headers['last-event-id']),
          cancelOnDisconnect: req.query.cancel_on_disconnect,
          ...(req.query.stream_mode ? { modes: req.query.stream_mode } : {}),
          ...(req.query.namespace ? { namespaces: req.query.namespace } : {}),
        });
      },
    );

    app.get(
      '/runs/:run_id/stream',
      {
        schema: { params: RunIdParams, querystring: JoinStreamQuery, headers: LastEventId },
      },
      async (req, reply) => {
        const run = await runs.getById(req.params.run_id);
        if (!run) throw new NotFoundError(`Run not found: ${req.params.run_id}`);
        // Custom auth: the run's thread must be one the caller's threads:read filter lets them see.
        const filters = req.authz?.filters;
        if (filters) {
          const thread = await threads.get(run.thread_id);
          if (!thread || !matchesFilters(thread.metadata, filters))
            throw new NotFoundError(`Run not found: ${req.params.run_id}`);
        }
        await streamRun(req, reply, run, {
          afterId: await cursorOf(req.headers['last-event-id']),
          cancelOnDisconnect: req.query.cancel_on_disconnect,
          ...(req.query.stream_mode ? { modes: req.query.stream_mode } : {}),
          ...(req.query.namespace ? { namespaces: req.query.namespace } : {}),
        });
      },
    );

    // Every run of the thread, in order, for as long as the client stays (the thread's runs come and go).
    app.get(
      '/threads/:thread_id/stream',
      {
        schema: { params: ThreadParams, querystring: ThreadStreamQuery, headers: LastEventId },
      },
      async (req, reply) => {
        const thread = await threads.get(req.params.thread_id);
        if (!thread) throw new NotFoundError(`Thread with ID ${req.params.thread_id} not found`);
        const afterId = await cursorOf(req.headers['last-event-id']);
        const { keep, stateUpdates } = threadEventFilter([
          ...(req.query.stream_mode ?? []),
          ...(req.query.stream_modes ?? []),
        ]);
        const sse = openSse(req, reply, null, stallMs);
        const threadId = thread.thread_id;
        try {
          for await (const page of followStream({
            streams,
            key: { thread_id: threadId },
            afterId,
            ended: new Promise(() => undefined),
            signal: sse.signal,
          })) {
            const out: Array<string | Buffer> = [];
            for (const e of page) {
              if (keep(e) && !isProtocolEventName(e.event)) out.push(frameOf(e));
              // A run changed the state: its new state follows the run's end, under the same id (a resume
              // after that id has seen both).
              if (stateUpdates && isRunDone(e)) {
                if (!(await sse.write(out.splice(0)))) break;
                const state = await runEndState(threadId, e.run_id, sse.signal);
                if (state !== undefined) out.push(frame('state_update', stringify(state), e.id));
              }
            }
            if (!(await sse.write(out))) break;
          }
        } finally {
          sse.end();
        }
      },
    );

    /** The thread's state once the run has finished (its end event is written just before); undefined if gone. */
    async function runEndState(threadId: string, runId: string, signal: AbortSignal): Promise<unknown> {
      try {
        await engine.waitForRun(threadId, runId, signal);
        if (signal.aborted) return undefined;
        return await state.get(threadId);
      } catch (err) {
        if (err instanceof NotFoundError) return undefined;
        throw err;
      }
    }
  };

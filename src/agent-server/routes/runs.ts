// Runs on a thread, stateless runs, join/wait/cancel.
import type { FastifyPluginAsyncZod } from 'fastify-type-provider-zod';
import { z } from 'zod';
import { NotFoundError } from '../../lib/errors.ts';
import { matchesFilters, type AuthFilters } from '../auth/custom.ts';
import { TERMINAL_RUN_STATUSES, type RunRecord } from '../storage/types.ts';
import type { RunAuth } from '../services/context.ts';
import type { FastifyRequest } from 'fastify';
import type { RouteDeps } from './deps.ts';
import { disconnectSignal, sendAfterWait } from './reply.ts';
import { RunParams, selectFields, ThreadParams } from '../schemas/common.ts';
import {
  CancelQuery,
  JoinQuery,
  RunBatchCreate,
  RunCreate,
  RunListQuery,
  RunsCancel,
  RunsCancelQuery,
} from '../schemas/runs.ts';

/** The public run record (bookkeeping columns stay inside). */
export function publicRun(r: RunRecord) {
  return {
    run_id: r.run_id,
    thread_id: r.thread_id,
    assistant_id: r.assistant_id,
    created_at: r.created_at,
    updated_at: r.updated_at,
    metadata: r.metadata,
    status: r.status,
    kwargs: r.kwargs,
    multitask_strategy: r.multitask_strategy,
    cancel_reason: r.cancel_reason,
  };
}

/** The custom-auth caller of a run request (who, and what the threads:create_run handler decided). */
export function runCaller(req: FastifyRequest): RunAuth {
  return {
    auth: req.auth ?? null,
    filters: req.authz?.filters,
    runId: req.authz?.runId,
    headers: req.headers,
    assistantFilter: req.authz?.assistantFilter,
  };
}

export const runRoutes =
  (deps: RouteDeps): FastifyPluginAsyncZod =>
  async (app) => {
    const { engine, keepAliveMs } = deps;
    const { runs, threads } = deps.service;

    /** on_disconnect=cancel: a caller that hangs up on a wait takes its run down with it. */
    function cancelOnDisconnect(signal: AbortSignal, body: { on_disconnect?: string | null }, run: RunRecord): void {
      if (body.on_disconnect !== 'cancel') return;
      signal.addEventListener(
        'abort',
        () => void runs.cancel(run.thread_id, run.run_id, 'interrupt').catch(() => undefined),
      );
    }

    app.post('/threads/:thread_id/runs', { schema: { params: ThreadParams, body: RunCreate } }, async (req, reply) => {
      const run = await runs.create(req.params.thread_id, req.body, runCaller(req));
      reply.header('Content-Location', `/threads/${run.thread_id}/runs/${run.run_id}`);
      return publicRun(run);
    });

    app.post(
      '/threads/:thread_id/runs/wait',
      { schema: { params: ThreadParams, body: RunCreate } },
      async (req, reply) => {
        const run = await runs.create(req.params.thread_id, req.body, runCaller(req));
        const signal = disconnectSignal(req, reply);
        cancelOnDisconnect(signal, req.body, run);
        const location = `/threads/${run.thread_id}/runs/${run.run_id}`;
        const result = engine
          .waitForRun(run.thread_id, run.run_id, signal, run)
          .then((r) => runs.result(run.thread_id, r, engine.finalValues(r)));
        return sendAfterWait(reply, result, {
          keepAliveMs,
          headers: { 'Content-Location': location, Location: `${location}/join` },
        });
      },
    );

    app.post('/runs/wait', { schema: { body: RunCreate } }, async (req, reply) => {
      const run = await runs.create(null, req.body, runCaller(req));
      const signal = disconnectSignal(req, reply);
      cancelOnDisconnect(signal, req.body, run);
      const result = engine.waitForRun(run.thread_id, run.run_id, signal, run).then(async (r) => {
        const out = await runs.result(run.thread_id, r, engine.finalValues(r));
        if (run.kwargs.temporary && r && TERMINAL_RUN_STATUSES.has(r.status)) {
          await threads.delete(run.thread_id).catch(() => undefined);
        }
        return out;
      });
      // Location: the run's join on its (new) thread, as POST /threads/{id}/runs/wait sends, so a client that lost
      // the connection can wait again.
      const location = `/threads/${run.thread_id}/runs/${run.run_id}`;
      return sendAfterWait(reply, result, {
        keepAliveMs,
        headers: { 'Content-Location': location, Location: `${location}/join` },
      });
    });

    app.post('/runs', { schema: { body: RunCreate } }, async (req, reply) => {
      const run = await runs.create(null, req.body, runCaller(req));
      runs.deleteThreadWhenDone(run);
      reply.header('Content-Location', `/threads/${run.thread_id}/runs/${run.run_id}`);
      return publicRun(run);
    });

    app.post('/runs/batch', { schema: { body: RunBatchCreate } }, async (req) => {
      const items = req.authz?.items ?? [];
      const created = await runs.createBatch(
        req.body,
        req.body.map((_, i) => ({
          auth: req.auth ?? null,
          filters: items[i]?.filters,
          runId: items[i]?.runId,
          headers: req.headers,
          assistantFilter: req.authz?.assistantFilter,
        })),
      );
      return created.map(publicRun);
    });

    app.get(
      '/threads/:thread_id/runs',
      { schema: { params: ThreadParams, querystring: RunListQuery } },
      async (req) => {
        await threads.require(req.params.thread_id);
        const listed = await runs.list(req.params.thread_id, req.query);
        return selectFields(listed.map(publicRun), req.query.select);
      },
    );

    app.get('/threads/:thread_id/runs/:run_id', { schema: { params: RunParams } }, async (req) => {
      return publicRun(await runs.require(req.params.thread_id, req.params.run_id));
    });

    app.delete('/threads/:thread_id/runs/:run_id', { schema: { params: RunParams } }, async (req, reply) => {
      await runs.delete(req.params.thread_id, req.params.run_id);
      return reply.code(204).send();
    });

    app.get(
      '/threads/:thread_id/runs/:run_id/join',
      { schema: { params: RunParams, querystring: JoinQuery } },
      async (req, reply) => {
        const { thread_id, run_id } = req.params;
        // A run executing here, or created here and queued, exists on its thread (access was checked by the auth
        // hooks): no read needed. Another is read, with its thread's values (the answer) when it has ended.
        const running = engine.runningHere(thread_id, run_id);
        const queued = running ? undefined : engine.queuedHere(thread_id, run_id);
        const read = running || queued ? undefined : await runs.requireWithValues(thread_id, run_id);
        const run = running ?? queued ?? read!.run;
        const signal = disconnectSignal(req, reply);
        if (req.query.cancel_on_disconnect) {
          signal.addEventListener(
            'abort',
            () => void runs.cancel(thread_id, run_id, 'interrupt').catch(() => undefined),
          );
        }
        // The values read with the run answer only for that very record (waitForRun returns a known ended one).
        const result = engine.waitForRun(thread_id, run_id, signal, run).then((r) => {
          // A queued run taken as existing without a read, then found gone, was deleted: maybe through another
          // process just before this join, whose NOTIFY had not come yet. A 404, as the read would have answered.
          if (!r && queued) throw new NotFoundError(`Run ${run_id} not found on thread ${thread_id}`);
          return runs.result(thread_id, r, engine.finalValues(r), r && r === read?.run ? read.values : undefined);
        });
        return sendAfterWait(reply, result, { keepAliveMs });
      },
    );

    /** The runs whose thread the caller's custom-auth filter lets them see. */
    async function visibleRuns(candidates: RunRecord[], filters: AuthFilters): Promise<RunRecord[]> {
      const ids = [...new Set(candidates.map((r) => r.thread_id))];
      const visible = new Set<string>();
      for (let i = 0; i < ids.length; i += 500) {
        const chunk = ids.slice(i, i + 500);
        for (const t of await threads.search({ ids: chunk, limit: chunk.length })) {
          if (matchesFilters(t.metadata, filters)) visible.add(t.thread_id);
        }
      }
      return candidates.filter((r) => visible.has(r.thread_id));
    }

    // Cancel Runs (the platform's POST /runs/cancel, answered 204 as its OpenAPI says; the Python SDK's
    // runs.cancel_many): {thread_id, run_ids} cancels those runs of the thread, all or none (an unknown thread or a
    // run not on it is a 404, as for the single cancel); {status} cancels every run pending, running or both.
    // Finished runs are left as they are. Custom auth: the threads:update event, as for the single cancel; only
    // runs on threads its filter lets the caller see are touched, another user's thread is a 404.
    app.post('/runs/cancel', { schema: { body: RunsCancel, querystring: RunsCancelQuery } }, async (req, reply) => {
      const { action } = req.query;
      const { status, thread_id, run_ids } = req.body;
      const filters = req.authz?.filters;
      if (status) {
        const listed = await runs.listByStatus(status === 'all' ? ['pending', 'running'] : [status]);
        const cancelled = filters ? await visibleRuns(listed, filters) : listed;
        for (const r of cancelled) {
          // One that ended or went (thread deleted) since it was listed is left alone.
          await runs.cancel(r.thread_id, r.run_id, action).catch((err: unknown) => {
            if (!(err instanceof NotFoundError)) throw err;
          });
        }
        return reply.code(204).send();
      }
      const thread = await threads.get(thread_id!);
      if (!thread || !matchesFilters(thread.metadata, filters))
        throw new NotFoundError(`Thread not found: ${thread_id}`);
      await runs.cancelMany(thread_id!, run_ids!, action);
      return reply.code(204).send();
    });

    app.post(
      '/threads/:thread_id/runs/:run_id/cancel',
      {
        schema: { params: RunParams, querystring: CancelQuery, body: z.unknown().optional() },
      },
      async (req, reply) => {
        const { thread_id, run_id } = req.params;
        const { action, reason } = req.query;
        // Stored as `<reason>:<who>`: SDK clients test the prefix only; here the caller of this route decided.
        await runs.cancel(thread_id, run_id, action, reason ? `${reason}:client` : null);
        if (req.query.wait) {
          await engine.waitForRun(thread_id, run_id);
          return reply.code(204).send();
        }
        return reply.code(202).send();
      },
    );
  };

// The thread-centric streaming protocol of @langchain/protocol (the SDK's client.threads.stream / ThreadStream,
// @langchain/react useStream): POST /threads/{id}/commands, POST /threads/{id}/stream/events (SSE with a
// channels / namespaces / depth / since filter) and GET /threads/{id}/stream/events upgraded to a WebSocket that
// carries commands, subscriptions and events. Sessions are read from the durable event log (protocol/session.ts):
// any replica serves them, a reconnect replays under the same event ids, and subscription.reconnect restores a
// lost socket's subscriptions by their ids (protocol/subscription-ids.ts). Auth is the API's: the routes pass the
// same hooks (API key, custom auth: the stream reads the thread, run.start / input.respond create runs), and each
// command over a WebSocket goes through the one authorizer as the POST /commands request it stands for; a
// browser's WebSocket carries its credential as a subprotocol (protocol/ws-credentials.ts), its frames pass the
// input guard and its subscriptions are bounded.
import type { FastifyPluginAsyncZod } from 'fastify-type-provider-zod';
import type { FastifyRequest } from 'fastify';
import { NotFoundError } from '../../lib/errors.ts';
import { CommandEnvelope, CommandError, runCommand } from '../protocol/commands.ts';
import { followSession } from '../protocol/session.ts';
import type { RouteDeps } from './deps.ts';
import { runCaller } from './runs.ts';
import { ThreadParams } from '../schemas/common.ts';
import { SubscriptionFilter } from '../schemas/streams.ts';
import { openSse } from './sse.ts';
import { COMMANDS_ROUTE, errorBody, serveProtocolSocket, threadVisibility } from './protocol-socket.ts';

export const protocolRoutes =
  (deps: RouteDeps): FastifyPluginAsyncZod =>
  async (app) => {
    const { service, engine } = deps;
    const stallMs = deps.streamStallMs ?? 60_000;
    app.post(COMMANDS_ROUTE, { schema: { params: ThreadParams, body: CommandEnvelope } }, async (req, reply) => {
      const cmd = req.body;
      try {
        const result = await runCommand({ service }, req.params.thread_id, cmd, runCaller(req));
        return { type: 'success', id: cmd.id, result, meta: { thread_id: req.params.thread_id } };
      } catch (err) {
        if (!(err instanceof CommandError)) throw err;
        return reply.code(err.status).send({ ...errorBody(cmd.id, err), detail: err.message });
      }
    });

    app.post(
      '/threads/:thread_id/stream/events',
      { schema: { params: ThreadParams, body: SubscriptionFilter } },
      async (req, reply) => {
        const sse = openSse(req, reply, null, stallMs);
        try {
          for await (const page of followSession(
            service,
            engine,
            req.params.thread_id,
            req.body,
            sse.signal,
            threadVisibility(deps, req, req.params.thread_id),
          )) {
            const frames = page.map((e) => `event: ${e.method}\ndata: ${JSON.stringify(e)}\nid: ${e.event_id}\n\n`);
            if (!(await sse.write(frames))) break;
          }
        } catch (err) {
          // Not the caller's thread after all: the stream ends without a word (404 was the answer had it existed).
          if (!(err instanceof NotFoundError)) throw err;
        } finally {
          sse.end();
        }
      },
    );

    app.route({
      method: 'GET',
      url: '/threads/:thread_id/stream/events',
      schema: { params: ThreadParams },
      // A plain GET: the route only speaks WebSocket (SSE subscriptions are POSTed with their filter).
      handler: async (_req, reply) =>
        reply
          .code(426)
          .header('upgrade', 'websocket')
          .send({
            detail:
              'GET /threads/{thread_id}/stream/events is a WebSocket endpoint (send Upgrade: websocket); ' +
              'POST it with a filter for server-sent events',
          }),
      wsHandler: (socket, req) => {
        serveProtocolSocket(deps, stallMs, socket, req as FastifyRequest<{ Params: { thread_id: string } }>);
      },
    });
  };

// MCP over Streamable HTTP at /mcp (mcp/server.ts has the methods). Stateless: no session ids, every POST carries
// one JSON-RPC message and every replica answers any of them. Requests are answered with JSON, or with an event
// stream when the client accepts one and the answer may take long (tools/call, tasks/result): the headers go out at
// once and comments keep proxies from closing a quiet connection while the run works. Notifications and responses
// are taken with 202. GET (a server-initiated stream) and DELETE (ending a session) are 405: there is neither.
// The caller was authenticated by the app's hooks like any request; what each method does is authorised by the
// REST requests it makes as that caller (http/as-caller.ts).
import type { FastifyInstance, FastifyPluginAsync, FastifyReply, FastifyRequest } from 'fastify';
import { apiAsCaller } from '../http/as-caller.ts';
import { CallerMemo } from '../http/caller-memo.ts';
import type { NamedAssistant } from '../mcp/tools.ts';
import {
  envelopeProblem,
  idOf,
  INTERNAL_ERROR,
  INVALID_REQUEST,
  rpcError,
  rpcErrorHandler,
  RpcError,
  RpcRequest,
  rpcResult,
  type RpcId,
} from '../http/jsonrpc.ts';
import { handleMcp, SUPPORTED_PROTOCOLS, type McpContext } from '../mcp/server.ts';
import type { RouteDeps } from './deps.ts';
import { openSse } from './sse.ts';

/** Whether the answer waits on a run (a tool call that is not a task, a task's result). */
const waitsOnRun = (method: string, params: Record<string, unknown> | undefined) =>
  (method === 'tools/call' && params?.task === undefined) || method === 'tasks/result';

/** `root`: the app itself, whose routes the inner requests go to. */
export const mcpRoutes =
  (deps: RouteDeps, root: FastifyInstance): FastifyPluginAsync =>
  async (app) => {
    const stallMs = deps.streamStallMs ?? 60_000;
    const tools = new CallerMemo<NamedAssistant[]>();

    // Errors before the handler (a body that is not JSON, too large, refused by the input guard) in JSON-RPC form.
    app.setErrorHandler(rpcErrorHandler('MCP'));

    const notAllowed = async (req: FastifyRequest, reply: FastifyReply) =>
      reply
        .code(405)
        .header('allow', 'POST')
        .send(
          rpcError(
            null,
            INVALID_REQUEST,
            `${req.method} /mcp is not supported: this server is stateless (no sessions, no server-initiated ` +
              'stream); POST one JSON-RPC message per request',
          ),
        );
    // Not in /openapi.json: that document describes the LangGraph API; MCP describes itself (initialize, tools/list).
    const hidden = { schema: { hide: true } };
    app.get('/mcp', hidden, notAllowed);
    app.delete('/mcp', hidden, notAllowed);

    app.post('/mcp', hidden, async (req, reply) => {
      const message = req.body;
      if (Array.isArray(message))
        return reply
          .code(400)
          .send(rpcError(null, INVALID_REQUEST, 'JSON-RPC batches are not supported: send one message per request'));
      const version = req.headers['mcp-protocol-version'];
      if (typeof version === 'string' && !SUPPORTED_PROTOCOLS.includes(version))
        return reply
          .code(400)
          .send(
            rpcError(
              idOf(message),
              INVALID_REQUEST,
              `Unsupported MCP-Protocol-Version ${version}: this server speaks ${SUPPORTED_PROTOCOLS.join(', ')}`,
            ),
          );
      const isObject = typeof message === 'object' && message !== null;
      // A response or error from the client (to a request this stateless server never sends) is taken and dropped.
      if (isObject && !('method' in message) && ('result' in message || 'error' in message))
        return reply.code(202).send();
      const parsed = RpcRequest.safeParse(message);
      if (!parsed.success)
        return reply.code(400).send(rpcError(idOf(message), INVALID_REQUEST, envelopeProblem(parsed.error)));
      const { id, method, params } = parsed.data;
      if (id === undefined) return reply.code(202).send();

      const ctx: McpContext = { api: apiAsCaller(root, req, deps), version: deps.version, tools };
      const answer = (rpcId: RpcId) =>
        handleMcp(ctx, method, params).then(
          (result) => rpcResult(rpcId, result),
          (err: unknown) => {
            if (err instanceof RpcError) return rpcError(rpcId, err.code, err.message, err.data);
            req.log.error({ err, method }, `MCP ${method} failed`);
            return rpcError(rpcId, INTERNAL_ERROR, `${method} failed`);
          },
        );

      const accept = String(req.headers.accept ?? '');
      if (waitsOnRun(method, params) && accept.includes('text/event-stream')) {
        const sse = openSse(req, reply, null, stallMs);
        // Progress asked for: notifications/progress on this stream, before the result (a client that went away
        // stops them; the run goes on, as a task would).
        const token = (params?._meta as { progressToken?: unknown } | undefined)?.progressToken;
        if (method === 'tools/call' && (typeof token === 'string' || typeof token === 'number')) {
          ctx.progress = async (progress, message) => {
            const note = {
              jsonrpc: '2.0',
              method: 'notifications/progress',
              params: { progressToken: token, progress, message },
            };
            await sse.write([`event: message\ndata: ${JSON.stringify(note)}\n\n`]);
          };
        }
        const out = await answer(id);
        await sse.write([`event: message\ndata: ${JSON.stringify(out)}\n\n`]);
        sse.end();
        return;
      }
      return reply.type('application/json').send(await answer(id));
    });
  };

// A2A per assistant: POST /a2a/{assistant_id} takes JSON-RPC in both dialects (a2a/dialects.ts; the method name
// picks one per request), answering streams (message/stream, SendStreamingMessage, tasks/resubscribe,
// SubscribeToTask) as server-sent events of JSON-RPC responses. The agent card is served where the hosted platform
// serves it (/.well-known/agent-card.json?assistant_id=) and where stock resolvers look, under the agent's URL
// (/a2a/{assistant_id}/.well-known/agent-card.json). Everything is done as the caller through the REST API
// (http/as-caller.ts): an assistant or task the caller cannot see is not found.
import type { FastifyInstance, FastifyPluginAsync, FastifyReply, FastifyRequest } from 'fastify';
import { agentCard, type CardAssistant } from '../a2a/card.ts';
import {
  chunkEvent,
  dialectOf,
  operationOf,
  readList,
  readSend,
  sendResult,
  streamEvents,
  TaskIdParams,
  writeTask,
} from '../a2a/dialects.ts';
import {
  cancelTask,
  getTask,
  sendMessage,
  streamMessage,
  subscribe,
  takesMessages,
  UNSUPPORTED_OPERATION,
  type AgentContext,
  type TaskEvent,
} from '../a2a/tasks.ts';
import { listTasks } from '../a2a/list.ts';
import {
  deleteConfig,
  getConfig,
  listConfigs,
  readConfigCall,
  readSendConfig,
  setConfig,
  writeConfig,
} from '../a2a/push.ts';
import { CallerMemo } from '../http/caller-memo.ts';
import { apiAsCaller, detailOf, type CallerApi } from '../http/as-caller.ts';
import {
  envelopeProblem,
  idOf,
  INTERNAL_ERROR,
  INVALID_REQUEST,
  METHOD_NOT_FOUND,
  parseParams,
  rpcError,
  rpcErrorHandler,
  RpcError,
  RpcRequest,
  rpcResult,
  type RpcId,
} from '../http/jsonrpc.ts';
import type { RouteDeps } from './deps.ts';
import { openSse } from './sse.ts';

const first = (v: string | string[] | undefined) => (Array.isArray(v) ? v[0] : v);

/** The first value of a proxy header when it is a plain token of the expected shape (nothing injected into URLs). */
function forwarded(req: FastifyRequest, name: string, re: RegExp): string | undefined {
  const v = first(req.headers[name])?.split(',', 1)[0]?.trim();
  return v && re.test(v) ? v : undefined;
}

/**
 * The deployment's URL as clients reach it: the configured public URL, else the request's host (a proxy's
 * X-Forwarded-Proto / -Host / -Prefix first) with the mount prefix.
 */
function baseUrlOf(deps: RouteDeps, req: FastifyRequest): string {
  if (deps.publicUrl) return deps.publicUrl.replace(/\/+$/, '');
  const host = forwarded(req, 'x-forwarded-host', /^[\w.:[\]-]+$/) ?? req.headers.host ?? 'localhost';
  const proto = forwarded(req, 'x-forwarded-proto', /^https?$/) ?? req.protocol;
  const prefix = forwarded(req, 'x-forwarded-prefix', /^\/[\w.~/-]*$/)?.replace(/\/$/, '') ?? '';
  return `${proto}://${host}${prefix}${deps.mountPrefix ?? ''}`;
}

/** The assistant as the caller sees it, and whether its graph takes messages; null when it is not there for them. */
async function agentOf(
  api: CallerApi,
  assistantId: string,
): Promise<{ assistant: CardAssistant; takesMessages: boolean } | null> {
  const found = await api.call('GET', `/assistants/${encodeURIComponent(assistantId)}`);
  if (found.status === 404 || found.status === 422) return null;
  if (found.status !== 200) throw new RpcError(INTERNAL_ERROR, `reading the assistant failed: ${detailOf(found)}`);
  const assistant = found.body as CardAssistant;
  return { assistant, takesMessages: await takesMessages(api, assistant.assistant_id) };
}

/** `root`: the app itself, whose routes the inner requests go to. */
export const a2aRoutes =
  (deps: RouteDeps, root: FastifyInstance): FastifyPluginAsync =>
  async (app) => {
    const stallMs = deps.streamStallMs ?? 60_000;
    const policy = deps.webhookPolicy ?? { allow: [] };
    const hidden = { schema: { hide: true } };
    // Whether an agent takes messages, per caller and assistant: read for every message with text, rarely changed.
    const inputs = new CallerMemo<boolean>();

    app.setErrorHandler(rpcErrorHandler('A2A'));

    async function card(req: FastifyRequest, reply: FastifyReply, assistantId: string | undefined) {
      if (!assistantId)
        return reply
          .code(400)
          .send({ detail: 'assistant_id is required: /.well-known/agent-card.json?assistant_id=<id>' });
      const agent = await agentOf(apiAsCaller(root, req, deps), assistantId);
      if (!agent) return reply.code(404).send({ detail: `Assistant not found: ${assistantId}` });
      return agentCard(agent.assistant, baseUrlOf(deps, req), deps.version, agent.takesMessages);
    }

    app.get('/.well-known/agent-card.json', hidden, async (req, reply) =>
      card(req, reply, first((req.query as Record<string, string | string[] | undefined>).assistant_id)),
    );
    app.get('/a2a/:assistant_id/.well-known/agent-card.json', hidden, async (req, reply) =>
      card(req, reply, (req.params as { assistant_id: string }).assistant_id),
    );

    app.post('/a2a/:assistant_id', hidden, async (req, reply) => {
      const message = req.body;
      if (Array.isArray(message))
        return reply
          .code(400)
          .send(rpcError(null, INVALID_REQUEST, 'JSON-RPC batches are not supported: send one message per request'));
      const parsed = RpcRequest.safeParse(message);
      if (!parsed.success)
        return reply.code(400).send(rpcError(idOf(message), INVALID_REQUEST, envelopeProblem(parsed.error)));
      const { method, params } = parsed.data;
      const id: RpcId | null = parsed.data.id ?? null;
      const dialect = dialectOf(method);
      if (!dialect) return rpcError(id, METHOD_NOT_FOUND, `Method not found: ${method}`);

      const api = apiAsCaller(root, req, deps);
      const assistantId = (req.params as { assistant_id: string }).assistant_id;
      const fail = (err: unknown) => {
        if (err instanceof RpcError) return rpcError(id, err.code, err.message, err.data);
        req.log.error({ err, method }, `A2A ${method} failed`);
        return rpcError(id, INTERNAL_ERROR, `${method} failed`);
      };
      const ctx: AgentContext = {
        api,
        assistantId,
        takesMessages: () => inputs.get(api, assistantId, () => takesMessages(api, assistantId)),
      };

      const op = operationOf(method);
      if (op === 'stream' || op === 'subscribe') {
        // Let go of the run's stream when the client goes away or the loop below ends.
        const gone = new AbortController();
        let events: AsyncGenerator<TaskEvent>;
        try {
          if (op === 'stream') {
            const push = readSendConfig(dialect, method, params, policy);
            events = await streamMessage(ctx, readSend(dialect, method, params).message, gone.signal, push);
          } else {
            events = await subscribe(ctx, parseParams(TaskIdParams, method, params).id, gone.signal);
          }
        } catch (err) {
          return fail(err);
        }
        const sse = openSse(req, reply, null, stallMs);
        sse.signal.addEventListener('abort', () => gone.abort(), { once: true });
        const frame = (body: unknown) => `data: ${JSON.stringify(body)}\n\n`;
        try {
          let isFirst = true;
          for await (const event of events) {
            let out: Array<Record<string, unknown>>;
            if ('chunk' in event) out = [chunkEvent(dialect, event.chunk)];
            else {
              const task = event.task;
              out = streamEvents(dialect, task, isFirst);
              if (isFirst && task.state !== 'submitted' && task.state !== 'working')
                out.push(...streamEvents(dialect, task, false));
              isFirst = false;
            }
            if (!(await sse.write(out.map((e) => frame(rpcResult(id, e)))))) break;
          }
        } catch (err) {
          await sse.write([frame(fail(err))]);
        } finally {
          gone.abort();
          sse.end();
        }
        return;
      }

      try {
        switch (op) {
          case 'send': {
            const { message: m, blocking } = readSend(dialect, method, params);
            const push = readSendConfig(dialect, method, params, policy);
            return rpcResult(id, sendResult(dialect, await sendMessage(ctx, m, blocking, push)));
          }
          case 'get':
            return rpcResult(id, writeTask(dialect, await getTask(ctx, parseParams(TaskIdParams, method, params).id)));
          case 'cancel':
            return rpcResult(
              id,
              writeTask(dialect, await cancelTask(ctx, parseParams(TaskIdParams, method, params).id)),
            );
          case 'list': {
            const listed = await listTasks(ctx, readList(method, params));
            return rpcResult(id, { ...listed, tasks: listed.tasks.map((t) => writeTask(dialect, t)) });
          }
          case 'push': {
            const call = readConfigCall(dialect, method, params, policy);
            if ('config' in call && call.config)
              return rpcResult(id, writeConfig(dialect, call.taskId, await setConfig(ctx, call.taskId, call.config)));
            const configId = 'configId' in call ? call.configId : undefined;
            if (/get$/i.test(method) || method.startsWith('Get'))
              return rpcResult(id, writeConfig(dialect, call.taskId, await getConfig(ctx, call.taskId, configId)));
            if (/delete$/i.test(method) || method.startsWith('Delete')) {
              await deleteConfig(ctx, call.taskId, configId);
              return rpcResult(id, dialect === '0.3' ? null : {});
            }
            const all = (await listConfigs(ctx, call.taskId)).map((c) => writeConfig(dialect, call.taskId, c));
            return rpcResult(id, dialect === '0.3' ? all : { configs: all, nextPageToken: '' });
          }
          default:
            throw new RpcError(UNSUPPORTED_OPERATION, `${method} is not supported by this agent`);
        }
      } catch (err) {
        return fail(err);
      }
    });
  };

// JSON-RPC 2.0 as MCP and A2A carry it over HTTP: the envelope, the standard error codes, and the one rule both
// keep that the hosted server breaks: an error answers with the request's own id (null only when there was none
// to read).
import type { FastifyError, FastifyReply, FastifyRequest } from 'fastify';
import { z } from 'zod';
import { isAppError } from '../../lib/errors.ts';

export const PARSE_ERROR = -32700;
export const INVALID_REQUEST = -32600;
export const METHOD_NOT_FOUND = -32601;
export const INVALID_PARAMS = -32602;
export const INTERNAL_ERROR = -32603;

export type RpcId = string | number;

export const RpcRequest = z.object({
  jsonrpc: z.literal('2.0', { message: 'must be "2.0"' }),
  id: z.union([z.string(), z.number().int()]).optional(),
  method: z.string().min(1).max(200),
  params: z.record(z.string(), z.unknown()).optional(),
});
export type RpcRequest = z.infer<typeof RpcRequest>;

/** A JSON-RPC error raised by a method: answered with its code, message and data. */
export class RpcError extends Error {
  constructor(
    readonly code: number,
    message: string,
    readonly data?: unknown,
  ) {
    super(message);
  }
}

export const rpcResult = (id: RpcId | null, result: unknown) => ({ jsonrpc: '2.0' as const, id, result });

export const rpcError = (id: RpcId | null, code: number, message: string, data?: unknown) => ({
  jsonrpc: '2.0' as const,
  id,
  error: { code, message, ...(data === undefined ? {} : { data }) },
});

/** The id of a message that failed its envelope check, when it has a usable one. */
export function idOf(message: unknown): RpcId | null {
  const id = (message as { id?: unknown } | null)?.id;
  return typeof id === 'string' || (typeof id === 'number' && Number.isInteger(id)) ? id : null;
}

/** The first problem of an envelope, worded with the field it is about. */
export function envelopeProblem(error: z.ZodError): string {
  const issue = error.issues[0]!;
  return `invalid JSON-RPC request: ${issue.path.join('.') || '(message)'}: ${issue.message}`;
}

/** Params checked against a method's schema; a failure is -32602 naming the field. */
export function parseParams<T>(schema: z.ZodType<T>, method: string, params: unknown): T {
  const r = schema.safeParse(params ?? {});
  if (r.success) return r.data;
  const issue = r.error.issues[0]!;
  throw new RpcError(INVALID_PARAMS, `${method}: params.${issue.path.join('.') || '(params)'}: ${issue.message}`);
}

/**
 * Fastify's error handler for a JSON-RPC endpoint: errors raised before its handler (a body that is not JSON, too
 * large, refused by the input guard) answered in JSON-RPC form, with the request's id where it has one. `what` names
 * the endpoint in the log line of an unexpected error.
 */
export function rpcErrorHandler(what: string) {
  return (err: FastifyError, req: FastifyRequest, reply: FastifyReply) => {
    if (err instanceof SyntaxError || err.code === 'FST_ERR_CTP_INVALID_JSON_BODY')
      return reply.code(400).send(rpcError(null, PARSE_ERROR, `Parse error: ${err.message}`));
    if (isAppError(err))
      return reply.code(err.status).send(rpcError(idOf(req.body), INVALID_REQUEST, String(err.detail)));
    if (err.statusCode && err.statusCode >= 400 && err.statusCode < 500)
      return reply.code(err.statusCode).send(rpcError(null, INVALID_REQUEST, err.message));
    req.log.error({ err }, `${what} request failed: ${err.message}`);
    return reply.code(500).send(rpcError(idOf(req.body), INTERNAL_ERROR, 'Internal error'));
  };
}

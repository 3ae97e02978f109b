// Custom routes from langgraph.json ("http": {"app": "./app.ts:app"}): a Hono app placed in front of the
// built-in API, as the reference servers do. Every request goes through it first: its routes answer their paths
// (before a built-in route of the same path), its middleware also wraps requests it does not answer, and those
// continue into fastify with the body and headers the middleware left, and with the response headers it added.
// The wrapper is built with the app's own class, so the project's Hono version is used and the server itself
// does not depend on Hono.
import { Readable } from 'node:stream';
import type { FastifyInstance, FastifyReply, FastifyRequest } from 'fastify';
import { GraphConfigError } from '../graphs/config.ts';
import { importProjectExport } from '../graphs/project-export.ts';
import type { RequestAuth } from '../auth/custom.ts';
import { toFetchRequest } from './auth-hooks.ts';
import { TENANT_CSP } from '../../lib/http.ts';

/** The parts of a Hono app used here. */
export interface HonoLike {
  fetch(request: Request, env?: unknown, ctx?: unknown): Response | Promise<Response>;
  route(path: string, app: unknown): unknown;
  all(path: string, handler: unknown): unknown;
}

interface HonoContextLike {
  req: { raw: Request; text(): Promise<string> };
  set(key: string, value: unknown): void;
}

/** Marks the answer of the fall-through route: "no custom route here, go on into the built-in API". */
const FALLTHROUGH = 'x-agentplane-fallthrough';

export interface CustomApp {
  readonly source: string;
  /**
   * Runs the request through the app. Returns the app's own Response, or the request as the middleware left it
   * (`pass`) plus the headers the middleware added to the response. `caller` is who authentication found, when it
   * ran first: the app reads it as `c.get('langgraph_auth_user')` and `c.get('langgraph_auth_permissions')`.
   */
  dispatch(
    request: Request,
    caller?: RequestAuth | null,
  ): Promise<{ response: Response } | { pass: Request; headers: Headers }>;
}

/**
 * Wraps the user's app in an outer Hono app whose last route catches everything, so the user's middleware runs
 * around it and unmatched requests come back as a marked response instead of the user's 404.
 */
export function wrapHonoApp(user: HonoLike, source: string): CustomApp {
  const Hono = (user as object).constructor as new () => unknown;
  const outer = new Hono() as {
    use(
      path: string,
      handler: (c: HonoContextLike & { env: Slot }, next: () => Promise<void>) => Promise<void>,
    ): unknown;
    route(path: string, app: unknown): unknown;
    all(path: string, handler: (c: HonoContextLike & { env: Slot }) => Promise<Response>): unknown;
    fetch(request: Request, env: Slot): Response | Promise<Response>;
  };
  // Registered before the user's app, so its middleware already sees the caller (the same names runs see).
  outer.use('*', async (c, next) => {
    if (c.env.caller) {
      c.set('langgraph_auth_user', c.env.caller.user);
      c.set('langgraph_auth_permissions', c.env.caller.permissions);
    }
    await next();
  });
  outer.route('/', user);
  outer.all('*', async (c) => {
    // The env object is this dispatch's own, so concurrent requests cannot mix up what they pass on.
    c.env.passed = await settledRequest(c);
    return new Response(null, { status: 404, headers: { [FALLTHROUGH]: '1' } });
  });
  return {
    source,
    async dispatch(request, caller) {
      const slot: Slot = caller ? { caller } : {};
      const response = await outer.fetch(request, slot);
      if (!slot.passed || !response.headers.has(FALLTHROUGH)) return { response };
      const headers = new Headers(response.headers);
      headers.delete(FALLTHROUGH);
      return { pass: slot.passed, headers };
    },
  };
}

interface Slot {
  passed?: Request;
  caller?: RequestAuth;
}

/** The request after the middleware: a replaced `c.req.raw` wins, else the (possibly already read) original. */
async function settledRequest(c: HonoContextLike): Promise<Request> {
  const raw = c.req.raw;
  if (!raw.bodyUsed) return raw;
  // Middleware read the body through c.req.json()/text(): Hono cached it, so read it back from the cache.
  const text = await c.req.text();
  // A used Request cannot be cloned, even with a new body: build a fresh one.
  return new Request(raw.url, { method: raw.method, headers: raw.headers, body: text });
}

/** Imports the `http.app` module ("./app.ts:app", export "default" when no name is given). */
export async function loadCustomApp(spec: string, projectDir: string): Promise<CustomApp> {
  const { value, exportName, file: abs } = await importProjectExport('http.app', spec, projectDir);
  const app = value as Partial<HonoLike> | undefined;
  if (!app || typeof app.fetch !== 'function' || typeof app.route !== 'function' || typeof app.all !== 'function') {
    throw new GraphConfigError(`http.app "${spec}": export "${exportName}" of ${abs} is not a Hono app`);
  }
  return wrapHonoApp(app as HonoLike, spec);
}

async function readBody(req: FastifyRequest, limit: number): Promise<Buffer | null> {
  if (req.method === 'GET' || req.method === 'HEAD') return null;
  if (req.headers['content-length'] === undefined && req.headers['transfer-encoding'] === undefined) return null;
  const chunks: Buffer[] = [];
  let size = 0;
  for await (const chunk of req.raw) {
    size += (chunk as Buffer).length;
    if (size > limit) {
      const err = new Error(`Request body is larger than ${limit} bytes`) as Error & { statusCode: number };
      err.statusCode = 413;
      throw err;
    }
    chunks.push(chunk as Buffer);
  }
  return Buffer.concat(chunks);
}

declare module 'fastify' {
  interface FastifyRequest {
    /** The body as the custom app's middleware left it; fastify parses this instead of the consumed stream. */
    passedBody: Buffer | null;
  }
}

export interface MountOptions {
  bodyLimit: number;
  /** Runs for requests the custom app does not answer (custom auth), before they reach a built-in route. */
  afterFallthrough?: (req: FastifyRequest, reply: FastifyReply) => Promise<boolean>;
}

/** Puts the custom app in front of every route (an onRequest hook) and feeds fastify what it passes on. */
export function mountCustomApp(app: FastifyInstance, custom: CustomApp, opts: MountOptions): void {
  app.decorateRequest('passedBody', null);
  app.addHook('onRequest', async (req, reply) => {
    if (reply.sent) return;
    const body = await readBody(req, opts.bodyLimit);
    const result = await custom.dispatch(toFetchRequest(req, body), req.auth);
    if ('response' in result) {
      await sendFetchResponse(reply, result.response);
      return reply;
    }
    result.headers.forEach((value, name) => {
      if (name === 'content-type' || name === 'content-length') return;
      reply.header(name, value);
      reply.raw.setHeader(name, value);
    });
    // Headers the middleware changed on the request reach the built-in route too.
    if (result.pass.headers) {
      result.pass.headers.forEach((value, name) => {
        if (name !== 'content-length' && name !== 'transfer-encoding') req.raw.headers[name] = value;
      });
    }
    const passed = result.pass.bodyUsed || !result.pass.body ? body : Buffer.from(await result.pass.arrayBuffer());
    if (passed !== null) {
      req.passedBody = passed;
      req.raw.headers['content-length'] = String(passed.length);
      delete req.raw.headers['transfer-encoding'];
    }
    if (opts.afterFallthrough && !(await opts.afterFallthrough(req, reply))) return reply;
  });
  app.addHook('preParsing', async (req, _reply, payload) => {
    if (!req.passedBody) return payload;
    const stream = Readable.from([req.passedBody]) as Readable & { receivedEncodedLength?: number };
    stream.receivedEncodedLength = req.passedBody.length;
    return stream;
  });
}

// A custom route's page is tenant code in a visitor's browser: sandboxed (the app's own policy is kept beside ours),
// and it may not widen a service worker's scope.
const NOT_PASSED = new Set(['set-cookie', 'content-length', 'content-security-policy', 'service-worker-allowed']);

async function sendFetchResponse(reply: FastifyReply, response: Response): Promise<void> {
  reply.code(response.status);
  const cookies = response.headers.getSetCookie();
  response.headers.forEach((value, name) => {
    if (!NOT_PASSED.has(name)) reply.header(name, value);
  });
  const csp = response.headers.get('content-security-policy');
  reply.header('content-security-policy', csp ? [csp, TENANT_CSP] : TENANT_CSP);
  if (cookies.length) reply.header('set-cookie', cookies);
  // Streamed through, so a custom route may answer with server-sent events.
  await reply.send(response.body ? Readable.fromWeb(response.body as import('node:stream/web').ReadableStream) : null);
}

/**
 * A run's relative webhook: POSTs to the custom app's own routes, in process. Only a custom route answers it: a path
 * the app does not route (its middleware passing the request on) is a 404 here and never reaches a built-in route, so
 * a webhook cannot act on threads, runs or the store with the server's rights. No credentials are added.
 */
export async function postToCustomRoute(
  custom: CustomApp,
  path: string,
  body: string,
  headers: Record<string, string>,
): Promise<number> {
  const request = new Request(new URL(path, 'http://127.0.0.1'), { method: 'POST', headers, body });
  const result = await custom.dispatch(request);
  if (!('response' in result)) return 404;
  await result.response.body?.cancel();
  return result.response.status;
}

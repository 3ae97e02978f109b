// Custom auth on the fastify app: `authenticate` on every request (onRequest), then the route's auth event
// (preHandler, once the body is parsed so handlers see and may edit it). Records a filter hides are answered as
// missing (404), the way the platform answers them.
import type { FastifyInstance, FastifyReply, FastifyRequest } from 'fastify';
import { ConflictError, ForbiddenError, NotFoundError } from '../../lib/errors.ts';
import type { AssistantReadFilter } from '../services/context.ts';
import type { RouteAuthorizer, RouteAuthz } from './authorizer.ts';
import type { AgentService } from '../services/index.ts';
import {
  AuthHandlerError,
  AuthHttpError,
  matchesFilters,
  type AuthFilters,
  type CustomAuth,
  type RequestAuth,
} from '../auth/custom.ts';
import { routeEvent } from '../auth/events.ts';
import { isSystemAssistant } from '../graphs/index.ts';
import { isUiAssetRequest } from '../routes/ui.ts';

declare module 'fastify' {
  interface FastifyRequest {
    /** The caller as custom auth sees them; null without custom auth or on open paths. */
    auth: RequestAuth | null;
    /** What the route's auth handler decided (authorizer.ts). */
    authz: RouteAuthz | null;
  }
}

/** Events whose request names an assistant that the run (or the cron's runs) will use. */
const RUNS_AN_ASSISTANT = new Set(['threads:create_run', 'crons:create']);

/** Reachable without authentication, as on the reference server: the health probe and the server's description. */
const OPEN_PATHS = new Set(['/ok', '/info']);

/** The request as `authenticate` receives it: method, URL and headers (the body is not read yet at this point). */
export function toFetchRequest(req: FastifyRequest, body?: Uint8Array | null): Request {
  const headers = new Headers();
  for (const [name, value] of Object.entries(req.raw.headers)) {
    if (value === undefined || name.startsWith(':')) continue;
    for (const v of Array.isArray(value) ? value : [value]) headers.append(name, v);
  }
  const host = req.headers.host ?? 'localhost';
  const init: RequestInit & { duplex?: 'half' } = { method: req.method, headers };
  if (body !== undefined && body !== null && req.method !== 'GET' && req.method !== 'HEAD') {
    init.body = body as unknown as RequestInit['body'];
    init.duplex = 'half';
  }
  return new Request(`${req.protocol}://${host}${req.url}`, init);
}

export function isOpenPath(req: FastifyRequest): boolean {
  const path = req.url.split('?', 1)[0]!;
  return req.method === 'OPTIONS' || OPEN_PATHS.has(path) || isUiAssetRequest(req.method, path);
}

/** Runs `authenticate`; answers the request itself (and returns false) when it refuses or fails. */
export async function authenticateRequest(
  auth: CustomAuth,
  req: FastifyRequest,
  reply: FastifyReply,
): Promise<boolean> {
  if (isOpenPath(req) || req.auth) return true;
  try {
    req.auth = await auth.authenticate(toFetchRequest(req));
    return true;
  } catch (err) {
    if (err instanceof AuthHttpError) {
      await reply.code(err.status).headers(err.headers).send({ detail: err.message });
    } else {
      req.log.error(
        { err, auth: auth.source },
        err instanceof AuthHandlerError ? err.message : 'custom authenticate failed',
      );
      await reply.code(500).send({ detail: 'Internal server error' });
    }
    return false;
  }
}

/**
 * Runs `authenticate` without answering: a request that may still be a custom route's (open to anyone) learns its
 * caller when there is one, and is refused by authenticateRequest later if it reaches a built-in route after all.
 */
export async function identifyCaller(auth: CustomAuth, req: FastifyRequest): Promise<void> {
  if (isOpenPath(req) || req.auth) return;
  try {
    req.auth = await auth.authenticate(toFetchRequest(req));
  } catch {
    // Refused or failed: authenticateRequest answers it (and logs a failure) if no custom route does.
  }
}

export interface CustomAuthDeps {
  auth: CustomAuth;
  service: AgentService;
  /** Authenticate in onRequest (false when another hook calls authenticateRequest itself, e.g. after custom routes). */
  authenticateOnRequest: boolean;
}

/** Installs the hooks; returns the authorizer for transports that carry several actions (WebSockets). */
export function installCustomAuth(app: FastifyInstance, deps: CustomAuthDeps): RouteAuthorizer {
  const { auth, service } = deps;
  app.decorateRequest('auth', null);
  app.decorateRequest('authz', null);
  if (deps.authenticateOnRequest) {
    app.addHook('onRequest', async (req, reply) => {
      await authenticateRequest(auth, req, reply);
    });
  }
  /**
   * POST /assistants or POST /threads naming an id taken by a record the caller may not read (by the create
   * handler's filter or the read handler's): the 409 of if_exists "raise", never the record (do_nothing would
   * answer it whole).
   */
  async function refuseHidden(
    user: RequestAuth | null,
    kind: 'assistant' | 'thread',
    id: string,
    createFilters: AuthFilters | undefined,
  ): Promise<void> {
    const existing = kind === 'assistant' ? await service.assistants.get(id) : await service.threads.get(id);
    if (!existing) return;
    let visible = matchesFilters(existing.metadata, createFilters);
    if (visible) {
      try {
        const read = kind === 'assistant' ? { assistant_id: id } : { thread_id: id };
        visible = matchesFilters(existing.metadata, await auth.authorize(user, `${kind}s:read`, read));
      } catch (err) {
        if (!(err instanceof ForbiddenError)) throw err;
        visible = false;
      }
    }
    if (!visible) throw new ConflictError(`${kind === 'assistant' ? 'Assistant' : 'Thread'} ${id} already exists`);
  }

  const authorize: RouteAuthorizer = async (user, method, routeUrl, parts) => {
    const route = routeEvent(method, routeUrl, parts);
    if (!route) return null;
    // A run or cron uses the assistant it names: the caller must be able to read it, else it is "not found" (the
    // run record would echo its config and context, the run its behaviour).
    const assistantFilter: AssistantReadFilter | undefined = RUNS_AN_ASSISTANT.has(route.event)
      ? (assistantId) => auth.authorize(user, 'assistants:read', { assistant_id: assistantId })
      : undefined;
    if (route.perItem && Array.isArray(parts.body)) {
      const items: Array<{ filters?: AuthFilters; runId?: string }> = [];
      for (const body of parts.body as unknown[]) {
        const value = route.value({ params: parts.params, body, query: parts.query });
        const filters = await auth.authorize(user, route.event, value);
        items.push({ filters, runId: typeof value.run_id === 'string' ? value.run_id : undefined });
      }
      return { items, assistantFilter };
    }
    const value = route.value(parts);
    const filters = await auth.authorize(user, route.event, value);
    const authz: RouteAuthz = {
      filters,
      runId: typeof value.run_id === 'string' ? value.run_id : undefined,
      assistantFilter,
    };
    if (route.event === 'assistants:delete') {
      authz.threadDeleteFilter = () =>
        auth.authorize(user, 'threads:delete', { thread_id: null, assistant_id: value.assistant_id ?? null });
    }
    if (route.event === 'assistants:create' && typeof value.assistant_id === 'string') {
      await refuseHidden(user, 'assistant', value.assistant_id, filters);
    } else if (route.event === 'threads:create' && typeof value.thread_id === 'string') {
      await refuseHidden(user, 'thread', value.thread_id, filters);
    }
    if (!filters) return authz;
    const p = (parts.params ?? {}) as Record<string, string>;
    if (route.scope === 'thread' && p.thread_id) {
      const thread = await service.threads.get(p.thread_id);
      if (thread && !matchesFilters(thread.metadata, filters))
        throw new NotFoundError(`Thread not found: ${p.thread_id}`);
    } else if (route.scope === 'assistant' && p.assistant_id) {
      const assistant = await service.assistants.resolve(p.assistant_id);
      const readable = route.event === 'assistants:read' && isSystemAssistant(assistant);
      if (!readable && !matchesFilters(assistant.metadata, filters))
        throw new NotFoundError(`Assistant not found: ${p.assistant_id}`);
    } else if (route.scope === 'cron' && p.cron_id) {
      const cron = await service.crons.get(p.cron_id);
      if (cron && !matchesFilters(cron.metadata, filters)) throw new NotFoundError(`Cron not found: ${p.cron_id}`);
    }
    return authz;
  };

  app.addHook('preHandler', async (req) => {
    if (isOpenPath(req)) return;
    const authz = await authorize(req.auth, req.method, req.routeOptions.url, req);
    if (authz) req.authz = authz;
  });
  return authorize;
}

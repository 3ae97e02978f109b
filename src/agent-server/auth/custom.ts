// Custom auth from langgraph.json ("auth": {"path": "./auth.ts:auth"}): the project exports an `Auth` of
// @langchain/langgraph-sdk/auth. Its `authenticate` callback turns a request into a user; its `on(...)` callbacks
// allow, deny or narrow each action on a resource by returning a metadata filter. The Auth object comes from the
// project's own copy of the SDK, so it is handled by shape (`~handlerCache`), not by class.
import { AppError, ForbiddenError } from '../../lib/errors.ts';
import { GraphConfigError } from '../graphs/config.ts';
import { importProjectExport } from '../graphs/project-export.ts';
import type { Json } from '../storage/types.ts';

/** The user as handlers and graphs see it (`config.configurable.langgraph_auth_user`). */
export interface AuthUser {
  identity: string;
  display_name: string;
  is_authenticated: boolean;
  permissions: string[];
  [extra: string]: unknown;
}

/** Who sent the request: set on every request once `authenticate` accepted it. */
export interface RequestAuth {
  user: AuthUser;
  permissions: string[];
}

/** A filter an `on(...)` handler returns: metadata key -> value, `{$eq: value}` or `{$contains: value(s)}`. */
export type AuthFilters = Record<string, unknown>;

type Callback = (arg: Record<string, unknown>) => unknown;

interface HandlerCache {
  authenticate?: (request: Request) => unknown;
  callbacks?: Record<string, Callback>;
}

/** An error a handler threw to answer with its own status (the SDK's HTTPException, or anything shaped like it). */
export class AuthHttpError extends AppError {
  constructor(
    status: number,
    message: string,
    readonly headers: Record<string, string>,
  ) {
    super(message, status);
  }
}

function asHttpError(err: unknown): AuthHttpError | null {
  if (typeof err !== 'object' || err === null) return null;
  const e = err as { status?: unknown; headers?: unknown; message?: unknown };
  if (typeof e.status !== 'number' || !Number.isInteger(e.status) || e.status < 400 || e.status > 599) return null;
  if (!('headers' in e)) return null;
  const headers: Record<string, string> = {};
  try {
    new Headers(e.headers as ConstructorParameters<typeof Headers>[0]).forEach((v, k) => (headers[k] = v));
  } catch {
    // Unusable headers are dropped; the status still counts.
  }
  const message = typeof e.message === 'string' && e.message ? e.message : 'Unauthorized';
  return new AuthHttpError(e.status, message, headers);
}

/** Raised when `authenticate` or a handler fails with a plain error: a bug in the auth file, answered with 500. */
export class AuthHandlerError extends Error {
  override name = 'AuthHandlerError';
}

function rethrow(err: unknown, where: string): never {
  const http = asHttpError(err);
  if (http) throw http;
  if (err instanceof AppError) throw err;
  throw new AuthHandlerError(`${where} threw: ${(err as Error)?.message ?? String(err)}`, { cause: err });
}

/** `authenticate` may return a string (the identity) or an object with at least `identity`. */
export function normalizeUser(result: unknown): RequestAuth {
  if (typeof result === 'string' && result) {
    return {
      user: { identity: result, display_name: result, is_authenticated: true, permissions: [] },
      permissions: [],
    };
  }
  if (
    typeof result === 'object' &&
    result !== null &&
    typeof (result as { identity?: unknown }).identity === 'string'
  ) {
    const r = result as Record<string, unknown> & { identity: string };
    const permissions = Array.isArray(r.permissions)
      ? r.permissions.filter((p): p is string => typeof p === 'string')
      : [];
    return {
      user: {
        ...r,
        identity: r.identity,
        permissions,
        is_authenticated: typeof r.is_authenticated === 'boolean' ? r.is_authenticated : true,
        display_name: typeof r.display_name === 'string' ? r.display_name : r.identity,
      },
      permissions,
    };
  }
  throw new AuthHandlerError('authenticate must return a string or an object with a string "identity"');
}

export interface CustomAuth {
  /** The `path` as written in langgraph.json, for logs. */
  readonly source: string;
  readonly hasAuthenticate: boolean;
  /** Runs `authenticate`; AuthHttpError carries the handler's status, AuthHandlerError is a bug in the file. */
  authenticate(request: Request): Promise<RequestAuth | null>;
  /**
   * Runs the most specific handler for `event` ("threads:read"): `resource:action`, then `resource`, `*:action`,
   * `*`. Returns the filter it gave (undefined: no restriction); false -> ForbiddenError. `value` is passed as
   * is, so a handler that edits `value.metadata` edits what will be written.
   */
  authorize(auth: RequestAuth | null, event: string, value: Json): Promise<AuthFilters | undefined>;
}

export function createCustomAuth(handlers: HandlerCache, source: string): CustomAuth {
  const callbacks = handlers.callbacks ?? {};
  return {
    source,
    hasAuthenticate: typeof handlers.authenticate === 'function',
    async authenticate(request) {
      if (typeof handlers.authenticate !== 'function') return null;
      let result: unknown;
      try {
        result = await handlers.authenticate(request);
      } catch (err) {
        rethrow(err, 'authenticate');
      }
      return normalizeUser(result);
    },
    async authorize(auth, event, value) {
      const [resource, action] = event.split(':') as [string, string];
      const key = [event, resource, `*:${action}`, '*'].find((k) => typeof callbacks[k] === 'function');
      // Without a user (no authenticate callback) there is nobody to authorize, as on the reference server.
      if (!key || !auth) return undefined;
      let result: unknown;
      try {
        result = await callbacks[key]!({
          event,
          resource,
          action,
          value,
          user: auth.user,
          permissions: auth.permissions,
        });
      } catch (err) {
        rethrow(err, `the "${key}" handler`);
      }
      if (result === undefined || result === null || result === true) return undefined;
      if (result === false) throw new ForbiddenError(`Forbidden: ${event} denied by the auth handler.`);
      if (typeof result !== 'object' || Array.isArray(result)) {
        throw new AuthHandlerError(
          `the "${key}" handler returned ${typeof result}; expected a filter object, a boolean or nothing`,
        );
      }
      return Object.keys(result).length ? (result as AuthFilters) : undefined;
    },
  };
}

/** Imports the `auth.path` module ("./auth.ts:auth", export "default" when no name is given). */
export async function loadCustomAuth(spec: string, projectDir: string): Promise<CustomAuth> {
  const { value, exportName, file: abs } = await importProjectExport('auth.path', spec, projectDir);
  const exported = value as { '~handlerCache'?: HandlerCache } | undefined;
  if (!exported || typeof exported !== 'object' || typeof exported['~handlerCache'] !== 'object') {
    throw new GraphConfigError(
      `auth.path "${spec}": export "${exportName}" of ${abs} is not an Auth from @langchain/langgraph-sdk/auth`,
    );
  }
  return createCustomAuth(exported['~handlerCache']!, spec);
}

function filterValue(f: unknown): { eq?: unknown; contains?: unknown[] } {
  if (typeof f === 'object' && f !== null && !Array.isArray(f)) {
    const o = f as { $eq?: unknown; $contains?: unknown };
    if ('$eq' in o) return { eq: o.$eq };
    if ('$contains' in o) return { contains: Array.isArray(o.$contains) ? o.$contains : [o.$contains] };
  }
  return { eq: f };
}

/** True when `metadata` satisfies every condition of `filters` (equality, or list containment for $contains). */
export function matchesFilters(metadata: Json | null | undefined, filters: AuthFilters | undefined): boolean {
  if (!filters) return true;
  for (const [key, f] of Object.entries(filters)) {
    const actual = metadata?.[key];
    const { eq, contains } = filterValue(f);
    if (contains) {
      if (!Array.isArray(actual) || !contains.every((c) => actual.some((a) => deepEqual(a, c)))) return false;
    } else if (!deepEqual(actual, eq)) {
      return false;
    }
  }
  return true;
}

/** The equality conditions of a filter as plain metadata, which the stores can filter on and new records carry. */
export function equalityPart(filters: AuthFilters | undefined): Json {
  const out: Json = {};
  for (const [key, f] of Object.entries(filters ?? {})) {
    const { eq, contains } = filterValue(f);
    if (!contains) out[key] = eq;
  }
  return out;
}

/**
 * A search's own metadata filter combined with the handler's equality conditions; null when both ask for
 * different values of one key (nothing can match).
 */
export function mergeMetadataFilter(query: Json | null | undefined, filters: AuthFilters | undefined): Json | null {
  const merged: Json = { ...(query ?? {}) };
  for (const [key, value] of Object.entries(equalityPart(filters))) {
    if (key in merged && !deepEqual(merged[key], value)) return null;
    merged[key] = value;
  }
  return merged;
}

function deepEqual(a: unknown, b: unknown): boolean {
  if (a === b) return true;
  if (typeof a !== 'object' || typeof b !== 'object' || a === null || b === null) return false;
  if (Array.isArray(a) !== Array.isArray(b)) return false;
  const ka = Object.keys(a);
  const kb = Object.keys(b);
  if (ka.length !== kb.length) return false;
  return ka.every((k) => deepEqual((a as Json)[k], (b as Json)[k]));
}

/** Whether a filter has conditions the stores cannot apply ($contains): those are checked on the rows. */
export function hasRowConditions(filters: AuthFilters | undefined): boolean {
  return Object.values(filters ?? {}).some((f) => typeof f === 'object' && f !== null && '$contains' in f);
}

/**
 * One page of a search under a handler's filter. The store applies the equality part; when the filter also has row
 * conditions, every match is read and checked here, so that the page, its offset and "is there a next page" count
 * only rows the caller may see (a short page or a next-page header must not reveal hidden rows).
 */
export async function visiblePage<T extends { metadata: Json }>(
  search: (limit: number, offset: number) => Promise<T[]>,
  filters: AuthFilters | undefined,
  limit: number,
  offset: number,
): Promise<{ rows: T[]; more: boolean }> {
  if (!hasRowConditions(filters)) {
    const rows = await search(limit, offset);
    return { rows: rows.filter((r) => matchesFilters(r.metadata, filters)), more: rows.length === limit };
  }
  const all = (await search(2_147_483_647, 0)).filter((r) => matchesFilters(r.metadata, filters));
  return { rows: all.slice(offset, offset + limit), more: all.length > offset + limit };
}

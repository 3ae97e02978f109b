// The shape of custom auth's decisions, shared by the hooks that make them (auth-hooks.ts) and the routes that carry
// several actions over one request (a protocol WebSocket), without the routes importing the hooks.
import type { AssistantReadFilter } from '../services/context.ts';
import type { AuthFilters, RequestAuth } from '../auth/custom.ts';

/**
 * What a request may do under custom auth: the route handler's filter, the run id shown to a create_run handler,
 * and (routes that name an assistant to run) the caller's assistants:read filter, applied where the assistant is
 * read.
 */
export interface RouteAuthz {
  filters?: AuthFilters;
  runId?: string;
  items?: Array<{ filters?: AuthFilters; runId?: string }>;
  assistantFilter?: AssistantReadFilter;
  /** DELETE /assistants/{id}?delete_threads: the caller's threads:delete filter for the threads that go too. */
  threadDeleteFilter?: () => Promise<AuthFilters | undefined>;
}

/**
 * The one authorisation path of every action, whatever its transport: the route's auth event (auth/events.ts), its
 * handler's filter checked against the record the path names, and the assistants:read filter of a run's assistant.
 * HTTP requests come through the hooks' preHandler; a command over a protocol WebSocket is authorized as the
 * `POST /threads/{id}/commands` it stands for. Null: the route raises no event (only authenticated).
 */
export type RouteAuthorizer = (
  user: RequestAuth | null,
  method: string,
  routeUrl: string | undefined,
  parts: { params: unknown; body: unknown; query: unknown },
) => Promise<RouteAuthz | null>;

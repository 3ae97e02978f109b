// The "http" settings of langgraph.json that shape routing: mount_prefix and the disable_* switches.
import type { FastifyInstance } from 'fastify';
import type { HttpSettings } from './extensions.ts';

/** Paths the mount prefix does not move: the platform's health probe. */
const UNPREFIXED = new Set(['/ok']);

/** Strips http.mount_prefix; a path outside it gets one no route has, so it ends in the 404 handler. */
export function prefixRewriter(prefix: string | undefined) {
  if (!prefix) return undefined;
  return (raw: { url?: string }) => {
    const url = raw.url ?? '/';
    if (UNPREFIXED.has(url.split('?', 1)[0]!)) return url;
    if (url === prefix || url.startsWith(`${prefix}/`) || url.startsWith(`${prefix}?`)) {
      const rest = url.slice(prefix.length);
      return rest.startsWith('/') ? rest : `/${rest}`;
    }
    return `/__outside_mount_prefix__${url}`;
  };
}

/** The platform's meta routes: what the server is and how it runs. /ok stays (it is the health probe). */
const META = (routeUrl: string) =>
  routeUrl === '/info' || routeUrl === '/metrics' || routeUrl === '/openapi.json' || routeUrl.startsWith('/docs');

/** Built-in route groups a project can switch off ("http": {"disable_threads": true, ...}). */
export function disabledGroup(http: HttpSettings, routeUrl: string | undefined): string | null {
  if (!routeUrl) return null;
  if (http.disable_meta && META(routeUrl)) return 'meta';
  if (http.disable_ui && routeUrl.startsWith('/ui/')) return 'ui';
  if (http.disable_assistants && routeUrl.startsWith('/assistants')) return 'assistants';
  const runRoute = routeUrl.startsWith('/runs') || routeUrl.startsWith('/threads/:thread_id/runs');
  if (http.disable_runs && runRoute) return 'runs';
  if (http.disable_threads && routeUrl.startsWith('/threads') && !runRoute) return 'threads';
  if (http.disable_store && routeUrl.startsWith('/store')) return 'store';
  if (http.disable_mcp && routeUrl === '/mcp') return 'mcp';
  if (http.disable_a2a && (routeUrl.startsWith('/a2a/') || routeUrl === '/.well-known/agent-card.json')) return 'a2a';
  return null;
}

/** Answers 404 for the switched-off groups; custom routes of the same paths still answer (they run earlier). */
export function installDisabledGroups(app: FastifyInstance, http: HttpSettings): void {
  const any =
    http.disable_meta ||
    http.disable_ui ||
    http.disable_assistants ||
    http.disable_runs ||
    http.disable_threads ||
    http.disable_store ||
    http.disable_mcp ||
    http.disable_a2a;
  if (!any) return;
  app.addHook('onRequest', async (req, reply) => {
    if (disabledGroup(http, req.routeOptions.url)) {
      return reply.code(404).send({ detail: `Not found: ${req.method} ${req.originalUrl}` });
    }
  });
}

// Generative UI routes, as LoadExternalComponent (@langchain/langgraph-sdk/react-ui) uses them:
// - POST /ui/{assistant_id} {"name": component} answers an HTML snippet that the client puts into the component's
//   shadow root: a stylesheet link (when the components import CSS) and a script whose onload renders the named
//   component into the shadow root "{{shadowRootId}}" (the client substitutes the placeholder);
// - GET /ui/{graph_id}/{file} serves the bundled files (graphs/ui.ts). They are static front-end code from the
//   repository, loaded by <script>/<link> tags that cannot send an API key, so they need none.
import type { FastifyRequest } from 'fastify';
import type { FastifyPluginAsyncZod } from 'fastify-type-provider-zod';
import { z } from 'zod';
import { AppError, NotFoundError } from '../../lib/errors.ts';
import type { UiBundles } from '../graphs/ui.ts';
import type { RouteDeps } from './deps.ts';

const UUID_RE = /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/i;

/** GET of a bundled UI file: reachable without credentials (see the header). */
export function isUiAssetRequest(method: string, path: string): boolean {
  return (method === 'GET' || method === 'HEAD') && /^\/ui\/[^/]+\/[^/]+$/.test(path);
}

/** A JSON string literal safe inside a single-quoted HTML attribute and a <script> context. */
function jsString(value: string): string {
  return JSON.stringify(value).replace(
    /[<>&'\u2028\u2029]/g,
    (c) => `\\u${c.charCodeAt(0).toString(16).padStart(4, '0')}`,
  );
}

const attr = (value: string) => value.replace(/&/g, '&amp;').replace(/"/g, '&quot;').replace(/</g, '&lt;');

/** First value of a proxy header, when it looks like a plain token (no injection into the snippet). */
function forwarded(req: FastifyRequest, name: string, re: RegExp): string | undefined {
  const raw = req.headers[name];
  const v = (Array.isArray(raw) ? raw[0] : raw)?.split(',', 1)[0]?.trim();
  return v && re.test(v) ? v : undefined;
}

/** localhost, 127.x.x.x or [::1], with or without a port. */
const LOOPBACK_HOST = /^(localhost|127(\.\d{1,3}){3}|\[::1\])(:\d+)?$/i;

/**
 * Where the browser reaches this server: the request's own host (or the proxy's, from X-Forwarded-*), plus the
 * path prefix in front of our routes (mount_prefix, or a proxy's X-Forwarded-Prefix). As on the platform, the URL
 * has no scheme (`//host/...`, the page's own) unless the host is loopback (http) or the proxy names one
 * (X-Forwarded-Proto): behind a TLS-terminating proxy that does not say so, an https page still loads the files.
 */
function publicBase(req: FastifyRequest): string {
  const host = forwarded(req, 'x-forwarded-host', /^[\w.:[\]-]+$/) ?? req.headers.host ?? 'localhost';
  const proto = forwarded(req, 'x-forwarded-proto', /^https?$/) ?? (LOOPBACK_HOST.test(host) ? req.protocol : '');
  const original = req.originalUrl.split('?', 1)[0]!;
  const routed = req.url.split('?', 1)[0]!;
  const mount = original.endsWith(routed) ? original.slice(0, original.length - routed.length) : '';
  const proxyPrefix = forwarded(req, 'x-forwarded-prefix', /^\/[\w.~/-]*$/)?.replace(/\/$/, '') ?? '';
  return `${proto ? `${proto}:` : ''}//${host}${proxyPrefix}${mount}`;
}

export const uiRoutes =
  (deps: RouteDeps & { ui: UiBundles }): FastifyPluginAsyncZod =>
  async (app) => {
    const { ui, service, graphs } = deps;

    /** The graph whose components an id names: a graph id with a "ui" entry, or an assistant (its graph). */
    async function graphOf(id: string): Promise<string> {
      if (ui.bundles.has(id) || ui.failures[id] !== undefined) return id;
      if (graphs.specs.some((s) => s.graphId === id)) return id;
      if (!UUID_RE.test(id)) throw new NotFoundError(`No assistant found for graph ${id} (assistant not found)`);
      const assistant = await service.assistants.get(id);
      if (!assistant) throw new NotFoundError(`Assistant not found: ${id}`);
      return assistant.graph_id;
    }

    app.post(
      '/ui/:assistant_id',
      {
        schema: {
          params: z.object({ assistant_id: z.string().min(1).max(256) }),
          body: z.object({ name: z.string().min(1).max(256) }),
        },
      },
      async (req, reply) => {
        const graphId = await graphOf(req.params.assistant_id);
        if (ui.failures[graphId] !== undefined) throw new AppError(ui.failures[graphId], 422);
        const bundle = ui.bundles.get(graphId);
        if (!bundle)
          throw new NotFoundError(`UI not found for graph "${graphId}" (langgraph.json has no "ui" entry for it)`);
        const base = `${publicBase(req)}/ui/${encodeURIComponent(graphId)}`;
        const parts: string[] = [];
        for (const css of bundle.assets.filter((a) => a.basename.endsWith('.css'))) {
          parts.push(`<link rel="stylesheet" href="${attr(`${base}/${encodeURIComponent(css.basename)}`)}" />`);
        }
        const js = bundle.assets.find((a) => a.basename.endsWith('.js'));
        if (js) {
          parts.push(
            `<script src="${attr(`${base}/${encodeURIComponent(js.basename)}`)}" ` +
              `onload='${bundle.globalName}.render(${jsString(req.body.name)}, "{{shadowRootId}}")'></script>`,
          );
        }
        return reply.type('text/html; charset=utf-8').send(parts.join('\n'));
      },
    );

    app.get(
      '/ui/:graph_id/:file',
      {
        schema: { params: z.object({ graph_id: z.string().min(1).max(256), file: z.string().min(1).max(256) }) },
      },
      async (req, reply) => {
        const asset = ui.bundles.get(req.params.graph_id)?.assets.find((a) => a.basename === req.params.file);
        if (!asset) throw new NotFoundError(`UI file not found: ${req.params.graph_id}/${req.params.file}`);
        return reply.type(asset.contentType).header('cache-control', 'no-cache').send(Buffer.from(asset.contents));
      },
    );
  };

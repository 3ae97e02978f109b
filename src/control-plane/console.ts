// Serves the web console (built from console/ into dist/console) at / and /api-host/, same origin as the API.
// The bundle is a handful of files known at start-up, so they are read once into a map: a request picks an entry
// by exact name and never becomes a filesystem path. The console routes with the URL hash, so no fallback route
// is needed and every unknown path keeps the API's JSON 404.
import { existsSync, readdirSync, readFileSync, statSync } from 'node:fs';
import { extname, join, relative, sep } from 'node:path';
import { packagePath } from '../lib/package-root.ts';
import type { FastifyInstance, FastifyReply } from 'fastify';

/** Where `npm run build:console` writes the bundle. */
export const DEFAULT_CONSOLE_DIR = packagePath('dist/console');

const TYPES: Record<string, string> = {
  '.html': 'text/html; charset=utf-8',
  '.js': 'text/javascript; charset=utf-8',
  '.css': 'text/css; charset=utf-8',
  '.svg': 'image/svg+xml',
  '.png': 'image/png',
  '.ico': 'image/x-icon',
  '.json': 'application/json',
  '.map': 'application/json',
  '.woff2': 'font/woff2',
};

// Scripts and styles only from this origin. Calls may go to other origins: a deployment's URL in a cluster is
// often another host, and the playground talks to it directly.
const CSP = [
  "default-src 'self'",
  "script-src 'self'",
  "style-src 'self'",
  "img-src 'self' data:",
  "connect-src 'self' http: https:",
  "frame-ancestors 'none'",
  "base-uri 'none'",
  "form-action 'self'",
].join('; ');

type Asset = { body: Buffer; type: string };

function readBundle(dir: string): Map<string, Asset> {
  const files = new Map<string, Asset>();
  const walk = (d: string) => {
    for (const name of readdirSync(d)) {
      const full = join(d, name);
      if (statSync(full).isDirectory()) walk(full);
      else
        files.set(relative(dir, full).split(sep).join('/'), {
          body: readFileSync(full),
          type: TYPES[extname(name)] ?? 'application/octet-stream',
        });
    }
  };
  walk(dir);
  return files;
}

/**
 * Registers GET / and GET /api-host/ (the page) and <prefix>/assets/* (hashed files, cached for a year).
 * Returns false, registering nothing but a hint at /, when the bundle has not been built.
 */
export function registerConsole(app: FastifyInstance, opts: { dir?: string; prefixes: string[] }): boolean {
  const dir = opts.dir ?? DEFAULT_CONSOLE_DIR;
  const built = existsSync(join(dir, 'index.html'));
  const files = built ? readBundle(dir) : new Map<string, Asset>();
  const index = files.get('index.html');

  const page = async (_req: unknown, reply: FastifyReply) => {
    if (!index) {
      return reply
        .code(404)
        .send({ detail: 'The web console is not built: run `npm run build:console` (npm ci does it).' });
    }
    return reply
      .header('content-type', index.type)
      .header('cache-control', 'no-cache')
      .header('content-security-policy', CSP)
      .header('x-content-type-options', 'nosniff')
      .header('referrer-policy', 'no-referrer')
      .header('x-frame-options', 'DENY')
      .send(index.body);
  };

  for (const prefix of opts.prefixes) {
    app.get(`${prefix}/`, { schema: { hide: true } }, page);
    if (prefix) app.get(prefix, { schema: { hide: true } }, async (_req, reply) => reply.redirect(`${prefix}/`));
    // The "View status" link `langgraph deploy` prints (LangSmith's console path, built from the control plane URL):
    // the deployment's page here. The id only ever lands in this page's hash, so the redirect goes nowhere else.
    app.get<{ Params: { tenant: string; id: string } }>(
      `${prefix}/o/:tenant/host/deployments/:id`,
      { schema: { hide: true } },
      async (req, reply) => reply.redirect(`${prefix}/#/deployments/${encodeURIComponent(req.params.id)}`),
    );
    app.get<{ Params: { '*': string } }>(`${prefix}/assets/*`, { schema: { hide: true } }, async (req, reply) => {
      const asset = files.get(`assets/${req.params['*']}`);
      if (!asset) return reply.code(404).send({ detail: `Not found: GET ${req.url.split('?')[0]}` });
      return reply
        .header('content-type', asset.type)
        .header('cache-control', 'public, max-age=31536000, immutable')
        .header('x-content-type-options', 'nosniff')
        .send(asset.body);
    });
  }
  return built;
}

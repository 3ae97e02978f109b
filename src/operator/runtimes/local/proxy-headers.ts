// What comes back from tenant code on its way to a browser: every response carries a sandboxing CSP (a page served
// by an agent runs in an opaque origin: no storage, no cookies, no service worker), Service-Worker-Allowed never
// passes, and neither does a cookie the browser would send to the platform's paths (cookies ignore ports).
import { TENANT_CSP } from '../../../lib/http.ts';
import { DEPLOYMENTS_PREFIX } from './proxy-target.ts';

/** Path trees the platform serves on its own origins (the console at /, the API); no tenant cookie may reach one. */
const PLATFORM_PATHS = ['/v1', '/v2', '/api-host', '/docs', '/openapi.json', '/assets', '/ok', DEPLOYMENTS_PREFIX];

/** RFC 6265 path-match: whether a cookie with `cookiePath` is sent with a request for `path`. */
function pathMatches(path: string, cookiePath: string): boolean {
  if (path === cookiePath) return true;
  return path.startsWith(cookiePath) && (cookiePath.endsWith('/') || path[cookiePath.length] === '/');
}

/** The path a Set-Cookie applies to: its Path attribute, else the request path's directory (RFC 6265 5.1.4). */
function cookiePath(setCookie: string, requestPath: string): string {
  for (const attr of setCookie.split(';').slice(1)) {
    const [name, ...value] = attr.split('=');
    if (name?.trim().toLowerCase() === 'path') {
      const p = value.join('=').trim();
      if (p.startsWith('/')) return p;
    }
  }
  const slash = requestPath.lastIndexOf('/');
  return slash <= 0 ? '/' : requestPath.slice(0, slash);
}

/** True when the browser would send this cookie to one of the platform's paths (or to others than this host). */
export function cookieReachesPlatform(setCookie: string, requestPath: string): boolean {
  if (/;\s*domain\s*=/i.test(setCookie)) return true;
  const p = cookiePath(setCookie, requestPath);
  // Sent with the console's page itself (Path=/), with requests under a platform path, or with that path itself.
  return p === '/' || PLATFORM_PATHS.some((q) => pathMatches(q, p) || pathMatches(p, q));
}

type Headers = Record<string, string | string[] | number | undefined>;

/** The response headers of tenant code as they may reach a browser. `requestPath` is the path the browser used. */
export function tenantResponseHeaders(headers: Headers, requestPath: string): Headers {
  const out: Headers = {};
  const csp: string[] = [];
  for (const [name, value] of Object.entries(headers)) {
    const lower = name.toLowerCase();
    const values = [value ?? []].flat().map(String);
    if (lower === 'service-worker-allowed') continue;
    // The tenant's own policy still applies (every policy sent is enforced); ours is added, never replaced.
    if (lower === 'content-security-policy') csp.push(...values);
    else if (lower === 'set-cookie') {
      const kept = values.filter((c) => !cookieReachesPlatform(c, requestPath));
      if (kept.length) out['set-cookie'] = [...[out['set-cookie'] ?? []].flat().map(String), ...kept];
    } else out[name] = value;
  }
  out['content-security-policy'] = [...csp, TENANT_CSP];
  return out;
}

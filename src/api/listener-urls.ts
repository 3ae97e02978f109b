// What a listener may report about the deployments assigned to it. A listener key is handed to a data plane the
// workspace does not fully control, so the control plane checks what it says before storing it: a deployment's URL
// (clients send their API key there) must lie under the base URL the workspace declared for the listener, or be the
// deployment's own custom_url. Pure functions: each returns a problem to report (a message) or undefined.

import { customUrlHost } from '../resources/index.ts';

const HTTP = new Set(['http:', 'https:']);

function parse(value: string): URL | undefined {
  try {
    return new URL(value);
  } catch {
    return undefined;
  }
}

/** A listener's base_url: an absolute http(s) URL without credentials, query or fragment. */
export function baseUrlProblem(value: string): string | undefined {
  const u = parse(value);
  if (!u || !HTTP.has(u.protocol)) return 'must be an absolute http(s) URL';
  if (u.username || u.password) return 'must not carry credentials';
  if (u.search || u.hash || value.includes('?') || value.includes('#')) return 'must not have a query or fragment';
  return undefined;
}

/** Same scheme and port, and the host itself (under the base path) or a subdomain of it (any path). */
function under(u: URL, base: URL): boolean {
  if (u.protocol !== base.protocol || u.port !== base.port) return false;
  if (u.hostname.endsWith(`.${base.hostname}`) && !/^\[|^[\d.]+$/.test(base.hostname)) return true;
  if (u.hostname !== base.hostname) return false;
  const prefix = base.pathname.endsWith('/') ? base.pathname : `${base.pathname}/`;
  return u.pathname === base.pathname || u.pathname.startsWith(prefix);
}

/**
 * A deployment URL a listener reports: http(s), no credentials, and under the listener's base_url (the host and
 * path below it, or a subdomain of its host) or at the origin of the deployment's own custom_url.
 */
export function reportedUrlProblem(
  url: string,
  allowed: { baseUrl?: string | null; customUrl?: string | null },
): string | undefined {
  const u = parse(url);
  if (!u || !HTTP.has(u.protocol)) return 'must be an absolute http(s) URL';
  if (u.username || u.password) return 'must not carry credentials';
  if (allowed.customUrl) {
    // The custom_url was checked and claimed when the deployment was written: its host, on http(s), no port.
    const custom = customUrlHost(allowed.customUrl);
    if ('host' in custom && u.hostname === custom.host && u.port === '') return undefined;
  }
  const base = allowed.baseUrl ? parse(allowed.baseUrl) : undefined;
  if (!base) {
    return "must be the deployment's custom_url: this listener declares no base_url (a workspace key sets it with PATCH /v2/listeners/{id})";
  }
  return under(u, base) ? undefined : `must lie under the listener's base_url ${allowed.baseUrl}`;
}

// Test helpers for the auth service: an HTTP server whose handler is set once its port is known (for providers
// that must know their own URL), and the end user's browser walking oidc-provider's login and consent pages.
import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { expect } from 'vitest';

/** Starts an HTTP server on 127.0.0.1 whose handler can be set after the port is known. */
export async function listen(): Promise<{
  server: Server;
  url: string;
  handle(h: Parameters<typeof createServer>[1]): void;
}> {
  let handler: Parameters<typeof createServer>[1] = (_req, res) => res.end();
  const server = createServer((req, res) => handler!(req, res));
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
  return {
    server,
    url: `http://127.0.0.1:${(server.address() as AddressInfo).port}`,
    handle: (h) => (handler = h),
  };
}

/**
 * The end user's browser: opens the sign-in link (the control plane's start URL, which sets the flow's cookie and
 * redirects to the provider), follows it through oidc-provider's login and consent pages (cookies kept), and stops
 * at the redirect back to the control plane: its URL, and the browser's cookies to open it with (the test opens
 * it, maybe twice, maybe without them). `deny` aborts at the consent page instead.
 */
export async function walkGrant(
  url: string,
  stopAt: string,
  opts: { login?: string; deny?: boolean } = {},
): Promise<{ url: string; cookie: string; authorizeUrl: string }> {
  const jar = new Map<string, string>();
  let next = new URL(url);
  let authorizeUrl = '';
  let init: RequestInit = {};
  for (let hop = 0; hop < 20; hop++) {
    const res = await fetch(next, {
      ...init,
      redirect: 'manual',
      headers: { ...(init.headers as object), cookie: [...jar].map(([k, v]) => `${k}=${v}`).join('; ') },
    });
    for (const c of res.headers.getSetCookie()) {
      const [pair] = c.split(';');
      const eq = pair!.indexOf('=');
      jar.set(pair!.slice(0, eq), pair!.slice(eq + 1));
    }
    const location = res.headers.get('location');
    if (location) {
      next = new URL(location, next);
      init = {};
      if (next.href.startsWith(stopAt) && !next.pathname.endsWith('/v2/auth/start'))
        return { url: next.href, cookie: [...jar].map(([k, v]) => `${k}=${v}`).join('; '), authorizeUrl };
      authorizeUrl ||= next.href;
      continue;
    }
    const html = await res.text();
    expect(res.status, html.slice(0, 500)).toBe(200);
    const form = (fields: Record<string, string>): RequestInit => ({
      method: 'POST',
      headers: { 'content-type': 'application/x-www-form-urlencoded' },
      body: new URLSearchParams(fields).toString(),
    });
    if (/name="prompt" value="login"/.test(html) || /name="login"/.test(html)) {
      init = form({ prompt: 'login', login: opts.login ?? 'alice', password: 'any' });
    } else if (opts.deny) {
      next = new URL(`${next.pathname}/abort`, next);
      init = {};
    } else {
      init = form({ prompt: 'consent' });
    }
  }
  throw new Error('the grant did not come back to the control plane');
}

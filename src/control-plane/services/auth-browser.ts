// The browser a sign-in began in. The link an agent hands its user is the control plane's start URL: opening it
// binds the flow to that browser with a cookie and redirects to the provider; the provider's redirect completes
// the flow only when it carries that cookie, so a callback URL replayed elsewhere (from a log, a history, a
// Referer, a screenshot) is refused. The cookie is one of our own making with a base64url value, so it is read
// and written here directly rather than through a cookie library.

/** The cookie of one flow (one per flow, so flows started side by side in one browser do not overwrite each other). */
export const flowCookieName = (authId: string): string => `ap_oauth_${authId.replace(/-/g, '')}`;

/** The value of cookie `name` in a Cookie header. */
export function readCookie(header: string | undefined, name: string): string | undefined {
  for (const part of (header ?? '').split(';')) {
    const eq = part.indexOf('=');
    if (eq > 0 && part.slice(0, eq).trim() === name) return part.slice(eq + 1).trim();
  }
  return undefined;
}

/**
 * Set-Cookie for a flow, scoped to the auth paths under the public URL. Over https it is SameSite=None (and Secure)
 * because a provider answering with response_mode=form_post comes back with a cross-site POST, which Lax cookies
 * do not follow; over http (one machine) browsers refuse SameSite=None, so it is Lax.
 */
export function flowCookie(publicUrl: string, name: string, value: string, maxAgeSeconds: number): string {
  const u = new URL(publicUrl);
  const path = `${u.pathname.replace(/\/+$/, '')}/v2/auth/`;
  const site = u.protocol === 'https:' ? 'SameSite=None; Secure' : 'SameSite=Lax';
  return `${name}=${value}; Path=${path}; Max-Age=${Math.max(0, Math.floor(maxAgeSeconds))}; HttpOnly; ${site}`;
}

// An authorization flow's record and the browser it began in. The link an agent hands its user is the control
// plane's start URL: opening it binds the flow to that browser with a cookie and redirects to the provider; the
// provider's redirect completes the flow only when it carries that cookie, so a callback URL replayed elsewhere
// (from a log, a history, a Referer, a screenshot) is refused. The cookie is one of our own making with a
// base64url value, so it is read and written here directly rather than through a cookie library.
import { createHash, randomBytes, timingSafeEqual } from 'node:crypto';
import { NotFoundError } from '../../../lib/errors.ts';
import { isUuid } from '../../../resources/index.ts';
import { StaleResourceVersionError } from '../../../state/errors.ts';
import { type AuthObject, type AuthObjectStore } from '../../../state/auth-objects.ts';

export type FlowRecord = {
  auth_id: string;
  provider_id: string;
  user_id: string;
  scopes: string[];
  redirect_uri: string;
  expires_at: string;
  /** pending -> taken (the state was used) -> completed | failed. */
  status: 'pending' | 'taken' | 'completed' | 'failed';
  /** SHA-256 (base64) of the cookie of the browser that opened the start link; only that browser may complete. */
  browser?: string;
  error?: string;
  created_at: string;
};
export type FlowSecret = { state_hash: string; code_verifier: string; authorization_url?: string };

/** The start link: on to the provider (binding the flow to this browser), or a page saying why not. */
export type StartResult = { ok: true; location: string; cookie?: string } | { ok: false; status: 400; message: string };

const sha256 = (s: string) => createHash('sha256').update(s).digest();

/** The cookie of one flow (one per flow, so flows started side by side in one browser do not overwrite each other). */
export const flowCookieName = (authId: string): string => `ap_oauth_${authId.replace(/-/g, '')}`;

/** The value of cookie `name` in a Cookie header. */
function readCookie(header: string | undefined, name: string): string | undefined {
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

/** Opening flows by their state and binding them to a browser, over the auth service's store and keys. */
export function flowBinding(deps: {
  store: AuthObjectStore;
  unseal: <T>(o: AuthObject) => Promise<T>;
  now: () => number;
  publicBase: () => string;
}) {
  const { store, unseal, now, publicBase } = deps;
  const elsewhere = 'This sign-in was already started in another browser; ask the agent for a new link.';

  /**
   * The flow a state names, when the state is its own (constant-time) and still open; otherwise the page's text.
   * `providerId`: the callback's path must name the flow's provider.
   */
  async function openFlow(
    state: string,
    providerId?: string,
  ): Promise<{ obj: AuthObject; flow: FlowRecord; secret: FlowSecret } | { refused: string }> {
    const authId = state.split('.')[0] ?? '';
    if (!isUuid(authId)) return { refused: 'This link is not valid (missing or malformed state).' };
    const obj = await store.getAuthObject('flow', authId);
    if (!obj) return { refused: 'This link is not valid or was already used.' };
    const flow = JSON.parse(obj.record) as FlowRecord;
    const secret = await unseal<FlowSecret>(obj);
    const given = sha256(state);
    const expected = Buffer.from(secret.state_hash, 'base64');
    if (
      given.length !== expected.length ||
      !timingSafeEqual(given, expected) ||
      (providerId !== undefined && flow.provider_id !== providerId)
    ) {
      return { refused: 'This link is not valid or was already used.' };
    }
    if (flow.status !== 'pending') return { refused: 'This link was already used.' };
    if (Date.parse(flow.expires_at) <= now()) return { refused: 'This link has expired; ask the agent for a new one.' };
    return { obj, flow, secret };
  }

  /** Whether the Cookie header carries the cookie of the browser the flow is bound to. */
  function sameBrowser(flow: FlowRecord, cookieHeader: string | undefined): boolean {
    const value = readCookie(cookieHeader, flowCookieName(flow.auth_id));
    if (!flow.browser || !value) return false;
    const given = sha256(value);
    const expected = Buffer.from(flow.browser, 'base64');
    return given.length === expected.length && timingSafeEqual(given, expected);
  }

  /**
   * The start link, opened by the end user's browser: the first browser to open it gets the flow's cookie (the
   * binding is a compare-and-swap, so of two browsers racing one wins) and is sent to the provider; the same
   * browser may open it again, any other is refused.
   */
  async function start(state: string, cookieHeader: string | undefined): Promise<StartResult> {
    const refused = (message: string): StartResult => ({ ok: false, status: 400, message });
    const found = await openFlow(state);
    if ('refused' in found) return refused(found.refused);
    const { obj, flow, secret } = found;
    if (!secret.authorization_url) return refused('This link is not valid; ask the agent for a new one.');
    if (flow.browser) {
      return sameBrowser(flow, cookieHeader) ? { ok: true, location: secret.authorization_url } : refused(elsewhere);
    }
    const key = randomBytes(32).toString('base64url');
    const bound: FlowRecord = { ...flow, browser: sha256(key).toString('base64') };
    try {
      await store.replaceAuthObject({ ...obj, record: JSON.stringify(bound) });
    } catch (err) {
      if (err instanceof StaleResourceVersionError || err instanceof NotFoundError) return refused(elsewhere);
      throw err;
    }
    const maxAge = (Date.parse(flow.expires_at) - now()) / 1000;
    return {
      ok: true,
      location: secret.authorization_url,
      cookie: flowCookie(publicBase(), flowCookieName(flow.auth_id), key, maxAge),
    };
  }

  return { openFlow, sameBrowser, start };
}

// Hiding credentials that may sit in URLs (`https://user:token@host/...`) before a URL is shown, logged or returned.
// Hand-written: WHATWG URL would also normalise the rest of the URL, and scp-like git addresses are not URLs at all.

const MASK = '***';

/** `scheme://userinfo@` at the start of a URL or anywhere in a line of text; up to the authority's last "@", since a
 *  typed password may hold an unescaped "@" too. */
const SCHEME_USERINFO = /([A-Za-z][A-Za-z0-9+.-]*:\/\/)([^\s/?#]*)@/g;

function maskUserinfo(scheme: string, userinfo: string): string {
  // Over http(s) a bare user name is usually a token (https://<token>@github.com/...): hide it all. Elsewhere
  // (ssh://git@host) the user name is an account name and stays readable; a password never does.
  if (/^https?:\/\/$/i.test(scheme)) return MASK;
  const colon = userinfo.indexOf(':');
  return colon < 0 ? userinfo : `${userinfo.slice(0, colon)}:${MASK}`;
}

/** The URL with any password (and, over http(s), any user name) replaced by `***`; other text unchanged. */
export function redactUrl(url: string): string {
  const masked = redactUrlsIn(url);
  if (masked !== url) return masked;
  // scp-like `user:password@host:path` (git itself has no password there, but a caller may have typed one).
  const scp = /^([^\s/:@]+):([^\s/@]+)@/.exec(url);
  return scp ? `${scp[1]}:${MASK}@${url.slice(scp[0].length)}` : url;
}

/** Every `scheme://user:password@` in free text (status messages, log lines) with its credentials masked. */
export function redactUrlsIn(text: string): string {
  return text.replace(
    SCHEME_USERINFO,
    (_m, scheme: string, userinfo: string) => `${scheme}${maskUserinfo(scheme, userinfo)}@`,
  );
}

// Hiding credentials that may sit in URLs (`https://user:token@host/...`) before a URL is shown, logged or returned.
// Hand-written: WHATWG URL would also normalise the rest of the URL, and scp-like git addresses are not URLs at all.
// The scan is one pass over the text (no regular expression): it runs over tenant-controlled build output and log
// lines, where a backtracking pattern (`[A-Za-z][A-Za-z0-9+.-]*://` tried at every offset) is quadratic.

const MASK = '***';

const isLetter = (c: number) => (c >= 65 && c <= 90) || (c >= 97 && c <= 122);
const isDigit = (c: number) => c >= 48 && c <= 57;
/** RFC 3986 scheme characters after the first: letters, digits, "+", "-", ".". */
const isSchemeChar = (c: number) => isLetter(c) || isDigit(c) || c === 43 || c === 45 || c === 46;
/** What JavaScript's `\s` matches. */
function isSpace(c: number): boolean {
  if (c <= 32) return c === 32 || (c >= 9 && c <= 13);
  if (c < 0xa0) return false;
  return (
    c === 0xa0 ||
    c === 0x1680 ||
    (c >= 0x2000 && c <= 0x200a) ||
    c === 0x2028 ||
    c === 0x2029 ||
    c === 0x202f ||
    c === 0x205f ||
    c === 0x3000 ||
    c === 0xfeff
  );
}
/** The authority ends at whitespace or at the start of the path, query or fragment. */
const endsAuthority = (c: number) => c === 47 || c === 63 || c === 35 || isSpace(c);

/**
 * Every `scheme://userinfo@` in `text` (the userinfo up to the authority's last "@", since a typed password may hold
 * an unescaped "@" too) replaced by `scheme://<mask(scheme, userinfo)>@`. Linear: each character is looked at a
 * bounded number of times (once scanning back over a scheme, once scanning an authority).
 */
export function replaceUrlUserinfo(text: string, mask: (scheme: string, userinfo: string) => string): string {
  let out = '';
  let copied = 0;
  let sep = text.indexOf('://');
  while (sep >= 0) {
    // The scheme: the run of scheme characters just before "://", from its first letter on. The run cannot reach
    // back past the previous "://" (":" and "/" end it), so no character is scanned back twice.
    let start = sep;
    while (start > copied && isSchemeChar(text.charCodeAt(start - 1))) start--;
    while (start < sep && !isLetter(text.charCodeAt(start))) start++;
    let end = sep + 3;
    let lastAt = -1;
    for (; end < text.length; end++) {
      const c = text.charCodeAt(end);
      if (c === 64) lastAt = end;
      else if (endsAuthority(c)) break;
    }
    if (start < sep && lastAt >= 0) {
      const scheme = text.slice(start, sep + 3);
      out += `${text.slice(copied, start)}${scheme}${mask(scheme, text.slice(sep + 3, lastAt))}@`;
      copied = lastAt + 1;
    }
    // The next "://" starts at the authority's last character at the earliest (the authority holds no "/").
    sep = text.indexOf('://', Math.max(end - 1, sep + 1));
  }
  return copied === 0 ? text : out + text.slice(copied);
}

function maskUserinfo(scheme: string, userinfo: string): string {
  // Over http(s) a bare user name is usually a token (https://<token>@github.com/...): hide it all. Elsewhere
  // (ssh://git@host) the user name is an account name and stays readable; a password never does.
  const s = scheme.toLowerCase();
  if (s === 'http://' || s === 'https://') return MASK;
  const colon = userinfo.indexOf(':');
  return colon < 0 ? userinfo : `${userinfo.slice(0, colon)}:${MASK}`;
}

/** The URL with any password (and, over http(s), any user name) replaced by `***`; other text unchanged. */
export function redactUrl(url: string): string {
  const masked = redactUrlsIn(url);
  if (masked !== url) return masked;
  // scp-like `user:password@host:path` (git itself has no password there, but a caller may have typed one).
  // Anchored, and each class excludes the delimiter that follows it: linear.
  const scp = /^([^\s/:@]+):([^\s/@]+)@/.exec(url);
  return scp ? `${scp[1]}:${MASK}@${url.slice(scp[0].length)}` : url;
}

/** Every `scheme://user:password@` in free text (status messages, log lines) with its credentials masked. */
export function redactUrlsIn(text: string): string {
  return replaceUrlUserinfo(text, maskUserinfo);
}

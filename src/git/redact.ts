// Credentials in repository URLs (https://user:token@host/...) must not reach logs, status messages or argv.
import { replaceUrlUserinfo } from '../lib/redact.ts';

const hideAll = () => '***';

/** The URL with its user name and password replaced by "***" (anything that is not a URL is left as it is). */
export function redactUrl(url: string): string {
  return replaceUrlUserinfo(url, hideAll);
}

/** Redacts every URL with credentials inside a line of text (git echoes URLs in its own messages); linear. */
export function redactText(text: string): string {
  return replaceUrlUserinfo(text, hideAll);
}

/** Splits credentials out of an http(s) URL so they can be handed to git outside its argv. */
export function splitCredentials(url: string): { url: string; username?: string; password?: string } {
  if (!/^https?:\/\//i.test(url)) return { url };
  let parsed: URL;
  try {
    parsed = new URL(url);
  } catch {
    return { url };
  }
  if (!parsed.username && !parsed.password) return { url };
  const username = decodeURIComponent(parsed.username);
  const password = decodeURIComponent(parsed.password);
  parsed.username = '';
  parsed.password = '';
  return { url: parsed.toString(), username, password };
}

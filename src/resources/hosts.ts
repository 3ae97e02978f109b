// Host names in resources: the Kubernetes DNS subdomain rule and the host a custom_url names. Shared by the control
// plane's input rules and the state (custom host claims are keyed by this host).

// eslint-disable-next-line no-control-regex -- control characters are what this rejects
const CONTROL = /[\u0000-\u001f\u007f]/;
const DNS_LABEL = /^[a-z0-9]([-a-z0-9]*[a-z0-9])?$/;

/** Kubernetes DNS subdomain (object names such as Secrets and ServiceAccounts). */
export function isDnsSubdomain(value: string): boolean {
  return value.length > 0 && value.length <= 253 && value.split('.').every((l) => DNS_LABEL.test(l));
}

/** The host of a custom_url (an http(s) URL or a bare host), lower-cased; or the reason it is not acceptable. */
export function customUrlHost(value: string): { host: string } | { problem: string } {
  if (CONTROL.test(value) || /\s/.test(value)) return { problem: 'must not contain whitespace or control characters' };
  const hasScheme = /^[A-Za-z][A-Za-z0-9+.-]*:\/\//.test(value);
  if (hasScheme && !/^https?:\/\//i.test(value)) return { problem: 'must be an http(s) URL or a bare host name' };
  let url: URL;
  try {
    url = new URL(hasScheme ? value : `https://${value}`);
  } catch {
    return { problem: 'must be an http(s) URL or a bare host name' };
  }
  if (url.username || url.password) return { problem: 'must not carry credentials' };
  if (url.port) return { problem: 'must not name a port' };
  const host = url.hostname.toLowerCase().replace(/\.$/, '');
  if (!isDnsSubdomain(host) || !host.includes('.') || /^[0-9.]+$/.test(host)) {
    return { problem: `"${host}" is not a valid DNS host name` };
  }
  return { host };
}

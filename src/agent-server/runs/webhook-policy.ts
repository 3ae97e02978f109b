// Where run webhooks (and A2A push notifications) may go. langgraph.json `webhooks` gives the platform's URL policy
// (https only, domains, ports, length, relative paths on or off) and headers sent with every delivery; `--webhook-allow`
// lists hosts that may be reached whatever they resolve to. Without it only public unicast addresses are reached:
// literal addresses are judged when a run or cron is created (webhookUrlProblem), names where the connection is made,
// after DNS (publicLookup), so a name that resolves to 127.0.0.1 or the cloud metadata address is refused.
import { lookup as dnsLookup, type LookupAddress } from 'node:dns';
import { isIP, type LookupFunction } from 'node:net';
import { z } from 'zod';
import { isPublicAddress } from '../../lib/addresses.ts';
import { readLanggraphJson } from '../graphs/config.ts';

/** langgraph.json `webhooks`, as the platform reads it: a URL policy and headers sent with every delivery. */
const WebhooksJson = z
  .object({
    env_prefix: z.string().min(1).default('LG_WEBHOOK_'),
    url: z
      .object({
        require_https: z.boolean().optional(),
        allowed_domains: z.array(z.string().min(1)).optional(),
        allowed_ports: z.array(z.number().int().min(1).max(65535)).optional(),
        max_url_length: z.number().int().positive().optional(),
        // true: relative webhooks (paths of the deployment's own custom routes) are refused.
        disable_loopback: z.boolean().optional(),
      })
      .strict()
      .default({}),
    headers: z.record(z.string(), z.string()).default({}),
  })
  .strict();

export interface WebhookPolicy {
  /** --webhook-allow: hosts reached whatever they resolve to; `*`: everything. */
  allow: string[];
  requireHttps?: boolean;
  /** langgraph.json webhooks.url.allowed_domains: only these hosts (still public addresses only). */
  allowedDomains?: string[];
  allowedPorts?: number[];
  maxUrlLength?: number;
  /**
   * Why a relative webhook (a path) cannot be delivered here (no custom app, or webhooks.url.disable_loopback);
   * undefined: paths go to the deployment's own custom routes.
   */
  selfRoutesProblem?: string;
}

export interface WebhooksConfig {
  policy: WebhookPolicy;
  headers: Record<string, string>;
}

/**
 * Header values may hold `${{ env.NAME }}` templates, resolved once at start from the environment; NAME must start
 * with env_prefix, so a langgraph.json cannot send arbitrary secrets of the server's environment.
 */
export function resolveHeaders(
  headers: Record<string, string>,
  prefix: string,
  env: NodeJS.ProcessEnv,
): Record<string, string> {
  const out: Record<string, string> = {};
  for (const [name, template] of Object.entries(headers)) {
    out[name] = template.replace(/\$\{\{\s*env\.([A-Za-z_][A-Za-z0-9_]*)\s*\}\}/g, (_m, v: string) => {
      if (!v.startsWith(prefix))
        throw new Error(`webhooks.headers.${name}: env.${v} does not start with env_prefix "${prefix}"`);
      const value = env[v];
      if (value === undefined) throw new Error(`webhooks.headers.${name}: environment variable ${v} is not set`);
      return value;
    });
  }
  return out;
}

/** Reads langgraph.json `webhooks` next to the graphs (absent: no policy beyond --webhook-allow, no headers). */
export async function readWebhooksConfig(
  configPath: string,
  allow: string[],
  env: NodeJS.ProcessEnv,
): Promise<WebhooksConfig> {
  const json = (await readLanggraphJson(configPath)) as { webhooks?: unknown };
  const parsed = WebhooksJson.safeParse(json.webhooks ?? {});
  if (!parsed.success) {
    const issue = parsed.error.issues[0]!;
    throw new Error(`langgraph.json webhooks.${issue.path.join('.')}: ${issue.message}`);
  }
  const w = parsed.data;
  return {
    policy: {
      allow,
      requireHttps: w.url.require_https,
      allowedDomains: w.url.allowed_domains,
      allowedPorts: w.url.allowed_ports,
      maxUrlLength: w.url.max_url_length,
      ...(w.url.disable_loopback
        ? { selfRoutesProblem: 'relative webhooks are turned off (webhooks.url.disable_loopback)' }
        : {}),
    },
    headers: resolveHeaders(w.headers, w.env_prefix, env),
  };
}

/**
 * What is wrong with a webhook URL under the policy, known without DNS (null: nothing yet; the address is checked
 * when the delivery connects). Run and cron create answer 422 with it.
 */
export function webhookUrlProblem(target: string, policy: WebhookPolicy): string | null {
  if (policy.maxUrlLength && target.length > policy.maxUrlLength)
    return `longer than ${policy.maxUrlLength} characters`;
  if (isSelfPath(target)) return policy.selfRoutesProblem ?? null;
  let url: URL;
  try {
    url = new URL(target);
  } catch {
    return 'not an absolute URL';
  }
  if (url.protocol !== 'http:' && url.protocol !== 'https:') return 'must be an http:// or https:// URL';
  if (policy.requireHttps && url.protocol !== 'https:') return 'must be an https:// URL (webhooks.url.require_https)';
  const port = Number(url.port || (url.protocol === 'https:' ? 443 : 80));
  if (policy.allowedPorts?.length && !policy.allowedPorts.includes(port)) {
    return `port ${port} is not in webhooks.url.allowed_ports`;
  }
  const host = url.hostname.replace(/^\[|\]$/g, '');
  const rule = hostRule(host, policy.allow);
  if (rule === 'refused') return `host ${host} is not in --webhook-allow`;
  if (rule === 'public') {
    if (policy.allowedDomains?.length && hostRule(host, policy.allowedDomains) === 'refused') {
      return `host ${host} is not in webhooks.url.allowed_domains`;
    }
    // Literal addresses skip DNS: judge them now. The URL parser already turned decimal, octal and hex IPv4 forms
    // into dotted quads.
    if (isIP(host) && !isPublicAddress(host))
      return `address ${host} is not public (allow the host with --webhook-allow)`;
  }
  return null;
}

/**
 * A relative webhook: a path of the deployment's own custom routes. It never leaves the process and never reaches
 * a built-in route (see WebhookOptions.self).
 */
export function isSelfPath(target: string): boolean {
  return target.startsWith('/') && !target.startsWith('//') && !target.includes('\\');
}

export class WebhookRefused extends Error {}

type HostRule = 'any' | 'listed' | 'public';

/** What the allow-list says about a host: any address, listed (any address), or public addresses only / refused. */
export function hostRule(host: string, allow: readonly string[]): HostRule | 'refused' {
  const h = host
    .toLowerCase()
    .replace(/^\[|\]$/g, '')
    .replace(/\.$/, '');
  if (allow.includes('*')) return 'any';
  if (!allow.length) return 'public';
  for (const entry of allow) {
    const e = entry.toLowerCase().replace(/\.$/, '');
    if (e === h) return 'listed';
    if (e.startsWith('*.') && h.endsWith(e.slice(1)) && h.length > e.length - 1) return 'listed';
  }
  return 'refused';
}

/** A DNS lookup that only answers public addresses (used for hosts the allow-list does not name). */
export const publicLookup: LookupFunction = (hostname, options, callback) => {
  dnsLookup(hostname, { ...options, all: true }, (err, addresses) => {
    if (err) return callback(err, '', 0);
    const list = (addresses as LookupAddress[]).filter((a) => isPublicAddress(a.address));
    if (!list.length) {
      const seen = (addresses as LookupAddress[]).map((a) => a.address).join(', ');
      return callback(
        new WebhookRefused(`webhook host ${hostname} resolves only to non-public addresses (${seen})`),
        '',
        0,
      );
    }
    if ((options as { all?: boolean }).all)
      return (callback as unknown as (e: null, a: LookupAddress[]) => void)(null, list);
    callback(null, list[0]!.address, list[0]!.family);
  });
};

// Request headers a run sees in config.configurable, as on the platform: by default every x-* header and user-agent;
// langgraph.json "http": {"configurable_headers": {"includes": [...], "excludes": [...]}} narrows or widens that with
// exact names or `*` patterns, exclusions first. The platform's credentials never go there, whatever the patterns
// say: the deployment key (x-api-key), the tenant and service headers, and this server's own x-agentplane-* headers
// (one of them carries the token that lets graph code call its own server without a key).
import type { IncomingHttpHeaders } from 'node:http';

export interface ConfigurableHeadersConfig {
  include?: string[] | null;
  includes?: string[] | null;
  exclude?: string[] | null;
  excludes?: string[] | null;
}

const NEVER = new Set(['x-api-key', 'x-tenant-id', 'x-service-key']);
const NEVER_PREFIX = 'x-agentplane-';

/** `*` matches any run of characters; everything else is literal (no other pattern syntax, as on the platform). */
function patternMatcher(patterns: string[]): (name: string) => boolean {
  if (patterns.length === 0) return () => false;
  const source = patterns
    .map((p) =>
      p
        .toLowerCase()
        .split('*')
        .map((part) => part.replace(/[.*+?^${}()|[\]\\]/g, '\\$&'))
        .join('.*'),
    )
    .join('|');
  const re = new RegExp(`^(?:${source})$`);
  return (name) => re.test(name);
}

export type ConfigurableHeaderPicker = (headers: IncomingHttpHeaders) => Record<string, string>;

/** The picker for a langgraph.json configuration (undefined: the platform's default). */
export function configurableHeaderPicker(config?: ConfigurableHeadersConfig | null): ConfigurableHeaderPicker {
  const includes = [...(config?.includes ?? []), ...(config?.include ?? [])];
  const excluded = patternMatcher([...(config?.excludes ?? []), ...(config?.exclude ?? [])]);
  const included = includes.length
    ? patternMatcher(includes)
    : (name: string) => name.startsWith('x-') || name === 'user-agent';
  return (headers) => {
    const picked: Record<string, string> = {};
    for (const [raw, value] of Object.entries(headers)) {
      if (value === undefined) continue;
      const name = raw.toLowerCase();
      if (NEVER.has(name) || name.startsWith(NEVER_PREFIX)) continue;
      if (excluded(name) || !included(name)) continue;
      picked[name] = Array.isArray(value) ? value.join(', ') : value;
    }
    return picked;
  };
}

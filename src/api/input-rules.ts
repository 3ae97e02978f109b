// Rules for what a tenant may put in a deployment. Everything here ends up in a process (git, a build, a pod), a
// path, a Kubernetes object or a log line, so it is checked before anything is stored. Pure functions: each returns
// a problem to report (a message) or undefined.
import { isDnsSubdomain } from '../resources/index.ts';

/** C0 controls and DEL; NUL is refused everywhere, these in fields that are names, refs, paths or URLs. */
// eslint-disable-next-line no-control-regex -- control characters are what this rejects
const CONTROL = /[\u0000-\u001f\u007f]/;

/** Secret names become keys of a Kubernetes Secret (envFrom), which may not be longer than 253 characters. */
export const MAX_SECRET_NAME = 253;
export const MAX_SECRET_VALUE_BYTES = 64 * 1024;
export const MAX_SECRETS_BYTES = 1024 * 1024;
export const MAX_ANNOTATIONS_BYTES = 64 * 1024;
/** Label and annotation keys under this prefix are the platform's own (tenancy, ownership); tenants cannot set them. */
export const RESERVED_LABEL_PREFIX = 'agentplane.dev';

export const ENV_NAME = /^[A-Za-z_][A-Za-z0-9_]*$/;

export function controlCharProblem(value: string): string | undefined {
  return CONTROL.test(value) ? 'must not contain control characters' : undefined;
}

export function hasNul(value: string): boolean {
  return value.includes('\u0000');
}

export const INTEGRATIONS_HINT =
  'put no credentials in repo_url: private repositories are reached through Integrations (integration_id), not a URL';

/**
 * repo_url: any URL or path git can clone, without credentials. A user name alone stays allowed where it names an
 * account (ssh://git@host/..., scp-like git@host:org/repo.git); a password, or any user part of an http(s) URL
 * (there it is a token: https://<token>@github.com/...), is refused.
 */
export function repoUrlProblem(url: string): string | undefined {
  if (url === '') return undefined; // an empty value is reported once, as required, by the schema
  if (CONTROL.test(url) || /\s/.test(url)) return 'must not contain whitespace or control characters';
  if (url.startsWith('-')) return 'must not start with "-"';
  const scheme = /^([A-Za-z][A-Za-z0-9+.-]*):\/\/([^/?#]*)/.exec(url);
  if (scheme) {
    const protocol = scheme[1]!.toLowerCase();
    if (!CLONE_SCHEMES.includes(protocol))
      return `scheme "${protocol}://" is not one git clones from here (use https, http, ssh, git or file)`;
    const authority = scheme[2]!;
    const at = authority.lastIndexOf('@');
    if (at < 0) return undefined;
    const userinfo = authority.slice(0, at);
    if (protocol === 'http' || protocol === 'https')
      return `must not carry credentials (user or token before "@"): ${INTEGRATIONS_HINT}`;
    if (userinfo.includes(':')) return `must not carry a password: ${INTEGRATIONS_HINT}`;
    return undefined;
  }
  if (/^[A-Za-z][A-Za-z0-9+.-]*::/.test(url)) return 'git remote helpers (<transport>::<address>) are not allowed';
  // scp-like [user@]host:path: a password would be a colon in the user part (before an "@" that precedes any "/").
  const at = url.indexOf('@');
  const slash = url.indexOf('/');
  if (at > 0 && (slash < 0 || at < slash) && url.slice(0, at).includes(':'))
    return `must not carry a password: ${INTEGRATIONS_HINT}`;
  if (url.startsWith('/') || SCP_LIKE.test(url)) return undefined;
  return `"${url}" is a relative path: ${REPO_URL_FORMS}`;
}

const CLONE_SCHEMES = ['https', 'http', 'ssh', 'git', 'git+ssh', 'ssh+git', 'file'];
/** git's scp-like ssh address, [user@]host:path: no "/" before the first ":" (else git reads a local path). */
const SCP_LIKE = /^(?:[^@/:]+@)?[^@/:]+:(?!\/\/)/;
const REPO_URL_FORMS =
  'repo_url must be a git URL (https://host/org/repo.git, ssh://git@host/org/repo.git, git@host:org/repo.git) ' +
  'or the absolute path of a local git repository';

/** A branch, tag, full ref or commit, as `git check-ref-format` would take it; never an option. */
export function gitRefProblem(ref: string): string | undefined {
  if (ref.length > 255) return 'must be at most 255 characters';
  if (ref.startsWith('-')) return 'must not start with "-"';
  if (CONTROL.test(ref) || /[\s~^:?*[\\]/.test(ref))
    return 'must not contain spaces, control characters or any of ~ ^ : ? * [ \\';
  if (ref.includes('..') || ref.includes('@{') || ref.includes('//') || ref === '@')
    return 'must be a valid git ref (no "..", "@{", "//")';
  if (ref.startsWith('/') || ref.endsWith('/') || ref.endsWith('.') || ref.endsWith('.lock'))
    return 'must be a valid git ref';
  if (ref.split('/').some((part) => part.startsWith('.')))
    return 'must be a valid git ref (no component starting with ".")';
  return undefined;
}

/** A path inside the repository: relative, without ".." segments. */
export function relativePathProblem(path: string): string | undefined {
  if (path.length > 1024) return 'must be at most 1024 characters';
  if (CONTROL.test(path)) return 'must not contain control characters';
  if (path.startsWith('/') || path.startsWith('\\') || /^[A-Za-z]:/.test(path))
    return 'must be a path relative to the repository root';
  if (path.split(/[/\\]/).includes('..')) return 'must not contain ".." segments';
  return undefined;
}

export function imageUriProblem(uri: string): string | undefined {
  if (uri.length > 1024) return 'must be at most 1024 characters';
  if (CONTROL.test(uri) || /\s/.test(uri)) return 'must not contain whitespace or control characters';
  if (uri.startsWith('-')) return 'must not start with "-"';
  return undefined;
}

const NAME_PART = /^[A-Za-z0-9]([-A-Za-z0-9_.]*[A-Za-z0-9])?$/;

/** Kubernetes qualified name `[prefix/]name` (label and annotation keys). */
export function labelKeyProblem(key: string): string | undefined {
  const slash = key.indexOf('/');
  const prefix = slash >= 0 ? key.slice(0, slash) : undefined;
  const name = slash >= 0 ? key.slice(slash + 1) : key;
  if (prefix !== undefined && !isDnsSubdomain(prefix))
    return `"${key}" is not a valid key: its prefix must be a DNS subdomain`;
  if (!name || name.length > 63 || !NAME_PART.test(name)) {
    return `"${key}" is not a valid key: the name part must be 1-63 characters of letters, digits, "-", "_", "." (alphanumeric at both ends)`;
  }
  if (prefix && (prefix === RESERVED_LABEL_PREFIX || prefix.endsWith(`.${RESERVED_LABEL_PREFIX}`))) {
    return `"${key}" uses the reserved prefix ${RESERVED_LABEL_PREFIX}/`;
  }
  return undefined;
}

export function labelValueProblem(value: string): string | undefined {
  if (value.length <= 63 && /^([A-Za-z0-9]([-A-Za-z0-9_.]*[A-Za-z0-9])?)?$/.test(value)) return undefined;
  return 'must be a valid label value: at most 63 characters of letters, digits, "-", "_", "." (alphanumeric at both ends)';
}

export type CustomDomainPolicy = {
  /** Suffixes a custom host must be a subdomain of; ['*'] = any host; [] = custom_url refused. */
  allowedCustomDomains: string[];
  /** The control plane's own public host: never claimable. */
  publicHost?: string;
};

export function customHostProblem(host: string, policy: CustomDomainPolicy): string | undefined {
  const allowed = policy.allowedCustomDomains.map((d) =>
    d
      .toLowerCase()
      .replace(/^\*?\./, '')
      .replace(/\.$/, ''),
  );
  if (!allowed.length) return 'custom domains are not enabled on this control plane (--allowed-custom-domains)';
  if (policy.publicHost && host === policy.publicHost.toLowerCase()) return `"${host}" is the control plane's own host`;
  if (allowed.includes('*')) return undefined;
  if (allowed.some((suffix) => host.endsWith(`.${suffix}`))) return undefined;
  return `"${host}" is not under an allowed custom domain (${allowed.join(', ')}): use <name>.${allowed[0]}`;
}

export function utf8Bytes(value: string): number {
  return Buffer.byteLength(value, 'utf8');
}

/** Control-plane settings that bound what a deployment may ask for (flags --max-scale, --max-cpu, ...). */
export type InputPolicy = CustomDomainPolicy & {
  maxScale: number;
  /** CPU cores. */
  maxCpu: number;
  maxMemoryMb: number;
};

export const DEFAULT_INPUT_POLICY: InputPolicy = {
  maxScale: 10,
  maxCpu: 4,
  maxMemoryMb: 8192,
  allowedCustomDomains: [],
};

type ResourceBounds = {
  min_scale?: number;
  max_scale?: number;
  cpu?: number;
  cpu_limit?: number;
  memory_mb?: number;
  memory_limit_mb?: number;
};

/**
 * The smallest memory_limit_mb a deployment may ask for: an idle agent server holds about 150 MB of private memory
 * and about 250 MB after its first runs, so a lower limit has it killed for its memory again and again.
 */
export const MIN_MEMORY_LIMIT_MB = 512;

/** Fields of a resource_spec outside the control plane's bounds: [field, message] pairs. */
export function resourceBoundProblems(spec: ResourceBounds, policy: InputPolicy): [keyof ResourceBounds, string][] {
  const bounds: [keyof ResourceBounds, number, string, string][] = [
    ['min_scale', policy.maxScale, 'replicas', '--max-scale'],
    ['max_scale', policy.maxScale, 'replicas', '--max-scale'],
    ['cpu', policy.maxCpu, 'CPU cores', '--max-cpu'],
    ['cpu_limit', policy.maxCpu, 'CPU cores', '--max-cpu'],
    ['memory_mb', policy.maxMemoryMb, 'MB', '--max-memory-mb'],
    ['memory_limit_mb', policy.maxMemoryMb, 'MB', '--max-memory-mb'],
  ];
  const out: [keyof ResourceBounds, string][] = [];
  for (const [field, max, unit, flag] of bounds) {
    const v = spec[field];
    if (typeof v === 'number' && v > max)
      out.push([field, `${field} must be at most ${max} ${unit} on this control plane (${flag}), got ${v}`]);
  }
  const limit = spec.memory_limit_mb;
  if (typeof limit === 'number' && limit < MIN_MEMORY_LIMIT_MB) {
    out.push([
      'memory_limit_mb',
      `memory_limit_mb must be at least ${MIN_MEMORY_LIMIT_MB} MB (an agent server alone holds about 250 MB), got ${limit}`,
    ]);
  }
  return out;
}

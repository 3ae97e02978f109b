// The control plane's REST API as the console uses it: same origin, the two auth headers on every call, and
// errors turned into a message plus per-field messages (from the API's 422 `detail[].loc`).

export type Session = { apiKey: string; tenant: string };

export type Deployment = {
  id: string;
  name: string;
  source: 'github' | 'external_docker' | 'internal_source' | 'internal_docker';
  source_config: {
    repo_url: string | null;
    deployment_type: 'dev' | 'prod';
    install_command: string | null;
    build_command: string | null;
    access_mode: 'api_key' | 'public';
    resource_spec: Record<string, unknown> | null;
  };
  source_revision_config: {
    repo_ref: string | null;
    graph_config_path: string | null;
    image_uri: string | null;
    repo_commit_sha: string | null;
  };
  secrets: { name: string }[];
  status: string;
  latest_revision_id: string | null;
  active_revision_id: string | null;
  url: string | null;
  health: Health;
  status_summary: StatusSummary;
  created_at: string;
  updated_at: string;
};

type SummaryState = 'serving' | 'building' | 'failed' | 'deleting';

/** The API's one-read status: what serves, what it asked for last, and why that one is not serving (yet). */
export type StatusSummary = {
  state: SummaryState;
  serving_revision_id: string | null;
  serving_revision_number: number | null;
  target_revision_id: string | null;
  target_revision_number: number | null;
  latest_revision_id: string | null;
  latest_revision_number: number | null;
  reason: string | null;
  message: string | null;
};

/** Whether it serves now (its Ready condition); reason and message say why not. */
export type Health = { ready: boolean | null; reason: string | null; message: string | null; since: string | null };

export type Revision = {
  id: string;
  deployment_id: string;
  revision_number: number;
  status: string;
  status_message: string | null;
  image: string | null;
  repo_commit_sha: string | null;
  source_revision_config: { repo_ref: string | null; graph_config_path: string | null };
  health: Health;
  created_at: string;
  updated_at: string;
};

export type LogEntry = { id: string; timestamp: string; type: 'build' | 'deploy'; message: string };

export const TERMINAL = new Set([
  'DEPLOYED',
  'CREATE_FAILED',
  'BUILD_FAILED',
  'DEPLOY_FAILED',
  'SKIPPED',
  'INTERRUPTED',
  'UNKNOWN',
]);

/** An API answer other than 2xx: `message` for a banner, `fields` keyed by dotted body path ("source_config.repo_url"). */
export class ApiError extends Error {
  constructor(
    readonly status: number,
    message: string,
    readonly fields: Record<string, string> = {},
  ) {
    super(message);
  }
}

/** "/api-host" when the console was opened under it, so its calls go to the same prefix. */
export function apiPrefix(pathname = location.pathname): string {
  return pathname.startsWith('/api-host') ? '/api-host' : '';
}

type Detail = string | { loc: (string | number)[]; msg: string; type?: string }[];

/**
 * The validator's wording ("Too small: expected string to have >=1 characters") in a person's words ("required");
 * the API's own sentences ("must not contain ".." segments") pass unchanged.
 */
function humanMessage(msg: string): string {
  if (/expected string to have >=1 characters|received undefined|^must not be blank$|^required\b/i.test(msg)) {
    return 'required';
  }
  let m = /expected (?:number|int) to be >=?\s*(-?[\d.]+)/.exec(msg);
  if (m) return `must be at least ${m[1]}`;
  m = /expected (?:number|int) to be <=?\s*(-?[\d.]+)/.exec(msg);
  if (m) return `must be at most ${m[1]}`;
  m = /expected string to have <=\s*(\d+) characters/.exec(msg);
  if (m) return `must be at most ${m[1]} characters`;
  m = /expected string to have >=\s*(\d+) characters/.exec(msg);
  if (m) return `must be at least ${m[1]} characters`;
  m = /^Invalid input: expected (\w+), received (\w+)/.exec(msg);
  if (m) return m[1] === 'number' || m[1] === 'int' ? 'must be a number' : `must be a ${m[1]}`;
  m = /^Invalid option: expected one of (.+)$/.exec(msg);
  if (m) return `must be one of ${m[1]!.replace(/"/g, '')}`;
  if (/^Unrecognized key/.test(msg)) return 'is not a setting the API knows';
  return msg.replace(/^Invalid input: ?/, '') || 'is not valid';
}

function toError(status: number, body: { detail?: Detail } | undefined): ApiError {
  const detail = body?.detail;
  if (status === 401 || status === 403) {
    return new ApiError(status, typeof detail === 'string' ? detail : 'The API key or the workspace was not accepted.');
  }
  if (Array.isArray(detail)) {
    const fields: Record<string, string> = {};
    for (const d of detail) {
      const path = d.loc[0] === 'body' ? d.loc.slice(1) : d.loc;
      const key = path.join('.');
      const msg = humanMessage(d.msg);
      const seen = fields[key]?.split('; ') ?? [];
      if (!seen.includes(msg)) fields[key] = [...seen, msg].join('; ');
    }
    const list = Object.entries(fields).map(([k, v]) => (k ? `${k}: ${v}` : v));
    return new ApiError(status, `Please fix: ${list.join(' · ')}`, fields);
  }
  return new ApiError(status, typeof detail === 'string' ? detail : `HTTP ${status}`);
}

export function createApi(session: Session) {
  const base = `${apiPrefix()}/v2`;
  async function call<T>(method: string, path: string, body?: unknown): Promise<T> {
    const res = await fetch(`${base}${path}`, {
      method,
      headers: {
        'X-Api-Key': session.apiKey,
        'X-Tenant-Id': session.tenant,
        ...(body === undefined ? {} : { 'content-type': 'application/json' }),
      },
      body: body === undefined ? undefined : JSON.stringify(body),
    });
    const text = await res.text();
    let parsed: unknown;
    try {
      parsed = text ? JSON.parse(text) : undefined;
    } catch {
      parsed = undefined;
    }
    if (!res.ok) throw toError(res.status, parsed as { detail?: Detail });
    return parsed as T;
  }
  const dep = (id: string) => `/deployments/${encodeURIComponent(id)}`;
  const rev = (id: string, rid: string) => `${dep(id)}/revisions/${encodeURIComponent(rid)}`;
  return {
    listDeployments: (
      q: { name_contains?: string; status?: string; state?: string; limit?: number; offset?: number } = {},
    ) => {
      const p = new URLSearchParams();
      for (const [k, v] of Object.entries(q)) if (v !== undefined && v !== '') p.set(k, String(v));
      return call<{ resources: Deployment[]; offset: number }>('GET', `/deployments?${p}`);
    },
    getDeployment: (id: string) => call<Deployment>('GET', dep(id)),
    accessToken: (id: string) => call<{ token: string; expires_at: string }>('POST', `${dep(id)}/access-tokens`),
    createDeployment: (body: unknown) => call<Deployment>('POST', '/deployments', body),
    patchDeployment: (id: string, body: unknown) => call<Deployment>('PATCH', dep(id), body),
    deleteDeployment: (id: string) => call<null>('DELETE', dep(id)),
    listRevisions: (id: string) => call<{ resources: Revision[] }>('GET', `${dep(id)}/revisions?limit=100`),
    getRevision: (id: string, rid: string) => call<Revision>('GET', rev(id, rid)),
    redeploy: (id: string, rid: string) => call<Deployment>('POST', `${rev(id, rid)}/redeploy`),
    logs: (id: string, rid: string, q: { type: 'build' | 'deploy'; offset?: string; limit?: number }) => {
      const p = new URLSearchParams({ type: q.type, limit: String(q.limit ?? 1000), order: 'asc' });
      if (q.offset) p.set('offset', q.offset);
      return call<{ logs: LogEntry[]; next_offset: string | null }>('GET', `${rev(id, rid)}/logs?${p}`);
    },
  };
}

export type Api = ReturnType<typeof createApi>;

/**
 * The credential the playground calls one agent with: a short-lived access token for that deployment alone, asked
 * for again shortly before it expires. The signed-in key never goes to an agent (agents refuse platform keys, and
 * an agent's own code may read every header it gets).
 */
export function agentCredential(api: Api, deploymentId: string): () => Promise<string> {
  let current: { token: string; renewAt: number } | undefined;
  let pending: Promise<string> | undefined;
  return () => {
    if (current && Date.now() < current.renewAt) return Promise.resolve(current.token);
    pending ??= api.accessToken(deploymentId).then(
      ({ token, expires_at }) => {
        const expires = Date.parse(expires_at);
        current = { token, renewAt: Date.now() + Math.max(0, (expires - Date.now()) * 0.8) };
        pending = undefined;
        return token;
      },
      (err: unknown) => {
        pending = undefined;
        throw err;
      },
    );
    return pending;
  };
}

const KEY = 'agentplane.session';

/** The session lives in sessionStorage: gone when the tab closes, never written anywhere else. */
export function loadSession(): Session | null {
  try {
    const s = JSON.parse(sessionStorage.getItem(KEY) ?? 'null') as Session | null;
    return s && typeof s.apiKey === 'string' && typeof s.tenant === 'string' ? s : null;
  } catch {
    return null;
  }
}

export function saveSession(s: Session | null): void {
  if (s) sessionStorage.setItem(KEY, JSON.stringify(s));
  else sessionStorage.removeItem(KEY);
}

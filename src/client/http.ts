// REST client of the Deployments v2 API, for the CLI and for scripts. Thin on purpose: one method per route,
// errors turned into one readable line (HTTP status + the API's `detail`).
import { setTimeout as sleep } from 'node:timers/promises';
import type { Deployment, Revision } from '../control-plane/schemas/deployment-views.ts';

export type { Deployment, Revision };
export type LogType = 'build' | 'deploy';
export type LogEntry = { id: string; timestamp: string; type: LogType; message: string };
export type LogPage = { logs: LogEntry[]; next_offset: string | null };
/** A line of the serving agent's log, with the revision it came from. */
export type LiveLogLine = LogEntry & { revision_id: string; revision_number: number };
export type Page<T> = { resources: T[]; offset: number };

export type DeploymentInput = {
  name?: string;
  source?: 'github';
  source_config?: {
    repo_url?: string;
    install_command?: string | null;
    build_command?: string | null;
    access_mode?: 'api_key' | 'public';
  };
  source_revision_config?: { repo_ref?: string; graph_config_path?: string };
  secrets?: { name: string; value: string }[];
};

/** The control plane answered with an error status. */
export class ApiError extends Error {
  constructor(
    readonly status: number,
    readonly detail: string,
  ) {
    super(`HTTP ${status}: ${detail}`);
  }
}

/** The control plane could not be reached at all (refused, DNS, timeout). */
export class ConnectionError extends Error {}

/** `tenant` may be left out for a key of one workspace (the control plane takes that one). */
export type ClientOptions = { url: string; apiKey: string; tenant?: string; timeoutMs?: number };

export function createClient(opts: ClientOptions) {
  const base = opts.url.replace(/\/+$/, '');
  const timeoutMs = opts.timeoutMs ?? 30_000;
  const auth: Record<string, string> = {
    'x-api-key': opts.apiKey,
    ...(opts.tenant ? { 'x-tenant-id': opts.tenant } : {}),
  };

  async function call<T>(
    method: string,
    path: string,
    query?: Record<string, string | number | undefined>,
    body?: unknown,
  ): Promise<T> {
    const qs = new URLSearchParams();
    for (const [k, v] of Object.entries(query ?? {})) if (v !== undefined) qs.set(k, String(v));
    const url = `${base}/v2${path}${qs.size ? `?${qs}` : ''}`;
    let res: Response;
    try {
      res = await fetch(url, {
        method,
        headers: {
          ...auth,
          accept: 'application/json',
          ...(body === undefined ? {} : { 'content-type': 'application/json' }),
        },
        body: body === undefined ? undefined : JSON.stringify(body),
        signal: AbortSignal.timeout(timeoutMs),
      });
    } catch (err) {
      throw new ConnectionError(`cannot reach the control plane at ${base}: ${reason(err)}`);
    }
    const text = await res.text();
    if (!res.ok) throw new ApiError(res.status, detailOf(text, res.statusText));
    return (text ? JSON.parse(text) : undefined) as T;
  }

  const dep = (id: string) => `/deployments/${encodeURIComponent(id)}`;
  const rev = (id: string, rid: string) => `${dep(id)}/revisions/${encodeURIComponent(rid)}`;

  return {
    url: base,
    listDeployments: (q: { limit?: number; offset?: number; name_contains?: string } = {}) =>
      call<Page<Deployment>>('GET', '/deployments', q),
    getDeployment: (id: string) => call<Deployment>('GET', dep(id)),
    createDeployment: (body: DeploymentInput) => call<Deployment>('POST', '/deployments', undefined, body),
    patchDeployment: (id: string, body: DeploymentInput) => call<Deployment>('PATCH', dep(id), undefined, body),
    deleteDeployment: (id: string) => call<void>('DELETE', dep(id)),
    listRevisions: (id: string, q: { limit?: number; offset?: number } = {}) =>
      call<Page<Revision>>('GET', `${dep(id)}/revisions`, q),
    createRevision: (id: string) => call<Revision>('POST', `${dep(id)}/revisions`),
    getRevision: (id: string, rid: string) => call<Revision>('GET', rev(id, rid)),
    redeploy: (id: string, rid: string) => call<Deployment>('POST', `${rev(id, rid)}/redeploy`),
    logs: (id: string, rid: string, q: { type: LogType; limit?: number; offset?: string; order?: 'asc' | 'desc' }) =>
      call<LogPage>('GET', `${rev(id, rid)}/logs`, q),
    /** The serving agent's log lines as the control plane streams them (SSE), until `signal` aborts or it ends. */
    liveLogs: (id: string, q: LiveLogQuery) => liveLogs(`${dep(id)}/logs/stream`, q),
  };

  /**
   * The stream as lines: a connection that drops (a restart of the control plane, a proxy's idle cut) is opened again
   * with the id of the last line read (Last-Event-ID), so nothing comes twice and nothing is missed; `onResume` says
   * each try. It ends at the control plane's `end` event (the deployment deleted), when `signal` aborts, or after
   * RESUME_TRIES failed tries in a row. The first connection is not retried: a wrong URL says so at once.
   */
  async function* liveLogs(path: string, q: LiveLogQuery): AsyncGenerator<LiveLogLine> {
    let lastId: string | undefined;
    let opened = false;
    let tries = 0;
    for (;;) {
      let broke: unknown;
      try {
        const stream = openLiveLogs(path, q, lastId);
        for await (const event of stream) {
          if (event.type === 'end') return;
          opened = true;
          tries = 0;
          if (event.type === 'open') continue;
          lastId = event.id ?? lastId;
          yield event.line;
        }
        broke = new Error('the stream ended without its end event');
      } catch (err) {
        if (q.signal.aborted) return;
        // A refusal (404: deleted meanwhile; 401: the key revoked) is an answer, not a drop.
        if (err instanceof ApiError || !opened) throw err;
        broke = err;
      }
      if (q.signal.aborted) return;
      if (++tries > RESUME_TRIES) {
        throw new ConnectionError(`the control plane at ${base} broke off the log stream: ${reason(broke)}`);
      }
      q.onResume?.(tries, reason(broke));
      await sleep(Math.min(250 * 2 ** (tries - 1), 5_000), undefined, { signal: q.signal }).catch(() => undefined);
    }
  }

  async function* openLiveLogs(
    path: string,
    q: LiveLogQuery,
    lastId: string | undefined,
  ): AsyncGenerator<{ type: 'open' } | { type: 'log'; id: string | undefined; line: LiveLogLine } | { type: 'end' }> {
    let res: Response;
    try {
      res = await fetch(`${base}/v2${path}?tail=${q.tail}`, {
        headers: { ...auth, accept: 'text/event-stream', ...(lastId ? { 'last-event-id': lastId } : {}) },
        signal: q.signal,
      });
    } catch (err) {
      throw new ConnectionError(`cannot reach the control plane at ${base}: ${reason(err)}`);
    }
    if (!res.ok) throw new ApiError(res.status, detailOf(await res.text(), res.statusText));
    yield { type: 'open' };
    // Events are `id:`, `event:` and one `data:` line of JSON, a blank line after each (the control plane writes
    // them so); heartbeat comments and other fields are skipped. Small enough not to need an SSE library.
    const decoder = new TextDecoder();
    let buffer = '';
    for await (const chunk of res.body as unknown as AsyncIterable<Uint8Array>) {
      buffer += decoder.decode(chunk, { stream: true });
      let end: number;
      while ((end = buffer.indexOf('\n\n')) >= 0) {
        const fields = buffer.slice(0, end).split('\n');
        buffer = buffer.slice(end + 2);
        const field = (name: string) =>
          fields.filter((l) => l.startsWith(`${name}:`)).map((l) => l.slice(name.length + 1).trimStart());
        const type = field('event')[0];
        if (type === 'end') return yield { type: 'end' };
        const data = field('data').join('\n');
        if (data) yield { type: 'log', id: field('id')[0], line: JSON.parse(data) as LiveLogLine };
      }
    }
  }
}

/** Tries in a row to resume a dropped log stream before giving up (about 30 s with the backoff). */
const RESUME_TRIES = 10;

export type LiveLogQuery = {
  tail: number;
  signal: AbortSignal;
  /** Called before each try to resume a dropped stream, with the try's number and why the stream broke. */
  onResume?: (attempt: number, why: string) => void;
};

export type ControlPlaneClient = ReturnType<typeof createClient>;

/** `{"detail": "..."}` or a 422 list of `{loc, msg}`, as one line. */
function detailOf(text: string, fallback: string): string {
  try {
    const body = JSON.parse(text) as { detail?: unknown; message?: unknown };
    if (typeof body.detail === 'string') return body.detail;
    if (Array.isArray(body.detail)) {
      return body.detail
        .map((d: { loc?: unknown[]; msg?: string }) => `${(d.loc ?? []).join('.')}: ${d.msg ?? ''}`)
        .join('; ');
    }
    if (typeof body.message === 'string') return body.message;
  } catch {
    // not JSON: fall through to the raw text
  }
  return oneLine(text) || fallback;
}

function reason(err: unknown): string {
  const e = err as { name?: string; message?: string; cause?: { code?: string; message?: string } };
  if (e.name === 'TimeoutError') return 'no answer in time';
  return e.cause?.code ?? e.cause?.message ?? e.message ?? String(err);
}

const oneLine = (s: string) => s.replace(/\s+/g, ' ').trim().slice(0, 300);

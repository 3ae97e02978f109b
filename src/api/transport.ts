// How every call to the control plane's REST API goes out and comes back, for the deploy CLI and the listener alike:
// the key and workspace headers, a deadline, and one mapping of failures: an error status becomes an ApiError carrying
// the API's `detail` as one line, a control plane that cannot be reached a ConnectionError.
import { withDeadline } from '../lib/deadline.ts';
import { redactUrlsIn } from '../lib/redact.ts';

/** The control plane answered with an error status; `detail` is its error body's `detail`, as one line. */
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

/**
 * `url` is the control plane's base URL: its origin, or the origin and a path prefix it is served under (a
 * `/api-host` mount, a reverse proxy's path); /v2/... is appended to it. `tenant` may be left out for a key of one
 * workspace (the control plane takes that one). `version` goes out as X-Agentplane-Version (a listener says which
 * release it runs).
 */
export type ClientOptions = { url: string; apiKey: string; tenant?: string; timeoutMs?: number; version?: string };

export type CallOptions = {
  query?: Record<string, string | number | undefined>;
  body?: unknown;
  /** Overrides the client's timeout (a long poll waits longer than an ordinary call). */
  timeoutMs?: number;
  /** Ends the call early (the caller stops). */
  signal?: AbortSignal;
  accept?: string;
  headers?: Record<string, string>;
};

export type Transport = ReturnType<typeof createTransport>;

export function createTransport(opts: ClientOptions) {
  const base = opts.url.replace(/\/+$/, '');
  const timeoutMs = opts.timeoutMs ?? 30_000;
  const auth: Record<string, string> = {
    'x-api-key': opts.apiKey,
    ...(opts.tenant ? { 'x-tenant-id': opts.tenant } : {}),
    ...(opts.version ? { 'x-agentplane-version': opts.version } : {}),
  };

  /**
   * The response of one request with an ok status. A redirect is never followed: fetch would send the key on to
   * wherever the Location points (it drops only Authorization across origins), so it is refused and named instead.
   * `timeoutMs: 0` leaves the deadline to `signal` alone (a stream that stays open).
   */
  async function open(method: string, path: string, o: CallOptions = {}): Promise<Response> {
    const qs = new URLSearchParams();
    for (const [k, v] of Object.entries(o.query ?? {})) if (v !== undefined) qs.set(k, String(v));
    const ms = o.timeoutMs ?? timeoutMs;
    const deadline = ms > 0 ? withDeadline(ms, o.signal) : undefined;
    let res: Response;
    try {
      res = await fetch(`${base}/v2${path}${qs.size ? `?${qs}` : ''}`, {
        method,
        headers: {
          ...auth,
          accept: o.accept ?? 'application/json',
          ...(o.body === undefined ? {} : { 'content-type': 'application/json' }),
          ...o.headers,
        },
        body: o.body === undefined ? undefined : JSON.stringify(o.body),
        signal: deadline?.signal ?? o.signal,
        redirect: 'manual',
      });
    } catch (err) {
      // The caller's own abort is no failure to reach the control plane: it stops quietly where it awaits.
      if (o.signal?.aborted) throw err;
      throw new ConnectionError(`cannot reach the control plane at ${base}: ${reason(err)}`);
    } finally {
      deadline?.clear();
    }
    if (res.status >= 300 && res.status < 400) {
      await res.body?.cancel();
      const to = res.headers.get('location');
      throw new ApiError(
        res.status,
        `the control plane answered with a redirect${to ? ` to ${oneLine(redactUrlsIn(to))}` : ''}; give the URL it ` +
          'should be reached at (the key is never sent on to a redirect)',
      );
    }
    if (!res.ok) throw new ApiError(res.status, detailOf(await res.text(), res.statusText));
    return res;
  }

  /** One call; resolves with the parsed JSON answer (undefined when the body is empty). */
  async function call<T>(method: string, path: string, o: CallOptions = {}): Promise<T> {
    const ms = o.timeoutMs ?? timeoutMs;
    // The body is read under the same deadline as the headers: a control plane that stalls mid-answer is a timeout.
    const deadline = withDeadline(ms, o.signal);
    try {
      const res = await open(method, path, { ...o, timeoutMs: 0, signal: deadline.signal });
      let text: string;
      try {
        text = await res.text();
      } catch (err) {
        if (o.signal?.aborted) throw err;
        throw new ConnectionError(`the control plane at ${base} broke off its answer: ${reason(err)}`);
      }
      return (text ? JSON.parse(text) : undefined) as T;
    } catch (err) {
      // A deadline of this call (not the caller's abort) is a control plane that did not answer in time.
      if (deadline.signal.aborted && !o.signal?.aborted && !(err instanceof ApiError || err instanceof ConnectionError))
        throw new ConnectionError(`cannot reach the control plane at ${base}: no answer in time`);
      throw err;
    } finally {
      deadline.clear();
    }
  }

  return { url: base, open, call };
}

/** `{"detail": "..."}` or a 422 list of `{loc, msg}`, as one line (else the body itself, bounded). */
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

/** Why a request failed, in a few words (the system's error code when there is one). */
export function reason(err: unknown): string {
  const e = err as { name?: string; message?: string; cause?: { code?: string; message?: string } };
  if (e.name === 'TimeoutError') return 'no answer in time';
  return e.cause?.code ?? e.cause?.message ?? e.message ?? String(err);
}

const oneLine = (s: string) => s.replace(/\s+/g, ' ').trim().slice(0, 300);

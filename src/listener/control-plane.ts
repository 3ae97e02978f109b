// Calls from a data plane to the listener API of its control plane (/v2/listeners/{id}/...), with the listener's
// key: the sync loops of `agentplane listener` and the clone-credential resolver of a data plane's builds.
import { withDeadline } from '../lib/deadline.ts';

export type ListenerConnection = {
  controlPlaneUrl: string;
  apiKey: string;
  tenant: string;
  listenerId: string;
  version?: string;
};

/** The control plane answered with an error status; `message` is its `detail` (or the start of its body). */
export class ListenerApiError extends Error {
  constructor(
    readonly status: number,
    message: string,
  ) {
    super(message);
  }
}

/** One call; resolves with the parsed JSON answer ({} when empty). Never follows a redirect with the key. */
export async function callListenerApi(
  conn: ListenerConnection,
  method: string,
  path: string,
  body?: unknown,
  opts: { timeoutMs?: number; signal?: AbortSignal } = {},
): Promise<unknown> {
  const deadline = withDeadline(opts.timeoutMs ?? 30_000, opts.signal);
  try {
    const res = await fetch(`${conn.controlPlaneUrl}/v2/listeners/${conn.listenerId}${path}`, {
      method,
      headers: {
        'X-Api-Key': conn.apiKey,
        'X-Tenant-Id': conn.tenant,
        ...(conn.version ? { 'X-Agentplane-Version': conn.version } : {}),
        ...(body ? { 'content-type': 'application/json' } : {}),
      },
      body: body ? JSON.stringify(body) : undefined,
      signal: deadline.signal,
      redirect: 'error',
    });
    const text = await res.text();
    if (!res.ok) {
      let detail = text.slice(0, 300);
      try {
        const d = (JSON.parse(text) as { detail?: unknown }).detail;
        detail = typeof d === 'string' ? d : JSON.stringify(d);
      } catch {
        // not JSON
      }
      throw new ListenerApiError(res.status, detail);
    }
    return text ? JSON.parse(text) : {};
  } finally {
    deadline.clear();
  }
}

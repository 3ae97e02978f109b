// What the proxy asks the runtime for a request (proxy.ts) or a WebSocket upgrade (proxy-upgrades.ts): the agent
// server a deployment's traffic goes to now, or why there is none, and the one admission path both take (resolve,
// the credential check, then a hold on the server that keeps it from being stopped for idleness under the request).
import type { IncomingMessage } from 'node:http';

export type Backend = {
  port: number;
  tenant: string;
  /**
   * Counts a request on the server until the returned release is called; undefined when the server began to stop
   * (it fell asleep, or was replaced) since it was resolved: the request must resolve the deployment again.
   */
  acquire(): (() => void) | undefined;
};

/**
 * A deployment whose serving revision is being started again: 503 with Retry-After, not 404. `unavailable` says why,
 * for the deployment's own logs; callers are told only when to come back.
 */
export type Unavailable = { unavailable: string; retryAfterSecs: number };

export type ProxyOptions = {
  /** The backend of a deployment id, why it is unavailable for now, or undefined when it has no live revision (404). */
  resolve(deploymentId: string): Promise<Backend | Unavailable | undefined>;
  /** Largest request body passed on, in bytes (default: the agent server's own limit); 413 beyond it. */
  bodyLimit?: number;
  /** Origin mode: the deployment a request is for, from where it came in. Without it: /deployments/<id>/... */
  deploymentAt?(req: IncomingMessage): string | undefined;
  /** Why the request must not reach tenant code (it carries a credential that is not the tenant's), or undefined. */
  refuse?(tenant: string, req: IncomingMessage): Promise<string | undefined>;
};

export const DEPLOYMENTS_PREFIX = '/deployments';

/**
 * The 503 of a deployment being started again. Callers may be anonymous: why it restarts (the agent's own last
 * words) is for its workspace's deploy log, not for them.
 */
const restartingDetail = (id: string, retryAfterSecs: number) =>
  `Deployment ${id} is restarting, retry after ${retryAfterSecs} s.`;

/**
 * The 503 of a request whose credentials could not be checked (the platform's key store did not answer): neither let
 * through nor refused, and not a failure of the proxy.
 */
const credentialCheckDetail = (id: string, retryAfterSecs: number) =>
  `Deployment ${id} cannot take requests right now: the platform could not check this request's credentials; retry after ${retryAfterSecs} s.`;

/** How long a caller whose credentials could not be checked is asked to wait. */
const CHECK_RETRY_SECS = 2;

export type Admission =
  | { kind: 'none' }
  /** `detail` what the caller is told; `cause` what failed, for the proxy's own log. */
  | { kind: 'unavailable'; retryAfterSecs: number; detail: string; cause?: unknown }
  | { kind: 'refused'; detail: string }
  | { kind: 'admitted'; port: number; release: () => void };

/** How often a request goes back to resolve its deployment when the server it was given is stopping. */
const READMITS = 3;

/**
 * Resolves the deployment, checks the request's credentials against its tenant, then holds the server for it. The
 * checks take time (resolve may wait for a wake, the credential check reads a key store): a server that began to
 * stop meanwhile (its idle sleep) is not handed the request; it resolves again, which waits for the stop and wakes
 * the deployment. Past a few rounds the caller is told to come back.
 */
export async function admit(opts: ProxyOptions, id: string, req: IncomingMessage): Promise<Admission> {
  for (let round = 0; round < READMITS; round++) {
    const backend = await opts.resolve(id);
    if (!backend) return { kind: 'none' };
    if ('unavailable' in backend) {
      const retryAfterSecs = backend.retryAfterSecs;
      return { kind: 'unavailable', retryAfterSecs, detail: restartingDetail(id, retryAfterSecs) };
    }
    let refusal: string | undefined;
    try {
      refusal = await opts.refuse?.(backend.tenant, req);
    } catch (cause) {
      const retryAfterSecs = CHECK_RETRY_SECS;
      return { kind: 'unavailable', retryAfterSecs, detail: credentialCheckDetail(id, retryAfterSecs), cause };
    }
    if (refusal) return { kind: 'refused', detail: refusal };
    const release = backend.acquire();
    if (release) return { kind: 'admitted', port: backend.port, release };
  }
  return { kind: 'unavailable', retryAfterSecs: 1, detail: restartingDetail(id, 1) };
}

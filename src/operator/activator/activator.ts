// The activator: what answers a sleeping deployment's traffic in a cluster (docs/kubernetes.md#idle-deployments-sleep).
// While a deployment sleeps its Service sends here (the operator's EndpointSlice, runtimes/kubernetes/sleep.ts); a
// request names its deployment by its Host (the Ingress host the Service's annotation gives, or the Service's own
// cluster DNS name). The activator asks for a wake once per sleep (an annotation on the AgentDeployment naming the
// sleep it ends: every request during the wake shares it), holds each request until the operator has a pod ready and
// the Service selects the pods again (each request bounded: 503 with Retry-After past it, and a request answered so,
// or whose client left, is never sent on later), then forwards it to one of the ready pods in turn: plain HTTP,
// event streams and WebSocket upgrades alike, piped as they come, request bodies up to a limit (413 past it).
// Hand-written over node:http: it forwards only the first requests of a wake (the Service bypasses it right after),
// and a pipe carries streams and upgrades as is.
import { request, type IncomingMessage, type Server, type ServerResponse } from 'node:http';
import type { Duplex } from 'node:stream';
import {
  CustomObjectsApi,
  DiscoveryV1Api,
  PatchStrategy,
  setHeaderOptions,
  type KubeConfig,
} from '@kubernetes/client-node';
import type { V1Service } from '@kubernetes/client-node';
import type { Logger } from '../../lib/logger.ts';
import { GROUP, VERSION } from '../../resources/meta.ts';
import { LABEL_DEPLOYMENT } from '../../resources/names.ts';
import type { Informer } from '../controller-kit/informer.ts';
import type { Obj } from '../runtimes/kubernetes/context.ts';
import {
  ANNOTATION_HOST,
  ANNOTATION_SLEEPING_SINCE,
  ANNOTATION_WAKE_REQUESTED,
  readyTargets,
  SLICE_MANAGER,
} from '../runtimes/kubernetes/sleep.ts';

/** Set on what the activator forwards: one arriving with it came back here (a stale route), never forwarded again. */
export const FORWARDED_HEADER = 'x-agentplane-activator';

export type ActivatorOptions = {
  kubeConfig: KubeConfig;
  /** Namespace of the AgentDeployments. */
  namespace: string;
  /** The agent Services, as the operator labels them (informer over one namespace or all). */
  services: Informer<Obj<V1Service>>;
  /** How long a request is held for a wake before 503 (ms). */
  wakeTimeoutMs: number;
  /** Where a ready pod is reached: `{ip}` and `{port}` are the endpoint's. */
  upstreamUrl: string;
  logger: Logger;
  /** Largest request body forwarded (bytes); 413 past it. */
  maxBodyBytes: number;
  /** Poll interval while waiting for a ready endpoint (ms). */
  pollMs?: number;
};

type Upstream = { base: URL };
/** The ready pods of a Service once it selects them again: each request takes the next one. */
type Ready = { targets: { address: string; port: number }[] };
type Found = { service: Obj<V1Service> };

/** The agent Service a Host names: its Ingress host (annotation), or `<svc>`, `<svc>.<ns>`, `<svc>.<ns>.svc[.domain]`. */
export function serviceForHost(services: Obj<V1Service>[], hostHeader: string | undefined): Obj<V1Service> | undefined {
  if (!hostHeader) return undefined;
  const host = hostHeader.replace(/:\d+$/, '').toLowerCase();
  const byIngress = services.find((s) => s.metadata.annotations?.[ANNOTATION_HOST] === host);
  if (byIngress) return byIngress;
  const [name, ns, svc] = host.split('.');
  return services.find(
    (s) =>
      s.metadata.name === name &&
      (ns === undefined || s.metadata.namespace === ns) &&
      (svc === undefined || svc === 'svc'),
  );
}

export function createActivator(opts: ActivatorOptions) {
  const custom = opts.kubeConfig.makeApiClient(CustomObjectsApi);
  const discovery = opts.kubeConfig.makeApiClient(DiscoveryV1Api);
  const log = opts.logger.child({ component: 'activator' });
  const pollMs = opts.pollMs ?? 250;
  /** One wake per sleep: `<namespace>/<service>@<sleeping-since>`, looked for until its last request's deadline. */
  const wakes = new Map<string, { ready: Promise<Ready>; deadline: number }>();
  /** Turns through the ready pods, so no one pod takes every request the activator forwards. */
  let turn = 0;

  const askWake = async (svc: Obj<V1Service>, since: string) => {
    const name = svc.metadata.labels?.[LABEL_DEPLOYMENT] ?? svc.metadata.name;
    // A merge patch of one annotation: the activator's only write, and no read of the AgentDeployment before it.
    await custom.patchNamespacedCustomObject(
      {
        group: GROUP,
        version: VERSION,
        namespace: opts.namespace,
        plural: 'agentdeployments',
        name,
        body: { metadata: { annotations: { [ANNOTATION_WAKE_REQUESTED]: since } } },
      },
      setHeaderOptions('Content-Type', PatchStrategy.MergePatch),
    );
    log.info({ deployment: name, sleeping_since: since }, 'wake asked for');
  };

  /** The ready pods of the Service once the operator points it back at them; throws at the deadline. */
  const readyPods = async (svc: Obj<V1Service>, deadline: () => number): Promise<Ready> => {
    const { namespace, name } = svc.metadata;
    for (;;) {
      const current = opts.services.get(`${namespace}/${name}`);
      if (current && !current.metadata.annotations?.[ANNOTATION_SLEEPING_SINCE]) {
        const { items } = await discovery.listNamespacedEndpointSlice({
          namespace: namespace!,
          labelSelector: `kubernetes.io/service-name=${name}`,
        });
        // Only the EndpointSlice controller's slices: ours (the activator's own pods) may linger a moment.
        const targets = readyTargets(
          items.filter((s) => s.metadata?.labels?.['endpointslice.kubernetes.io/managed-by'] !== SLICE_MANAGER),
        );
        if (targets.length) return { targets };
      }
      if (Date.now() >= deadline()) throw new Error('no ready pod before the wake timeout');
      await new Promise((r) => setTimeout(r, pollMs));
    }
  };

  /** The ready pods of `svc`: at once when awake, after a (shared) wake when asleep. */
  const readyFor = (svc: Obj<V1Service>, deadline: number): Promise<Ready> => {
    const since = svc.metadata.annotations?.[ANNOTATION_SLEEPING_SINCE];
    if (!since) return readyPods(svc, () => deadline);
    const key = `${svc.metadata.namespace}/${svc.metadata.name}@${since}`;
    const joined = wakes.get(key);
    if (joined) {
      joined.deadline = Math.max(joined.deadline, deadline);
      return joined.ready;
    }
    const bound = { deadline };
    const ready = (async () => {
      await askWake(svc, since);
      return readyPods(svc, () => bound.deadline);
    })();
    // Kept while it runs, so concurrent requests share it; forgotten after, so a later sleep wakes again.
    wakes.set(key, Object.assign(bound, { ready }));
    void ready.then(
      () => wakes.delete(key),
      () => wakes.delete(key),
    );
    return ready;
  };

  /**
   * Where this request goes: the next ready pod, once there is one. Each request has its own deadline (one that
   * joins a wake late waits as long as the first), and one past it is refused, never forwarded later.
   */
  const upstreamFor = (svc: Obj<V1Service>): Promise<Upstream> => {
    const deadline = Date.now() + opts.wakeTimeoutMs;
    return new Promise<Upstream>((resolve, reject) => {
      const timer = setTimeout(() => reject(new Error('no ready pod before the wake timeout')), opts.wakeTimeoutMs);
      readyFor(svc, deadline).then(
        ({ targets }) => {
          clearTimeout(timer);
          const t = targets[turn++ % targets.length]!;
          const ip = t.address.includes(':') ? `[${t.address}]` : t.address;
          resolve({ base: new URL(opts.upstreamUrl.replace('{ip}', ip).replace('{port}', String(t.port))) });
        },
        (err: unknown) => {
          clearTimeout(timer);
          reject(err as Error);
        },
      );
    });
  };

  const find = (req: IncomingMessage): Found | { status: number; detail: string } => {
    if (req.headers[FORWARDED_HEADER])
      return { status: 508, detail: 'this request came back to the activator: the deployment is not reachable' };
    const service = serviceForHost(opts.services.list(), req.headers.host);
    if (!service) return { status: 404, detail: `no deployment at host "${req.headers.host ?? ''}"` };
    return { service };
  };

  const retryAfter = Math.max(1, Math.ceil(opts.wakeTimeoutMs / 2000));
  const refuse = (res: ServerResponse, status: number, detail: string): void => {
    if (res.headersSent) {
      res.destroy();
      return;
    }
    res.writeHead(status, {
      'content-type': 'application/json',
      ...(status === 503 ? { 'retry-after': String(retryAfter) } : {}),
    });
    res.end(JSON.stringify({ detail }));
  };

  const forwardHeaders = (req: IncomingMessage) => ({ ...req.headers, [FORWARDED_HEADER]: '1' });

  const mib = opts.maxBodyBytes / 1024 / 1024;
  const limitText = Number.isInteger(mib) ? `${mib} MiB` : `${opts.maxBodyBytes} bytes`;

  async function onRequest(req: IncomingMessage, res: ServerResponse): Promise<void> {
    const found = find(req);
    if ('status' in found) return refuse(res, found.status, found.detail);
    // A declared size over the limit is refused before anything waits; a body is never read ahead of the pod.
    const declared = Number(req.headers['content-length'] ?? 0);
    if (declared > opts.maxBodyBytes) return tooLarge(req, res);
    let gone = false;
    res.once('close', () => (gone = true));
    let up: Upstream;
    try {
      up = await upstreamFor(found.service);
    } catch (err) {
      log.warn({ service: found.service.metadata.name, reason: (err as Error).message }, 'request not forwarded');
      return refuse(res, 503, 'the deployment is waking up; try again shortly');
    }
    // The client gave up while the deployment woke: nobody would read the answer of a request sent now.
    if (gone || req.destroyed) return;
    const out = request(
      {
        host: up.base.hostname,
        port: up.base.port || 80,
        method: req.method,
        path: req.url,
        headers: forwardHeaders(req),
      },
      (upRes) => {
        res.writeHead(upRes.statusCode ?? 502, upRes.rawHeaders);
        // Piped as it comes: an event stream's events reach the client one by one.
        upRes.pipe(res);
      },
    );
    let cut = false;
    out.on('error', (err) => {
      if (!cut) refuse(res, 502, `the agent server did not answer: ${err.message}`);
    });
    res.on('close', () => out.destroy());
    // A body without a declared size (chunked) is counted as it passes: past the limit the pod's request is cut.
    let seen = 0;
    req.on('data', (chunk: Buffer) => {
      seen += chunk.length;
      if (cut || seen <= opts.maxBodyBytes) return;
      cut = true;
      req.unpipe(out);
      out.destroy();
      tooLarge(req, res);
    });
    req.pipe(out);
  }

  /**
   * 413 naming the limit, and the connection closes: what the client still sends is read and dropped (never kept),
   * for a moment only, so it can read the answer before the socket goes.
   */
  function tooLarge(req: IncomingMessage, res: ServerResponse): void {
    if (res.headersSent) return void res.destroy();
    res.writeHead(413, { 'content-type': 'application/json', connection: 'close' });
    res.end(JSON.stringify({ detail: `request body over the activator's limit of ${limitText}` }));
    res.once('finish', () => setTimeout(() => req.socket.destroy(), 2_000).unref());
  }

  async function onUpgrade(req: IncomingMessage, socket: Duplex, head: Buffer): Promise<void> {
    socket.on('error', () => socket.destroy());
    const reject = (status: number, detail: string) => {
      const body = JSON.stringify({ detail });
      socket.end(
        `HTTP/1.1 ${status} ${status === 503 ? 'Service Unavailable' : 'Error'}\r\ncontent-type: application/json\r\n` +
          `${status === 503 ? `retry-after: ${retryAfter}\r\n` : ''}content-length: ${Buffer.byteLength(body)}\r\nconnection: close\r\n\r\n${body}`,
      );
    };
    const found = find(req);
    if ('status' in found) return reject(found.status, found.detail);
    let up: Upstream;
    try {
      up = await upstreamFor(found.service);
    } catch {
      return reject(503, 'the deployment is waking up; try again shortly');
    }
    if (socket.destroyed) return;
    const out = request({
      host: up.base.hostname,
      port: up.base.port || 80,
      method: req.method,
      path: req.url,
      headers: forwardHeaders(req),
    });
    out.on('upgrade', (upRes, upSocket, upHead) => {
      // The agent's 101 as it sent it, then bytes both ways until either side ends.
      const lines = [`HTTP/1.1 ${upRes.statusCode} ${upRes.statusMessage}`];
      for (let i = 0; i < upRes.rawHeaders.length; i += 2)
        lines.push(`${upRes.rawHeaders[i]}: ${upRes.rawHeaders[i + 1]}`);
      socket.write(`${lines.join('\r\n')}\r\n\r\n`);
      if (upHead.length) socket.write(upHead);
      if (head.length) upSocket.write(head);
      upSocket.pipe(socket).pipe(upSocket);
      upSocket.on('error', () => socket.destroy());
      socket.on('close', () => upSocket.destroy());
      upSocket.on('close', () => socket.destroy());
    });
    out.on('response', (upRes) => {
      // No upgrade: the agent's answer as it is.
      const lines = [`HTTP/1.1 ${upRes.statusCode} ${upRes.statusMessage}`];
      for (let i = 0; i < upRes.rawHeaders.length; i += 2)
        lines.push(`${upRes.rawHeaders[i]}: ${upRes.rawHeaders[i + 1]}`);
      socket.write(`${lines.join('\r\n')}\r\n\r\n`);
      upRes.pipe(socket);
    });
    out.on('error', () => reject(502, 'the agent server did not answer'));
    out.end();
  }

  return {
    /** Attaches the activator to an HTTP server (requests and upgrades). */
    attach(server: Server): void {
      server.on('request', (req, res) => void onRequest(req, res));
      server.on('upgrade', (req, socket, head) => void onUpgrade(req, socket as Duplex, head));
    },
  };
}

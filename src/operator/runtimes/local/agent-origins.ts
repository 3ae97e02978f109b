// One origin per deployment on one machine: each deployment is served on a port of its own (http://<host>:<port>/),
// never on the console's origin nor on another deployment's, so a page served by tenant code cannot read the
// console's storage, register a service worker over it, or script another agent's pages. The port a deployment got
// is its own for as long as it exists: remembered in a file (so its URL survives restarts and restores), never moved
// when another program holds it (the deployment waits for it instead: a moved URL would leave the old one free for
// the next deployment, and a client holding it would talk to someone else's agent), and never given to another.
import { mkdirSync, readFileSync, renameSync, writeFileSync } from 'node:fs';
import type { IncomingMessage, Server, ServerResponse } from 'node:http';
import { dirname } from 'node:path';
import type { Duplex } from 'node:stream';
import { createFrontServer } from '../../../lib/http.ts';
import type { Logger } from '../../../lib/logger.ts';

/** Ports deployments may get: a range, or 'auto' (any free port the system picks). */
export type AgentPorts = { from: number; to: number } | 'auto';

export type AgentOriginsOptions = {
  /** Address the deployments' listeners bind to (as the dev server's). */
  host: string;
  ports: AgentPorts;
  /** Where the port of each deployment is remembered. */
  stateFile: string;
  handler(req: IncomingMessage, res: ServerResponse): void;
  /** WebSocket upgrades on a deployment's port. */
  upgrade?(req: IncomingMessage, socket: Duplex, head: Buffer): void;
  logger: Logger;
};

type Listening = { server: Server; port: number };

const isTaken = (err: unknown) => ['EADDRINUSE', 'EACCES'].includes((err as NodeJS.ErrnoException).code ?? '');

export class AgentOrigins {
  private readonly listening = new Map<string, Listening>();
  private readonly byPort = new Map<number, string>();
  private readonly opening = new Map<string, Promise<Listening>>();
  private remembered: Record<string, number> = {};
  /** Deployments forgotten in this process: a late open() (a reconcile racing the delete) must not reserve again. */
  private readonly gone = new Set<string>();
  private closed = false;

  constructor(private readonly opts: AgentOriginsOptions) {
    try {
      const parsed = JSON.parse(readFileSync(opts.stateFile, 'utf8')) as unknown;
      if (parsed && typeof parsed === 'object') {
        for (const [id, port] of Object.entries(parsed)) {
          if (Number.isInteger(port) && (port as number) > 0 && (port as number) < 65536)
            this.remembered[id] = port as number;
        }
      }
    } catch {
      // first start, or an unreadable file: ports are picked afresh
    }
  }

  /** The deployment served on the port a request came in on. */
  deploymentAt(req: IncomingMessage): string | undefined {
    const port = req.socket.localPort;
    return port === undefined ? undefined : this.byPort.get(port);
  }

  /** The deployment's URL, once its port listens. */
  async open(deploymentId: string): Promise<string> {
    if (this.closed) throw new Error('the dev server is shutting down');
    if (this.gone.has(deploymentId)) throw new Error(`deployment ${deploymentId} was deleted`);
    let pending = this.opening.get(deploymentId);
    if (!pending) {
      const known = this.listening.get(deploymentId);
      pending = known ? Promise.resolve(known) : this.listen(deploymentId);
      this.opening.set(deploymentId, pending);
      void pending.then(
        () => this.opening.delete(deploymentId),
        () => this.opening.delete(deploymentId),
      );
    }
    const { port } = await pending;
    const host = ['0.0.0.0', '::'].includes(this.opts.host) ? '127.0.0.1' : this.opts.host;
    return `http://${host.includes(':') ? `[${host}]` : host}:${port}`;
  }

  /**
   * At start: serves again every remembered deployment of `existing` (so its URL answers before its agent is back),
   * and forgets the ports of deployments that no longer exist.
   */
  async restore(existing: string[]): Promise<void> {
    const keep = new Set(existing);
    const gone = Object.keys(this.remembered).filter((id) => !keep.has(id));
    for (const id of gone) delete this.remembered[id];
    if (gone.length) this.save();
    await Promise.all(
      Object.keys(this.remembered).map((id) =>
        this.open(id).catch((err: unknown) =>
          this.opts.logger.warn({ deployment_id: id, err }, 'could not serve a deployment on its port'),
        ),
      ),
    );
  }

  /** Stops serving a deployment and forgets its port (the deployment is gone). */
  async forget(deploymentId: string): Promise<void> {
    this.gone.add(deploymentId);
    await this.opening.get(deploymentId)?.catch(() => undefined);
    const known = this.listening.get(deploymentId);
    this.listening.delete(deploymentId);
    if (known) {
      this.byPort.delete(known.port);
      await stop(known.server);
    }
    if (deploymentId in this.remembered) {
      delete this.remembered[deploymentId];
      this.save();
    }
  }

  async close(): Promise<void> {
    this.closed = true;
    await Promise.all([...this.opening.values()].map((p) => p.catch(() => undefined)));
    await Promise.all([...this.listening.values()].map((l) => stop(l.server)));
    this.listening.clear();
    this.byPort.clear();
  }

  /** Ports a deployment without one may take: the range's, minus every port another deployment holds. */
  private fresh(): number[] {
    const range = this.opts.ports;
    if (range === 'auto') return [0];
    const held = new Set(Object.values(this.remembered));
    const fresh: number[] = [];
    for (let p = range.from; p <= range.to; p++) if (!held.has(p)) fresh.push(p);
    return fresh;
  }

  private async listen(deploymentId: string): Promise<Listening> {
    const mine = this.remembered[deploymentId];
    if (mine !== undefined) {
      const listening = await this.bind(deploymentId, mine);
      if (listening) return listening;
      // EADDRINUSE: the runtime retries the start with backoff (start-failures.ts), the URL does not change.
      throw Object.assign(
        new Error(
          `port ${mine} (this deployment's URL) is in use by another program; the deployment keeps it and is served ` +
            'there once it is free',
        ),
        { code: 'EADDRINUSE' },
      );
    }
    // 'auto' asks the system for any free port, which may be one a deployment holds while it is not listening (its
    // port was busy at start): such a pick is given back, a few times at most.
    for (const candidate of this.opts.ports === 'auto' ? [0, 0, 0, 0, 0, 0, 0, 0] : this.fresh()) {
      if (this.byPort.has(candidate)) continue;
      const listening = await this.bind(deploymentId, candidate);
      if (listening) return listening;
    }
    const range = this.opts.ports;
    throw new Error(
      range === 'auto' ? 'no free port for the deployment' : `every port of ${range.from}-${range.to} is taken`,
    );
  }

  /** Listens on `port` for the deployment and records the port as its own; undefined if the port is not free. */
  private async bind(deploymentId: string, port: number): Promise<Listening | undefined> {
    const server = createFrontServer(this.opts.handler);
    if (this.opts.upgrade) server.on('upgrade', this.opts.upgrade);
    try {
      await new Promise<void>((resolve, reject) => {
        server.once('error', reject);
        server.listen(port, this.opts.host, () => resolve());
      });
    } catch (err) {
      if (isTaken(err)) return undefined;
      throw err;
    }
    const bound = (server.address() as { port: number }).port;
    const holder = Object.entries(this.remembered).find(([id, p]) => p === bound && id !== deploymentId);
    if (this.closed || this.gone.has(deploymentId) || holder) {
      await stop(server);
      if (holder) return undefined;
      throw new Error(this.closed ? 'the dev server is shutting down' : `deployment ${deploymentId} was deleted`);
    }
    const listening = { server, port: bound };
    this.listening.set(deploymentId, listening);
    this.byPort.set(bound, deploymentId);
    if (this.remembered[deploymentId] !== bound) {
      this.remembered[deploymentId] = bound;
      this.save();
    }
    return listening;
  }

  private save(): void {
    mkdirSync(dirname(this.opts.stateFile), { recursive: true });
    const tmp = `${this.opts.stateFile}.${process.pid}.tmp`;
    writeFileSync(tmp, `${JSON.stringify(this.remembered)}\n`);
    renameSync(tmp, this.opts.stateFile);
  }
}

function stop(server: Server): Promise<void> {
  return new Promise((resolve) => {
    server.close(() => resolve());
    server.closeAllConnections();
  });
}

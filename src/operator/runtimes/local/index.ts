// The local runtime: each revision is built in a directory of its own under the data dir and runs as an
// `agentplane agent-server` child process; a deployment's data (threads, runs, checkpoints) lives beside its
// revisions, so every revision of a deployment sees the same threads. Traffic reaches the routed revision through
// the proxy (proxy.ts): on an origin of the deployment's own (agent-origins.ts) or under a listener's
// /deployments/<id>/. This class owns the state (context.ts); each concern is a module of its own (builds, deploy,
// servers, traffic, cleanup).
import { PACKAGE_ROOT } from '../../../lib/package-root.ts';
import { runsImage } from '../../../resources/index.ts';
import type {
  BuildSpec,
  BuildStatus,
  HeldResources,
  RevisionRef,
  Runtime,
  ServerSpec,
  ServerStatus,
} from '../types.ts';
import { build, hasBuild } from './builds.ts';
import { cleanup, stop } from './cleanup.ts';
import {
  createContext,
  deploymentExists,
  type DeploymentRef,
  type LocalContext,
  type LocalRuntimeOptions,
} from './context.ts';
import { deploy, serverStatus } from './deploy.ts';
import { killRunningSteps } from './exec.ts';
import { databaseNameFor } from './postgres.ts';
import type { Backend, Unavailable } from './proxy-target.ts';
import { stopServer } from './server-lifecycle.ts';
import { backend, route, routedRevision } from './traffic.ts';
import { watchIdle } from './idle.ts';

export { databaseNameFor };

/** agentplane's own package: agent servers run its bin/agentplane.mjs (mounted read-only in the sandbox). */
export const PACKAGE_DIR = PACKAGE_ROOT;

export class LocalRuntime implements Runtime {
  private readonly ctx: LocalContext;
  private readonly stopIdleWatch: () => void;

  constructor(private readonly opts: LocalRuntimeOptions) {
    this.ctx = createContext(opts);
    this.stopIdleWatch = watchIdle(this.ctx);
  }

  /** The dev server's public address, known once it listens. */
  setBaseUrl(url: string): void {
    this.ctx.baseUrl = url.replace(/\/$/, '');
  }

  onChange(notify: (ref: RevisionRef) => void): void {
    this.ctx.listeners.push(notify);
  }

  supports(source: string): { ok: true } | { ok: false; message: string } {
    if (runsImage(source)) {
      return {
        ok: false,
        message: `source ${source} needs a container runtime; the local runtime builds from source only (git, or a tarball from langgraph deploy)`,
      };
    }
    return { ok: true };
  }

  url(d: DeploymentRef): string | Promise<string> {
    if (this.opts.origins) return this.opts.origins.open(d.deploymentId);
    return `${this.ctx.baseUrl}/deployments/${d.deploymentId}`;
  }

  hasBuild(ref: RevisionRef): Promise<boolean> {
    return hasBuild(this.ctx, ref);
  }

  build(spec: BuildSpec, held?: { serverEnv?: HeldResources['serverEnv'] | undefined }): Promise<BuildStatus> {
    return build(this.ctx, spec, held?.serverEnv);
  }

  deploy(spec: ServerSpec): Promise<ServerStatus> {
    return deploy(this.ctx, spec);
  }

  serverStatus(ref: RevisionRef): ServerStatus | undefined {
    return serverStatus(this.ctx, ref);
  }

  route(d: DeploymentRef, revision: string): Promise<void> {
    return route(this.ctx, d, revision);
  }

  routedRevision(d: DeploymentRef): string | undefined {
    return routedRevision(this.ctx, d);
  }

  /** For the proxy: where a deployment's traffic goes now (waits while a switch is in progress). */
  backend(deploymentId: string): Promise<Backend | Unavailable | undefined> {
    return backend(this.ctx, deploymentId);
  }

  stop(ref: RevisionRef): Promise<void> {
    return stop(this.ctx, ref);
  }

  cleanup(d: DeploymentRef): Promise<void> {
    return cleanup(this.ctx, d);
  }

  /** Child pids (of one deployment's servers, when given), for tests and diagnostics. */
  pids(deploymentId?: string): number[] {
    return [...this.ctx.servers.values()]
      .filter((s) => deploymentId === undefined || s.ref.deploymentId === deploymentId)
      .map((s) => s.child.pid!)
      .filter(Boolean);
  }

  async shutdown(): Promise<void> {
    const ctx = this.ctx;
    ctx.closed = true;
    this.stopIdleWatch();
    for (const s of ctx.sleeping.values()) clearTimeout(s.timer);
    ctx.restarts.forgetWhere(() => true);
    for (const b of ctx.builds.values()) b.abort.abort();
    await Promise.all([...ctx.servers.values()].map((s) => stopServer(ctx, s)));
    await Promise.allSettled([...ctx.background]);
  }

  /** Last resort on process exit: no child outlives the dev process. */
  killAllNow(): void {
    for (const s of this.ctx.servers.values()) s.signal('SIGKILL');
    for (const b of this.ctx.builds.values()) b.abort.abort();
    killRunningSteps();
  }

  exists(deploymentId: string): boolean {
    return deploymentExists(this.ctx, deploymentId);
  }
}

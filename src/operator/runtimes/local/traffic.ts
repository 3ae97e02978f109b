// Traffic: which revision a deployment's requests go to (the proxy asks backend()), switched by route() once the
// new revision is ready; with embedded data the switch is a handover of the data from one server to the next.
import type { ServerSpec } from '../types.ts';
import { fail, notify, revisionDir, revKey, type DeploymentRef, type LocalContext, type Server } from './context.ts';
import type { Backend, Unavailable } from './proxy-target.ts';
import { redactText } from '../../../git/redact.ts';
import { startServer } from './servers.ts';
import { stopServer } from './server-lifecycle.ts';
import { forgetSleep, touch, wake, wakeWaitMs } from './idle.ts';

export async function route(ctx: LocalContext, d: DeploymentRef, revision: string): Promise<void> {
  const pending = ctx.holds.get(d.deploymentId);
  if (pending) await pending;
  // Already routed there and asleep (put back to sleep after a restart of the platform): nothing to move.
  if (ctx.routes.get(d.deploymentId) === revision && ctx.sleeping.get(d.deploymentId)?.spec.revision === revision)
    return;
  const key = `${d.deploymentId}/${revision}`;
  const server = ctx.servers.get(key);
  const parked = ctx.parked.get(key);
  if (!parked && (server?.phase !== 'Ready' || server.stopping)) {
    throw new Error(`revision ${revision} is not ready to take traffic`);
  }
  const previous = ctx.routes.get(d.deploymentId);
  // Traffic moves to another revision: the sleep of the one it leaves is over (that one is stopped already).
  if (ctx.sleeping.get(d.deploymentId)?.spec.revision !== revision) forgetSleep(ctx, d.deploymentId);
  const others = [...ctx.servers.values()].filter(
    (s) => s.ref.deploymentId === d.deploymentId && s.ref.revision !== revision,
  );
  if (parked || server!.preflight) {
    ctx.parked.delete(key);
    await handover(ctx, d, parked ?? server!.spec, parked ? undefined : server, others, previous);
  } else {
    ctx.routes.set(d.deploymentId, revision);
    // Traffic has moved: the other revisions' servers stop once their open requests finish.
    for (const other of others) void stopServer(ctx, other, true);
  }
  if (previous !== ctx.routes.get(d.deploymentId)) {
    notify(ctx, { ...d, revision });
    if (previous) notify(ctx, { ...d, revision: previous });
  }
}

/**
 * Embedded data: hold new requests, let the old server finish its open ones and stop, start the new revision on
 * the deployment's data, then release. If the new one does not come up, the old one is started again.
 */
async function handover(
  ctx: LocalContext,
  d: DeploymentRef,
  spec: ServerSpec,
  preflight: Server | undefined,
  others: Server[],
  previous: string | undefined,
): Promise<void> {
  let release!: () => void;
  ctx.holds.set(d.deploymentId, new Promise<void>((r) => (release = r)));
  const log = ctx.opts.logger.child({ deployment: d.deployment, revision: spec.revision });
  try {
    ctx.routes.set(d.deploymentId, spec.revision);
    const old = others.find((s) => s.ref.revision === previous && !s.stopping);
    await Promise.all([...others.map((o) => stopServer(ctx, o, true)), preflight && stopServer(ctx, preflight)]);
    const fresh = await startServer(ctx, spec, revisionDir(ctx, spec)).catch((err: Error) => {
      fail(ctx, spec, `agent server could not start: ${redactText(err.message).split('\n')[0]}`);
      return undefined;
    });
    if (fresh && (await fresh.healthy)) {
      log.info('traffic handed over');
      return;
    }
    if (!ctx.failed.has(revKey(spec))) fail(ctx, spec, 'agent server did not start on the deployment data');
    log.warn('new revision failed on the deployment data; restoring the previous one');
    if (old) {
      ctx.routes.set(d.deploymentId, old.ref.revision);
      const again = await startServer(ctx, old.spec, revisionDir(ctx, old.ref)).catch(() => undefined);
      if (again) await again.healthy;
    } else {
      ctx.routes.delete(d.deploymentId);
    }
  } finally {
    ctx.holds.delete(d.deploymentId);
    release();
  }
}

export function routedRevision(ctx: LocalContext, d: DeploymentRef): string | undefined {
  const revision = ctx.routes.get(d.deploymentId);
  if (!revision) return undefined;
  // Asleep (or waking) it keeps its route: its next request starts it.
  if (ctx.sleeping.get(d.deploymentId)?.spec.revision === revision || ctx.waking.has(d.deploymentId)) return revision;
  const server = ctx.servers.get(`${d.deploymentId}/${revision}`);
  return server && server.phase === 'Ready' && !server.stopping ? revision : undefined;
}

/** For the proxy: where a deployment's traffic goes now (waits while a switch is in progress). */
export async function backend(ctx: LocalContext, deploymentId: string): Promise<Backend | Unavailable | undefined> {
  const pending = ctx.holds.get(deploymentId);
  if (pending) await pending;
  if (ctx.sleeping.has(deploymentId) || ctx.waking.has(deploymentId)) {
    // Held while the server starts (one start for every request that waits), within a bound; past it the caller
    // is told when to come back, and the start goes on.
    const waitMs = wakeWaitMs(ctx);
    let timer: NodeJS.Timeout | undefined;
    const woken = await Promise.race([
      wake(ctx, deploymentId),
      new Promise<'late'>((r) => (timer = setTimeout(() => r('late'), waitMs))),
    ]);
    clearTimeout(timer);
    if (woken === 'late') return { unavailable: 'its agent server is waking', retryAfterSecs: 5 };
  }
  const revision = ctx.routes.get(deploymentId);
  if (!revision) return undefined;
  const key = `${deploymentId}/${revision}`;
  const server = ctx.servers.get(key);
  if (server?.phase !== 'Ready' || server.stopping) {
    // The routed revision is being started again (or waits for its backoff): come back shortly.
    const pending = ctx.restarts.pending(key);
    if (!pending && !server) return undefined;
    const wait = pending ? Math.ceil((pending.at - Date.now()) / 1000) : 0;
    return {
      unavailable: pending ? `${pending.reason}: ${pending.message}` : 'its agent server is starting',
      retryAfterSecs: Math.min(Math.max(wait, 1), 60),
    };
  }
  return {
    port: server.port,
    tenant: server.spec.tenantId,
    acquire: () => {
      // It began to stop (its sleep, or traffic moved on) while the proxy checked the request: not this server.
      if (server.stopping || ctx.servers.get(key) !== server) return undefined;
      server.inflight++;
      touch(ctx, deploymentId);
      let released = false;
      return () => {
        if (!released) server.inflight--;
        released = true;
        touch(ctx, deploymentId);
      };
    },
  };
}

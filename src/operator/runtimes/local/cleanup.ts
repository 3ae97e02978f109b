// Stopping: one revision (its build and server, never the routed one) or a whole deployment, whose files, install
// cache entries and database go with it.
import { rm } from 'node:fs/promises';
import { join } from 'node:path';
import type { RevisionRef } from '../types.ts';
import { deploymentDir, deploymentExists, revKey, type DeploymentRef, type LocalContext } from './context.ts';
import { removeInstallCacheOf } from './housekeeping.ts';
import { dropDeploymentDatabase } from './postgres.ts';
import { stopServer } from './server-lifecycle.ts';
import { forgetSleep } from './idle.ts';

export async function stop(ctx: LocalContext, ref: RevisionRef): Promise<void> {
  // The routed revision is stopped only by a switch or by cleanup, never from outside.
  if (ctx.routes.get(ref.deploymentId) === ref.revision || ctx.holds.has(ref.deploymentId)) return;
  const key = revKey(ref);
  const build = ctx.builds.get(key);
  if (build && build.status.phase === 'Running') {
    build.abort.abort();
    ctx.builds.delete(key);
  }
  ctx.parked.delete(key);
  ctx.restarts.forget(key);
  const server = ctx.servers.get(key);
  if (server) await stopServer(ctx, server);
}

export async function cleanup(ctx: LocalContext, d: DeploymentRef): Promise<void> {
  ctx.gone.add(d.deploymentId);
  const pending = ctx.holds.get(d.deploymentId);
  if (pending) await pending;
  for (const [key, build] of ctx.builds) {
    if (key.startsWith(`${d.deploymentId}/`)) {
      build.abort.abort();
      ctx.builds.delete(key);
    }
  }
  ctx.routes.delete(d.deploymentId);
  forgetSleep(ctx, d.deploymentId);
  await ctx.waking.get(d.deploymentId);
  for (const key of [...ctx.parked.keys()]) if (key.startsWith(`${d.deploymentId}/`)) ctx.parked.delete(key);
  const mine = [...ctx.servers.values()].filter((s) => s.ref.deploymentId === d.deploymentId);
  await Promise.all(mine.map((s) => stopServer(ctx, s)));
  for (const key of [...ctx.failed.keys()]) if (key.startsWith(`${d.deploymentId}/`)) ctx.failed.delete(key);
  ctx.restarts.forgetWhere((key) => key.startsWith(`${d.deploymentId}/`));
  for (const key of [...ctx.budgets.keys()]) if (key.startsWith(`${d.deploymentId}/`)) ctx.budgets.delete(key);
  await ctx.opts.origins?.forget(d.deploymentId);
  await rm(deploymentDir(ctx, d.deploymentId), { recursive: true, force: true, maxRetries: 3 });
  // Its installs are of no use to anyone else (entries are never shared between deployments).
  const evicted = await removeInstallCacheOf(
    join(ctx.opts.dataDir, 'install-cache'),
    d.deploymentId,
    (id) => !ctx.gone.has(id) && deploymentExists(ctx, id),
  );
  if (evicted.length)
    ctx.opts.logger.info({ deployment: d.deploymentId, entries: evicted.length }, 'install cache entries removed');
  if (ctx.opts.databaseUrl) await dropDeploymentDatabase(ctx.opts.databaseUrl, d.deploymentId);
}

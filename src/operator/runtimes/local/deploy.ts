// Deploying a revision: start its server unless it runs, failed, waits for its backoff or is parked (a proven
// revision waiting for route() to hand the embedded data over); a build folder pruned meanwhile is built again.
import { readFile } from 'node:fs/promises';
import type { RevisionRef, ServerSpec, ServerStatus } from '../types.ts';
import { readBuildMarker } from './build-steps.ts';
import { build } from './builds.ts';
import { fail, notify, revisionDir, revKey, savedBuildFile, type LocalContext, type SavedBuild } from './context.ts';
import { secretsProblem } from './env.ts';
import { redactText } from '../../../git/redact.ts';
import { startServer } from './servers.ts';
import { statusOf } from './server-lifecycle.ts';
import { restoreSleep, sleepingStatus } from './idle.ts';
import { isTransientStart, restartStatus } from './start-failures.ts';

/**
 * One deploy() per revision at a time: a second call while the first is on its way (two reconciles of the same
 * revision, or a reconcile and a change notification) joins it. Between seeing no server and recording the one it
 * starts, deploy() waits on the disk and the port: two calls would each start a server, and the one not recorded
 * would run unsupervised, holding the embedded data folder the recorded one then waits for until its health check
 * fails the revision.
 */
export function deploy(ctx: LocalContext, spec: ServerSpec): Promise<ServerStatus> {
  const key = revKey(spec);
  const inProgress = ctx.deploying.get(key);
  if (inProgress) return inProgress;
  const once = deployOnce(ctx, spec).finally(() => ctx.deploying.delete(key));
  ctx.deploying.set(key, once);
  return once;
}

async function deployOnce(ctx: LocalContext, spec: ServerSpec): Promise<ServerStatus> {
  const key = revKey(spec);
  const failure = ctx.failed.get(key);
  if (failure) return { phase: 'Failed', message: failure };
  // Asleep when the platform stopped: it goes on sleeping.
  await restoreSleep(ctx, spec);
  // Asleep: its next request or its due work starts it, not a reconcile; the spec it wakes with stays current.
  const sleep = ctx.sleeping.get(spec.deploymentId);
  if (sleep?.spec.revision === spec.revision) {
    sleep.spec = spec;
    return sleepingStatus(ctx, spec.deploymentId, spec.revision)!;
  }
  const running = ctx.servers.get(key);
  if (running && !running.stopping) {
    // The idle policy needs no restart: the running server follows the deployment's current one.
    running.spec = { ...running.spec, idleTimeoutMinutes: spec.idleTimeoutMinutes };
    return statusOf(ctx, running);
  }
  if (ctx.parked.has(key)) return { phase: 'Ready' };
  if (ctx.waking.has(spec.deploymentId) && ctx.routes.get(spec.deploymentId) === spec.revision)
    return { phase: 'Starting' };
  if (ctx.gone.has(spec.deploymentId)) return { phase: 'Failed', message: 'the deployment was deleted' };
  // Started again only once its backoff is over (the supervisor's timer asks for this reconcile then).
  if (ctx.restarts.waiting(key)) return restartStatus(ctx.restarts.pending(key)!);
  // A switch in progress starts and stops this deployment's servers itself.
  if (ctx.closed || ctx.holds.has(spec.deploymentId)) return { phase: 'Starting' };
  // A value spawn() cannot pass (NUL, over 128 KiB) or a reserved name is the secret's fault, whether or not the
  // build is on disk.
  const refused = secretsProblem(spec.env);
  if (refused) return fail(ctx, spec, `agent server could not start: ${refused}`);
  const dir = revisionDir(ctx, spec);
  const marker = await readBuildMarker(dir);
  if (!marker) return rebuild(ctx, spec);
  // The embedded store admits one process per data dir: while another revision serves, prove this one boots
  // on scratch data; route() then hands the real data over.
  const othersLive = [...ctx.servers.values()].some(
    (s) => s.ref.deploymentId === spec.deploymentId && s.ref.revision !== spec.revision && !s.stopping,
  );
  const exclusive = !ctx.opts.databaseUrl && othersLive;
  if (exclusive && spec.proven) {
    ctx.parked.set(key, spec);
    // Nothing else will change for this revision until route(): tell the controllers it can take traffic.
    queueMicrotask(() => notify(ctx, spec));
    return { phase: 'Ready' };
  }
  try {
    await startServer(ctx, spec, dir, exclusive);
  } catch (err) {
    const message = redactText(err instanceof Error ? err.message : String(err)).split('\n')[0]!;
    const log = { deployment: spec.deployment, revision: spec.revision, reason: message };
    // A reason that passes (its database unreachable, a port taken meanwhile) is retried with backoff.
    if (isTransientStart(err) && !ctx.gone.has(spec.deploymentId) && !ctx.closed) {
      const next = ctx.restarts.failed(key, spec, `agent server could not start: ${message}`, true);
      ctx.opts.logger.warn({ ...log, retry_in_ms: next.at - Date.now() }, 'agent server could not start; retrying');
      return restartStatus(next);
    }
    // Anything else (bad secrets, a checkout leading outside itself, ...) ends this revision's deploy.
    ctx.opts.logger.warn(log, 'agent server could not start');
    return fail(ctx, spec, `agent server could not start: ${message}`);
  }
  const started = ctx.servers.get(key);
  return started
    ? statusOf(ctx, started)
    : ctx.failed.has(key)
      ? { phase: 'Failed', message: ctx.failed.get(key)! }
      : { phase: 'Starting' };
}

/**
 * A revision whose build folder was removed (keepBuilds), or never was on this disk (a restored data folder): build
 * the same commit again, then serve it. The build spec saved here wins; else the one the revision's resource records.
 */
async function rebuild(ctx: LocalContext, spec: ServerSpec): Promise<ServerStatus> {
  const saved =
    (await readFile(savedBuildFile(ctx, spec), 'utf8')
      .then((t) => JSON.parse(t) as SavedBuild)
      .catch(() => undefined)) ?? spec.builtFrom;
  if (!saved) {
    return fail(ctx, spec, 'the build of this revision is not on disk and its resource records no commit to rebuild');
  }
  // The same commit, from the saved build spec only (the server spec carries secrets, which builds never get).
  const status = await build(
    ctx,
    { ...saved.spec, revision: spec.revision, repoRef: saved.commitSha },
    async () => spec.env,
  );
  if (status.phase === 'Failed') return fail(ctx, spec, `rebuilding this revision failed: ${status.message}`);
  if (status.phase === 'Succeeded') return deployOnce(ctx, spec); // within the deploy() in progress
  return { phase: 'Starting' };
}

export function serverStatus(ctx: LocalContext, ref: RevisionRef): ServerStatus | undefined {
  const failure = ctx.failed.get(revKey(ref));
  if (failure) return { phase: 'Failed', message: failure };
  if (ctx.parked.has(revKey(ref))) return { phase: 'Ready' };
  const asleep = sleepingStatus(ctx, ref.deploymentId, ref.revision);
  if (asleep) return asleep;
  const server = ctx.servers.get(revKey(ref));
  if (server && !server.stopping) return statusOf(ctx, server);
  const pending = ctx.restarts.pending(revKey(ref));
  return pending ? restartStatus(pending) : undefined;
}

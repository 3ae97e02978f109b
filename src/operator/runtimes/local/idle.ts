// The idle policy on one machine: a routed agent server with no request, stream or WebSocket open through the proxy
// for its deployment's idle window, no run executing or queued and nothing due within the window (its own store
// says so) is stopped like any server (SIGTERM, drain). Its deployment keeps its route and URL: the proxy holds the
// first request while the server starts again (wake(), one start shared by every waiting request), and a timer
// starts it when its store's next work is due (a cron tick, a run's after_seconds), read once it has stopped and
// nothing changes the store any more.
import { join } from 'node:path';
import {
  embeddedPendingWork,
  postgresPendingWork,
  type PendingWork,
} from '../../../agent-server/storage/pending-work.ts';
import type { ServerSpec, ServerStatus } from '../types.ts';
import {
  deploymentDir,
  logWriter,
  notify,
  revisionDir,
  revKey,
  track,
  type LocalContext,
  type Server,
  type Sleep,
} from './context.ts';
import { idleVerdict, wakeAt } from '../idle-policy.ts';
import { databaseNameFor } from './postgres.ts';
import { startServer } from './servers.ts';
import { stopServer } from './server-lifecycle.ts';
import { isTransientStart } from './start-failures.ts';
import { readBuildMarker } from './build-steps.ts';
import { loadSleep, recordSleep } from './sleep-record.ts';

export const IDLE_DEFAULTS = { minuteMs: 60_000, checkMs: 15_000, wakeWaitMs: 30_000 };

const idle = (ctx: LocalContext) => ({ ...IDLE_DEFAULTS, ...ctx.opts.idle });

/** What the deployment's store holds for later, read directly (undefined when it cannot be read: keep it awake). */
export async function pendingWork(ctx: LocalContext, deploymentId: string): Promise<PendingWork | undefined> {
  try {
    if (!ctx.opts.databaseUrl) return embeddedPendingWork(join(deploymentDir(ctx, deploymentId), 'data'));
    const url = new URL(ctx.opts.databaseUrl);
    url.pathname = `/${databaseNameFor(deploymentId)}`;
    return await postgresPendingWork(url.toString());
  } catch (err) {
    ctx.opts.logger.warn(
      { deployment: deploymentId, reason: (err as Error).message },
      "could not read the agent's store for the idle policy; it stays awake",
    );
    return undefined;
  }
}

/** A request or stream began or ended: the deployment is not idle. */
export function touch(ctx: LocalContext, deploymentId: string): void {
  ctx.activity.set(deploymentId, Date.now());
}

/** Looks for idle servers every checkMs while the runtime runs; returns the stop. */
export function watchIdle(ctx: LocalContext): () => void {
  let busy = false;
  const timer = setInterval(() => {
    if (busy || ctx.closed) return;
    busy = true;
    void track(ctx, sweepIdle(ctx)).finally(() => (busy = false));
  }, idle(ctx).checkMs);
  timer.unref();
  return () => clearInterval(timer);
}

/** One look at every routed server: those idle for their deployment's window go to sleep. */
export async function sweepIdle(ctx: LocalContext): Promise<void> {
  const { minuteMs } = idle(ctx);
  for (const [deploymentId, revision] of [...ctx.routes]) {
    const server = ctx.servers.get(`${deploymentId}/${revision}`);
    const timeoutMs = (server?.spec.idleTimeoutMinutes ?? 0) * minuteMs;
    if (!server || timeoutMs <= 0 || !candidate(ctx, server)) continue;
    const facts = {
      now: Date.now(),
      timeoutMs,
      lastActiveMs: Math.max(ctx.activity.get(deploymentId) ?? 0, server.readyAt ?? 0),
      open: server.inflight,
    };
    // The cheap facts first: the store is read only for a server the proxy has seen nothing of for a whole window.
    if (!idleVerdict({ ...facts, work: { activeRuns: 0, nextDueMs: null } }).sleep) continue;
    const work = await pendingWork(ctx, deploymentId);
    // Things moved while the store was read: look again next time.
    if (!candidate(ctx, server)) continue;
    const verdict = idleVerdict({ ...facts, open: server.inflight, work });
    if (verdict.sleep) await sleep(ctx, server, timeoutMs);
  }
}

const candidate = (ctx: LocalContext, s: Server) =>
  s.phase === 'Ready' &&
  !s.stopping &&
  !s.preflight &&
  !ctx.closed &&
  !ctx.gone.has(s.ref.deploymentId) &&
  !ctx.holds.has(s.ref.deploymentId) &&
  !ctx.sleeping.has(s.ref.deploymentId) &&
  !ctx.waking.has(s.ref.deploymentId) &&
  ctx.routes.get(s.ref.deploymentId) === s.ref.revision;

/** Stops an idle server; its deployment sleeps until a request, or its store's next due work, wakes it. */
async function sleep(ctx: LocalContext, server: Server, timeoutMs: number): Promise<void> {
  const d = server.ref.deploymentId;
  const log = logWriter(ctx, server.ref, 'deploy');
  const minutes = Math.round((timeoutMs / idle(ctx).minuteMs) * 100) / 100;
  log.line(`no requests, runs or due crons for ${minutes} min: stopping the agent server until it is needed`);
  // Set before the stop begins: a request from here on waits for the stop, then wakes the server.
  const entry: Sleep = { spec: server.spec, since: Date.now(), stopped: stopServer(ctx, server, true) };
  ctx.sleeping.set(d, entry);
  await entry.stopped;
  // Stopped: its store changes no more until the next start, so what it holds now is when to wake it.
  const at = wakeAt(Date.now(), await pendingWork(ctx, d));
  if (ctx.sleeping.get(d) !== entry || entry.woken) return;
  entry.wakeAt = at;
  // Written down before anything can wake it (same tick as the check): a wake's removal always comes after it.
  const recorded = recordSleep(ctx, d, { revision: server.ref.revision, since: entry.since, wakeAt: at });
  armWake(ctx, d, entry);
  await recorded;
  log.line(
    `agent server sleeping${at === undefined ? '' : `; due work wakes it at ${new Date(at).toISOString()}`}; the next request wakes it`,
  );
  await log.flush();
  ctx.opts.logger
    .child({ deployment: server.ref.deployment, revision: server.ref.revision })
    .info({ wake_at: at && new Date(at).toISOString() }, 'agent server sleeping (idle)');
  notify(ctx, server.ref);
}

function armWake(ctx: LocalContext, deploymentId: string, entry: Sleep): void {
  if (entry.wakeAt === undefined) return;
  entry.timer = setTimeout(() => void wake(ctx, deploymentId), Math.max(0, entry.wakeAt - Date.now()));
  entry.timer.unref();
}

/**
 * After a restart of the platform: the first deploy of a revision that was asleep when the platform stopped puts it
 * back to sleep (routed, no server, the same wake time) instead of starting it. Looked at once per revision and
 * runtime; concurrent deploys share the look. Only on a deployment this runtime has not routed yet, with its build
 * still on disk (otherwise it starts, or is built again, as without the record).
 */
export function restoreSleep(ctx: LocalContext, spec: ServerSpec): Promise<void> {
  const key = revKey(spec);
  let look = ctx.restoring.get(key);
  if (!look) {
    look = track(ctx, restore(ctx, spec));
    ctx.restoring.set(key, look);
  }
  return look;
}

async function restore(ctx: LocalContext, spec: ServerSpec): Promise<void> {
  const d = spec.deploymentId;
  const fresh = () =>
    !ctx.closed && !ctx.gone.has(d) && !ctx.routes.has(d) && !ctx.sleeping.has(d) && !ctx.servers.has(revKey(spec));
  if (!fresh()) return;
  const record = await loadSleep(ctx, d);
  if (record?.revision !== spec.revision) return;
  const built = await readBuildMarker(revisionDir(ctx, spec));
  if (!fresh()) return;
  if (!built) {
    void recordSleep(ctx, d, undefined);
    return;
  }
  const entry: Sleep = { spec, since: record.since, stopped: Promise.resolve(), wakeAt: record.wakeAt };
  ctx.sleeping.set(d, entry);
  ctx.routes.set(d, spec.revision);
  armWake(ctx, d, entry);
  const log = logWriter(ctx, spec, 'deploy');
  const due = record.wakeAt === undefined ? '' : `; due work wakes it at ${new Date(record.wakeAt).toISOString()}`;
  log.line(`the platform started again: the agent server stays asleep${due}; the next request wakes it`);
  await log.flush();
  ctx.opts.logger
    .child({ deployment: spec.deployment, revision: spec.revision })
    .info(
      { wake_at: record.wakeAt && new Date(record.wakeAt).toISOString() },
      'agent server still sleeping (restored)',
    );
  notify(ctx, spec);
}

/**
 * Starts a sleeping deployment's server again (after its stop, when one is in progress); every caller during the
 * wake shares one start. True once it answers /ok. A start that fails leaves the deployment awake and failing, so
 * the runtime's restart supervision (and its status) take over from there.
 */
export function wake(ctx: LocalContext, deploymentId: string): Promise<boolean> {
  const running = ctx.waking.get(deploymentId);
  if (running) return running;
  const entry = ctx.sleeping.get(deploymentId);
  if (!entry) return Promise.resolve(true);
  entry.woken = true;
  // From here a restart of the platform starts it, as any deployment that is awake. The removal goes on while the
  // server starts (a waiting request does not pay for it): a platform stopped before it is done finds the record and
  // leaves the deployment asleep, which its next request wakes; a later sleep's record is written after it.
  const unrecorded = recordSleep(ctx, deploymentId, undefined);
  const woken = (async () => {
    clearTimeout(entry.timer);
    await entry.stopped;
    if (ctx.closed || ctx.gone.has(deploymentId)) return false;
    const log = logWriter(ctx, entry.spec, 'deploy');
    log.line('waking the agent server (a request or due work)');
    try {
      const server = await startServer(ctx, entry.spec, revisionDir(ctx, entry.spec));
      ctx.sleeping.delete(deploymentId);
      const ok = await server.healthy;
      touch(ctx, deploymentId);
      return ok;
    } catch (err) {
      ctx.sleeping.delete(deploymentId);
      log.line(`agent server could not wake: ${(err as Error).message.split('\n')[0]}`);
      // Not a deploy failure: a later reconcile starts it (with backoff) like a server that ended.
      // Its database away or its port taken: retried soon (DatabaseUnavailable); anything else as a restart.
      ctx.restarts.failed(
        revKey(entry.spec),
        entry.spec,
        `agent server could not wake: ${(err as Error).message.split('\n')[0]}`,
        isTransientStart(err),
      );
      return false;
    } finally {
      await Promise.all([log.flush(), unrecorded]);
      ctx.waking.delete(deploymentId);
      notify(ctx, entry.spec);
    }
  })();
  ctx.waking.set(deploymentId, woken);
  return track(ctx, woken);
}

/** The status of a sleeping (or waking) deployment's routed revision, or undefined when it is not asleep. */
export function sleepingStatus(ctx: LocalContext, deploymentId: string, revision: string): ServerStatus | undefined {
  const entry = ctx.sleeping.get(deploymentId);
  if (!entry || entry.spec.revision !== revision) return undefined;
  return {
    phase: 'Ready',
    sleeping: {
      since: new Date(entry.since).toISOString(),
      ...(entry.wakeAt === undefined ? {} : { wakeAt: new Date(entry.wakeAt).toISOString() }),
    },
  };
}

/** Forgets a deployment's sleep (it moved to another revision, or is deleted). */
export function forgetSleep(ctx: LocalContext, deploymentId: string): void {
  const entry = ctx.sleeping.get(deploymentId);
  clearTimeout(entry?.timer);
  if (entry) {
    entry.woken = true;
    void recordSleep(ctx, deploymentId, undefined);
  }
  ctx.sleeping.delete(deploymentId);
  ctx.activity.delete(deploymentId);
}

/** How long the proxy holds a request while the deployment wakes. */
export const wakeWaitMs = (ctx: LocalContext) => idle(ctx).wakeWaitMs;

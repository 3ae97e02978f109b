// The idle policy in a cluster (docs/kubernetes.md#idle-deployments-sleep): every --idle-check-interval the operator
// asks each ready pod of an awake deployment the policy covers for its activity (GET /ok?activity=1: requests open,
// the last one's time, runs, the next due cron or scheduled run); when no pod saw traffic for the whole window and
// nothing is running or due within it, it records the sleep on the Deployment and the next reconcile (deploy.ts)
// points the Service at the activator and scales to 0. Sleeping deployments whose due work has come are handed back
// to the reconcile, which wakes them (sleep.ts nextSleep), as does a wake the activator asks for.
import type { V1Deployment, V1Pod } from '@kubernetes/client-node';
import type { AgentDeployment } from '../../../resources/index.ts';
import { idleVerdict } from '../idle-policy.ts';
import type { RevisionRef, ServerSpec, ServerStatus } from '../types.ts';
import { apply, isStatus } from './apply.ts';
import { deleteIfPresent, type IdleEntry, type Obj, type RuntimeContext } from './context.ts';
import { LABEL_REVISION, selectorLabels, type Target } from './labels.ts';
import { SERVER_PORT, serverName } from './server.ts';
import { makeService } from './routing.ts';
import {
  ACTIVATOR_SLICE_SUFFIX,
  ANNOTATION_SLEEPING_SINCE,
  ANNOTATION_WAKE_AT,
  ANNOTATION_WAKE_REQUESTED,
  ANNOTATION_WAKING,
  makeActivatorSlice,
  makeSleepingService,
  nextSleep,
  readyEndpoints,
  sleepAnnotations,
  sleepStateOf,
  type ActivatorEndpoints,
  type SleepState,
} from './sleep.ts';

const key = (t: Target) => `${t.namespace}/${serverName(t)}`;

/**
 * The sleep state the deploy of `spec` applies: undefined when the policy does not cover the deployment and it is
 * awake (the Deployment is written as without the policy). A deployment moving to another revision, or no longer
 * covered, wakes.
 */
export function sleepOf(
  ctx: RuntimeContext,
  target: Target,
  spec: ServerSpec,
  dep: AgentDeployment,
  activityToken: string | undefined,
): SleepState | undefined {
  const timeoutMs = (spec.idleTimeoutMinutes ?? 0) * 60_000;
  const covered = Boolean(ctx.opts.config.idle.activator && activityToken) && timeoutMs > 0 && !target.deleting;
  if (covered) ctx.idle.set(key(target), { ref: spec, target, timeoutMs, activityToken: activityToken! });
  else ctx.idle.delete(key(target));
  const current = ctx.deployments.get(key(target));
  const state = sleepStateOf(current?.metadata.annotations);
  if (!covered && state.kind === 'awake') return undefined;
  const running = current?.spec?.template?.metadata?.labels?.[LABEL_REVISION];
  return nextSleep({
    now: Date.now(),
    state,
    eligible: covered && (running === undefined || running === spec.revision),
    wakeRequested: dep.metadata.annotations?.[ANNOTATION_WAKE_REQUESTED],
    readyReplicas: current?.status?.readyReplicas ?? 0,
  });
}

/** A sleeping (or waking) deployment's status: Ready, since its first request wakes it. */
export function sleepingStatus(d: V1Deployment | undefined, revision: string): ServerStatus | undefined {
  if (d?.spec?.template?.metadata?.labels?.[LABEL_REVISION] !== revision) return undefined;
  const state = sleepStateOf(d.metadata?.annotations);
  if (state.kind === 'awake') return undefined;
  return {
    phase: 'Ready',
    sleeping: { since: state.since, ...(state.kind === 'asleep' && state.wakeAt ? { wakeAt: state.wakeAt } : {}) },
  };
}

/**
 * Takes off the Deployment the sleep annotations `state` no longer records. Server-side apply removes only fields
 * its own applies set, and fallAsleep records a sleep with a compare-and-swap update, which owns what it added: an
 * apply that leaves the annotations out keeps them, and the deployment would read as asleep again after waking. An
 * update replaces the whole object, so it removes them whoever set them. Conflicts are retried a few times, then
 * left to the next reconcile.
 */
export async function clearStaleSleepRecord(
  ctx: RuntimeContext,
  target: Target,
  live: V1Deployment,
  state: SleepState,
): Promise<void> {
  const want = sleepAnnotations(state);
  const stale = [ANNOTATION_SLEEPING_SINCE, ANNOTATION_WAKE_AT, ANNOTATION_WAKING].filter(
    (k) => live.metadata?.annotations?.[k] !== undefined && want[k] === undefined,
  );
  if (!stale.length) return;
  const name = serverName(target);
  // The Deployment controller writes its status often while pods come back: a conflict is read again at once.
  for (let attempt = 1; ; attempt++) {
    const d = await ctx.ops.deployment.read(target.namespace, name);
    const annotations = { ...d.metadata?.annotations };
    for (const k of stale) delete annotations[k];
    d.metadata = { ...d.metadata, annotations };
    try {
      await ctx.ops.deployment.replace(target.namespace, name, d);
      return;
    } catch (err) {
      if (isStatus(err, 409) && attempt < 5) continue;
      if (isStatus(err, 409)) return;
      throw err;
    }
  }
}

/** The activator's ready pods, from its Service's EndpointSlices. */
async function activatorEndpoints(ctx: RuntimeContext): Promise<ActivatorEndpoints> {
  const svc = ctx.opts.config.idle.activator!;
  const { items } = await ctx.discovery.listNamespacedEndpointSlice({
    namespace: svc.namespace,
    labelSelector: `kubernetes.io/service-name=${svc.name}`,
  });
  const ready = readyEndpoints(items);
  if (ready) return ready;
  ctx.log.warn({ activator: `${svc.namespace}/${svc.name}` }, 'the activator has no ready pod: requests wait for one');
  const port = items.flatMap((s) => s.ports ?? [])[0]?.port ?? 8080;
  return { addresses: [], port, addressType: 'IPv4' };
}

/**
 * Where the agent Service sends traffic in `state`: its pods (the usual Service; the activator's EndpointSlice
 * removed), or the activator (no selector, our EndpointSlice listing the activator's pods).
 */
export async function applySleepRouting(
  ctx: RuntimeContext,
  target: Target,
  state: SleepState,
  host: string | undefined,
): Promise<void> {
  const sliceName = `${serverName(target)}${ACTIVATOR_SLICE_SUFFIX}`;
  const sliceKey = `endpointslices/${target.namespace}/${sliceName}`;
  if (state.kind === 'awake') {
    await apply(ctx.ops.service, makeService(target));
    // Without the activator the chart grants no rights to EndpointSlices, and this runtime never made one.
    if (!ctx.opts.config.idle.activator) return;
    await deleteIfPresent(
      ctx,
      sliceKey,
      () => ctx.discovery.deleteNamespacedEndpointSlice({ name: sliceName, namespace: target.namespace }),
      () => ctx.discovery.readNamespacedEndpointSlice({ name: sliceName, namespace: target.namespace }),
    );
    return;
  }
  ctx.absent.delete(sliceKey);
  // The slice first: once the selector goes, the EndpointSlice controller removes its own slices of the Service.
  await apply(ctx.ops.endpointSlice, makeActivatorSlice(target, serverName(target), await activatorEndpoints(ctx)));
  await apply(ctx.ops.service, makeSleepingService(makeService(target), state.since, host));
}

/** Keeps the activator's EndpointSlices of sleeping deployments current (its pods moved, or it scaled). */
async function refreshSlices(ctx: RuntimeContext, entries: IdleEntry[]): Promise<void> {
  const asleep = entries.filter(
    (e) => sleepStateOf(ctx.deployments.get(key(e.target))?.metadata.annotations).kind !== 'awake',
  );
  if (!asleep.length) return;
  const to = await activatorEndpoints(ctx);
  for (const e of asleep) await apply(ctx.ops.endpointSlice, makeActivatorSlice(e.target, serverName(e.target), to));
}

/** Looks at the covered deployments every checkSeconds while the runtime runs; returns the stop. */
export function watchIdle(ctx: RuntimeContext, notify: (ref: RevisionRef) => void): () => void {
  let busy = false;
  const timer = setInterval(() => {
    if (busy) return;
    busy = true;
    void sweepIdle(ctx, notify)
      .catch((err: unknown) => ctx.log.warn({ err }, 'idle policy: a look at the deployments failed'))
      .finally(() => (busy = false));
  }, ctx.opts.config.idle.checkSeconds * 1000);
  timer.unref();
  return () => clearInterval(timer);
}

/** One look: due work wakes sleeping deployments, idle awake ones go to sleep. */
export async function sweepIdle(ctx: RuntimeContext, notify: (ref: RevisionRef) => void): Promise<void> {
  const entries = [...ctx.idle.values()];
  await refreshSlices(ctx, entries);
  for (const e of entries) {
    const d = ctx.deployments.get(key(e.target));
    if (!d) continue;
    const state = sleepStateOf(d.metadata.annotations);
    if (state.kind === 'asleep') {
      // The reconcile decides (nextSleep): handing it over when the work is due is enough.
      if (state.wakeAt && Date.parse(state.wakeAt) <= Date.now()) notify(e.ref);
      continue;
    }
    if (state.kind === 'waking' || d.spec?.template?.metadata?.labels?.[LABEL_REVISION] !== e.ref.revision) continue;
    const pods = readyPods(ctx, e);
    // Nothing ready (still rolling out, or crashing): not idle, just not serving.
    if (!pods.length) continue;
    const facts = await activityOf(ctx, pods, e.activityToken);
    // A pod ready for less than the window (just woken) has not had its chance: the requests that woke it may still
    // be on their way from the activator, and its own count may predate them.
    const lastActiveMs = Math.max(facts.lastActiveMs, ...pods.map(readySince));
    const verdict = idleVerdict({ now: Date.now(), timeoutMs: e.timeoutMs, ...facts, lastActiveMs });
    if (verdict.sleep) await fallAsleep(ctx, e, facts.work?.nextDueMs ?? null, notify);
  }
}

function readyPods(ctx: RuntimeContext, e: IdleEntry): Obj<V1Pod>[] {
  const want = { ...selectorLabels(e.target, 'server'), [LABEL_REVISION]: e.ref.revision };
  return ctx.pods
    .list()
    .filter(
      (p) =>
        p.metadata.namespace === e.target.namespace &&
        !p.metadata.deletionTimestamp &&
        p.status?.podIP &&
        Object.entries(want).every(([k, v]) => p.metadata.labels?.[k] === v) &&
        p.status.conditions?.some((c) => c.type === 'Ready' && c.status === 'True'),
    );
}

/** When the pod last became ready (ms; 0 when the kubelet did not say). */
function readySince(pod: Obj<V1Pod>): number {
  const at = pod.status?.conditions?.find((c) => c.type === 'Ready')?.lastTransitionTime;
  return at ? new Date(at).getTime() || 0 : 0;
}

type PodActivity = {
  open_requests: number | null;
  last_request_at: string | null;
  active_runs: number | null;
  next_due_at: string | null;
  store_read: boolean;
};

/**
 * What the pods say, added up: requests open on any, the latest request of all, the store's work (shared by the
 * replicas). A pod that does not answer (or refuses the token: one mounted before the Secret changed), or a store
 * it could not read, leaves the work unknown: it stays awake.
 */
async function activityOf(ctx: RuntimeContext, pods: Obj<V1Pod>[], token: string) {
  let open = 0;
  let lastActiveMs = 0;
  let work: { activeRuns: number; nextDueMs: number | null } | undefined = { activeRuns: 0, nextDueMs: null };
  for (const pod of pods) {
    const url = ctx.opts.config.idle.podUrl.replace('{ip}', pod.status!.podIP!).replace('{port}', String(SERVER_PORT));
    try {
      const res = await fetch(`${url}/ok?activity=1`, {
        headers: { authorization: `Bearer ${token}` },
        signal: AbortSignal.timeout(5_000),
      });
      if (!res.ok) throw new Error(`HTTP ${res.status}`);
      const a = ((await res.json()) as { activity?: PodActivity }).activity;
      if (!a || a.open_requests === null || !a.last_request_at) throw new Error('no activity in the answer');
      open += a.open_requests;
      lastActiveMs = Math.max(lastActiveMs, Date.parse(a.last_request_at));
      if (!a.store_read || a.active_runs === null) work = undefined;
      else if (work) {
        const due = a.next_due_at ? Date.parse(a.next_due_at) : null;
        work = {
          activeRuns: Math.max(work.activeRuns, a.active_runs),
          nextDueMs: due === null ? work.nextDueMs : Math.min(due, work.nextDueMs ?? due),
        };
      }
    } catch (err) {
      ctx.log.debug({ pod: pod.metadata.name, reason: (err as Error).message }, 'idle policy: no activity from a pod');
      return { open: 1, lastActiveMs: Date.now(), work: undefined };
    }
  }
  return { open, lastActiveMs, work };
}

/** Records the sleep on the Deployment (a compare-and-swap write) and hands the deployment to the reconcile. */
async function fallAsleep(
  ctx: RuntimeContext,
  e: IdleEntry,
  nextDueMs: number | null,
  notify: (ref: RevisionRef) => void,
): Promise<void> {
  const { namespace } = e.target;
  const name = serverName(e.target);
  const d = await ctx.ops.deployment.read(namespace, name);
  if (sleepStateOf(d.metadata?.annotations).kind !== 'awake') return;
  const since = new Date().toISOString();
  const state: SleepState = {
    kind: 'asleep',
    since,
    ...(nextDueMs === null ? {} : { wakeAt: new Date(nextDueMs).toISOString() }),
  };
  d.metadata = { ...d.metadata, annotations: { ...d.metadata?.annotations, ...sleepAnnotations(state) } };
  try {
    await ctx.ops.deployment.replace(namespace, name, d);
  } catch (err) {
    // Changed meanwhile (a rollout, a scale): the next look decides again.
    if (isStatus(err, 409)) return;
    throw err;
  }
  ctx.log.info(
    { deployment: e.ref.deployment, revision: e.ref.revision, wake_at: state.wakeAt },
    `no requests, runs or due work for ${e.timeoutMs / 60_000} min: the deployment sleeps (traffic to the activator)`,
  );
  await ctx.opts.logs.append(e.ref, 'deploy', [
    `no requests, runs or due crons for ${e.timeoutMs / 60_000} min: scaled to 0 until a request or due work wakes it`,
  ]);
  notify(e.ref);
}

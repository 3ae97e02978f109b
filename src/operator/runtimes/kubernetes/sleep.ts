// Idle deployments in a cluster, the pure part: the sleep state a deployment is in (recorded as annotations on its
// Deployment, so a restarted operator knows it), the state it must move to, and the Service and EndpointSlice that
// send its traffic to the activator while it sleeps. Knative's pattern: the Service keeps its name and cluster IP
// (the Ingress, the users' URLs and other pods' DNS stay), but while the deployment sleeps it has no selector and one
// EndpointSlice of ours that lists the activator's pods; the activator holds each request, asks for a wake (an
// annotation on the AgentDeployment naming the sleep it ends) and forwards once a pod is ready. idle.ts puts
// deployments to sleep; deploy.ts applies what nextSleep decides on every reconcile.
import type { V1EndpointSlice, V1Service } from '@kubernetes/client-node';
import { childMeta, type Target } from './labels.ts';

/** On the Deployment (and the Service) while asleep or waking: when it went to sleep (ISO). */
export const ANNOTATION_SLEEPING_SINCE = 'agentplane.dev/sleeping-since';
/** On the Deployment while asleep: when due work (a cron tick, a scheduled run) wakes it (ISO). */
export const ANNOTATION_WAKE_AT = 'agentplane.dev/wake-at';
/** On the Deployment while waking: since when its pods are starting again (ISO). */
export const ANNOTATION_WAKING = 'agentplane.dev/waking';
/** On the AgentDeployment, written by the activator: the sleeping-since of the sleep a request wants ended. */
export const ANNOTATION_WAKE_REQUESTED = 'agentplane.dev/wake-requested';
/** On the Service while asleep: the Ingress host it is also reached at, for the activator to tell requests apart. */
export const ANNOTATION_HOST = 'agentplane.dev/host';
/** EndpointSlices the EndpointSlice controller leaves alone (the Service has no selector while asleep). */
export const SLICE_MANAGER = 'agentplane-operator';

export type SleepState =
  | { kind: 'awake' }
  /** Replicas 0, traffic to the activator. */
  | { kind: 'asleep'; since: string; wakeAt?: string }
  /** Replicas back, traffic still to the activator until a pod is ready. */
  | { kind: 'waking'; since: string; wakingSince: string };

/** The state recorded on a Deployment's annotations. */
export function sleepStateOf(annotations: Record<string, string> | undefined): SleepState {
  const since = annotations?.[ANNOTATION_SLEEPING_SINCE];
  if (!since) return { kind: 'awake' };
  const waking = annotations[ANNOTATION_WAKING];
  if (waking) return { kind: 'waking', since, wakingSince: waking };
  const wakeAt = annotations[ANNOTATION_WAKE_AT];
  return { kind: 'asleep', since, ...(wakeAt ? { wakeAt } : {}) };
}

/** The annotations that record `state` on the Deployment. */
export function sleepAnnotations(state: SleepState): Record<string, string> {
  if (state.kind === 'awake') return {};
  if (state.kind === 'waking')
    return { [ANNOTATION_SLEEPING_SINCE]: state.since, [ANNOTATION_WAKING]: state.wakingSince };
  return { [ANNOTATION_SLEEPING_SINCE]: state.since, ...(state.wakeAt ? { [ANNOTATION_WAKE_AT]: state.wakeAt } : {}) };
}

export type SleepFacts = {
  now: number;
  state: SleepState;
  /** The idle policy applies (a timeout, min_scale 0, an activator configured, not being deleted). */
  eligible: boolean;
  /** ANNOTATION_WAKE_REQUESTED of the AgentDeployment. */
  wakeRequested?: string;
  /** Ready pods of the Deployment now. */
  readyReplicas: number;
};

/**
 * Where a deployment goes from its recorded state. Only idle.ts puts one to sleep (it asks the pods first); here a
 * sleeping one wakes for a request that names this very sleep (a request for an earlier sleep changes nothing, and
 * no clocks of two pods are compared), for its due work, or because the policy no longer applies; a waking one is
 * awake once a pod is ready, and only then does its Service select the pods again.
 */
export function nextSleep(f: SleepFacts): SleepState {
  const { state } = f;
  if (state.kind === 'asleep') {
    const due = state.wakeAt !== undefined && Date.parse(state.wakeAt) <= f.now;
    if (!f.eligible || f.wakeRequested === state.since || due)
      return { kind: 'waking', since: state.since, wakingSince: new Date(f.now).toISOString() };
    return state;
  }
  if (state.kind === 'waking') return f.readyReplicas > 0 ? { kind: 'awake' } : state;
  return state;
}

/** Replicas the Deployment asks for in `state`: none asleep, else what it would have awake (at least one). */
export function replicasIn(state: SleepState, awake: number): number {
  if (state.kind === 'asleep') return 0;
  return state.kind === 'waking' ? Math.max(1, awake) : awake;
}

export const ACTIVATOR_SLICE_SUFFIX = '-activator';

/**
 * The agent Service while its traffic goes to the activator: the same name, port and cluster IP, no selector (so
 * the EndpointSlice controller makes no slices for it), the sleep and the Ingress host it serves in annotations.
 */
export function makeSleepingService(base: V1Service, since: string, host?: string): V1Service {
  const { selector: _selector, ...spec } = base.spec!;
  return {
    ...base,
    metadata: {
      ...base.metadata,
      annotations: { [ANNOTATION_SLEEPING_SINCE]: since, ...(host ? { [ANNOTATION_HOST]: host } : {}) },
    },
    spec,
  };
}

export type ActivatorEndpoints = { addresses: string[]; port: number; addressType: string };

/** The EndpointSlice that sends the sleeping Service's port to the activator's ready pods. */
export function makeActivatorSlice(target: Target, service: string, to: ActivatorEndpoints): V1EndpointSlice {
  const meta = childMeta(target, `${service}${ACTIVATOR_SLICE_SUFFIX}`, 'server', {
    'kubernetes.io/service-name': service,
    'endpointslice.kubernetes.io/managed-by': SLICE_MANAGER,
  });
  return {
    apiVersion: 'discovery.k8s.io/v1',
    kind: 'EndpointSlice',
    metadata: meta,
    addressType: to.addressType,
    endpoints: [...to.addresses].sort().map((address) => ({ addresses: [address], conditions: { ready: true } })),
    ports: [{ name: 'http', port: to.port, protocol: 'TCP' }],
  };
}

/** The ready endpoints of a Service's EndpointSlices (as the EndpointSlice controller or we wrote them). */
export function readyEndpoints(
  slices: V1EndpointSlice[],
  portName = 'http',
): { addresses: string[]; port: number; addressType: string } | undefined {
  for (const slice of slices) {
    const port = slice.ports?.find((p) => p.name === portName)?.port ?? slice.ports?.[0]?.port;
    const addresses = (slice.endpoints ?? [])
      .filter((e) => e.conditions?.ready !== false && e.conditions?.terminating !== true)
      .flatMap((e) => e.addresses);
    if (port && addresses.length) return { addresses, port, addressType: slice.addressType };
  }
  return undefined;
}

/**
 * Every ready endpoint of a Service's EndpointSlices, each with its slice's port: where a request may go. An endpoint
 * the EndpointSlice controller marks not ready (its pod failing its probe) or terminating is left out.
 */
export function readyTargets(slices: V1EndpointSlice[], portName = 'http'): { address: string; port: number }[] {
  return slices.flatMap((slice) => {
    const port = slice.ports?.find((p) => p.name === portName)?.port ?? slice.ports?.[0]?.port;
    if (!port) return [];
    return (slice.endpoints ?? [])
      .filter((e) => e.conditions?.ready !== false && e.conditions?.terminating !== true)
      .flatMap((e) => e.addresses.slice(0, 1).map((address) => ({ address, port })));
  });
}

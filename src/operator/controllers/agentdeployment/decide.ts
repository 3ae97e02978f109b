// Pure decisions of the deployment controller: which revision should be live, which are superseded, where
// traffic goes.
import { RevisionPhase } from '../../../resources/index.ts';
import type { ServerStatus } from '../../runtimes/types.ts';
import { sleepingMessage } from '../agentrevision/conditions.ts';
import { isDead, isInProgress } from '../agentrevision/decide.ts';

export type RevisionView = { name: string; number: number; status: RevisionPhase };

function newestFirst(revisions: RevisionView[]): RevisionView[] {
  return [...revisions].sort((a, b) => b.number - a.number);
}

/**
 * The revision the deployment should serve: the one asked for by redeploy when it can still run, else the newest
 * unless it failed, else the newest DEPLOYED one (a failed revision never takes traffic from the live one).
 */
export function pickTarget(revisions: RevisionView[], requested?: string): string | undefined {
  const sorted = newestFirst(revisions);
  const asked = requested ? sorted.find((r) => r.name === requested) : undefined;
  if (asked && !isDead(asked.status)) return asked.name;
  const newest = sorted[0];
  if (newest && !isDead(newest.status)) return newest.name;
  return sorted.find((r) => r.status === RevisionPhase.DEPLOYED)?.name;
}

/**
 * Revisions still in progress that will never go live because another one is the target. Only revisions the
 * deployment already counts (number ≤ its revisionCounter) are judged: a newer one was made after this copy of the
 * deployment was read (a cache that lags, or a create between two reads), and the target chosen from that copy may
 * be a redeploy the newer revision replaces. Skipping is final, so it waits for a copy that knows the revision.
 */
export function revisionsToSkip(
  revisions: RevisionView[],
  target: string | undefined,
  revisionCounter = Number.POSITIVE_INFINITY,
): string[] {
  if (!target) return [];
  return revisions
    .filter((r) => r.name !== target && isInProgress(r.status) && r.number <= revisionCounter)
    .map((r) => r.name);
}

/** Move traffic only to a target whose server answers /ok. */
export function shouldRoute(
  target: string | undefined,
  targetServer: ServerStatus | undefined,
  routed: string | undefined,
): boolean {
  return !!target && target !== routed && targetServer?.phase === 'Ready';
}

export type RouteFacts = {
  target: string | undefined;
  targetServer: ServerStatus | undefined;
  /** The revision that served last (status.activeRevisionName), e.g. before a restart. */
  active: string | undefined;
  activeServer: ServerStatus | undefined;
  routed: string | undefined;
};

/**
 * Where traffic should go now, or undefined to leave it. The target once it is ready; meanwhile, when nothing is
 * routed (after a restart), the revision that served before, so a deployment with a newer build in progress
 * keeps answering.
 */
export function chooseRoute(f: RouteFacts): string | undefined {
  if (shouldRoute(f.target, f.targetServer, f.routed)) return f.target;
  if (!f.routed && f.active && f.active !== f.target && f.activeServer?.phase === 'Ready') return f.active;
  return undefined;
}

export type ReadyCondition = { status: 'True' | 'False'; reason: string; message: string };

export function readyCondition(
  routed: string | undefined,
  target: RevisionView | undefined,
  latest: RevisionView | undefined,
  latestMessage: string,
  /** What the runtime says of the target's server (a DEPLOYED target that is not routed: why it does not serve). */
  targetServer?: ServerStatus,
): ReadyCondition {
  if (latest && isDead(latest.status) && latest.status !== RevisionPhase.SKIPPED && routed) {
    return {
      status: 'True',
      reason: 'LatestRevisionFailed',
      message: `Serving ${routed}; ${latest.name} ${latest.status}: ${latestMessage}`,
    };
  }
  // Asleep under the idle policy: it still takes traffic (its first request starts it), and says so.
  if (routed && target?.name === routed && targetServer?.phase === 'Ready' && targetServer.sleeping)
    return {
      status: 'True',
      reason: 'Sleeping',
      message: `Revision ${routed}: ${sleepingMessage(targetServer.sleeping)}`,
    };
  if (routed) return { status: 'True', reason: 'Serving', message: `Serving revision ${routed}.` };
  // A revision that served and now does not (crashed and restarting, its pods OOMKilled, its database away): say
  // why, before what a newer failed revision says (that one never served).
  if (target?.status === RevisionPhase.DEPLOYED) {
    const why =
      targetServer?.phase === 'Failed'
        ? { reason: 'NotServing', message: targetServer.message }
        : targetServer?.phase === 'Starting' && targetServer.trouble
          ? targetServer.trouble
          : { reason: 'NotServing', message: 'its agent server is starting' };
    return { status: 'False', reason: why.reason, message: `Revision ${target.name} is not serving: ${why.message}` };
  }
  if (latest && isDead(latest.status) && latest.status !== RevisionPhase.SKIPPED) {
    return { status: 'False', reason: latest.status, message: `${latest.name}: ${latestMessage}` };
  }
  if (target)
    return { status: 'False', reason: 'Progressing', message: `Waiting for revision ${target.name} to serve.` };
  return { status: 'False', reason: 'NoRevision', message: 'No revision can serve.' };
}

/**
 * The generation the Ready condition speaks for. While an older revision serves and the revision the current spec
 * asks for (spec.targetRevisionName, else the latest) is still on its way, even before it exists, Ready stays True
 * (traffic is served) but for the generation it was last settled at: `kubectl wait --for=condition=Ready` compares
 * a condition's observedGeneration with metadata.generation, and would otherwise return right after an apply,
 * before the new version runs. Settled: the requested revision serves, or nothing does, or the requested revision
 * can no longer come (then Ready says why, for this generation).
 */
export function readyObservedGeneration(
  generation: number | undefined,
  previous: number | undefined,
  routed: string | undefined,
  requested: string,
  requestedView: RevisionView | undefined,
): number | undefined {
  const settled = !routed || routed === requested || (requestedView !== undefined && isDead(requestedView.status));
  if (settled || generation === undefined) return generation;
  return previous !== undefined && previous < generation ? previous : generation - 1;
}

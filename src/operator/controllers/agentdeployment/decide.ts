// Pure decisions of the deployment controller: which revision should be live, which are superseded, where
// traffic goes.
import {
  RevisionPhase,
  type AgentDeploymentSpec,
  type AgentRevisionSpec,
  revisionName,
} from '../../../resources/index.ts';
import type { ServerStatus } from '../../runtimes/types.ts';
import { sleepingMessage } from '../agentrevision/conditions.ts';
import { isDead, isInProgress } from '../agentrevision/decide.ts';
import { eventReason } from '../agentrevision/conditions.ts';
import type { EventInput } from '../../controller-kit/events.ts';

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

export type ConditionState = { status: 'True' | 'False' | 'Unknown'; reason: string; message: string };

/**
 * Serving: does some revision of the deployment take traffic now, and if not, why. What the API reports as the
 * deployment's health; a newer revision failing does not stop the older one serving.
 */
export function servingCondition(
  routed: string | undefined,
  target: RevisionView | undefined,
  latest: RevisionView | undefined,
  latestMessage: string,
  /** What the runtime says of the target's server (a DEPLOYED target that is not routed: why it does not serve). */
  targetServer?: ServerStatus,
): ConditionState {
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

export type DeploymentFacts = {
  routed: string | undefined;
  /** The revision the spec asks for: spec.targetRevisionName (the newest, unless a redeploy chose an older one). */
  requested: string;
  requestedView: RevisionView | undefined;
  requestedMessage: string;
  /** Serving, as servingCondition says it. */
  serving: ConditionState;
  /** Set when the spec changed in a way only a new revision can carry, without one: what was ignored. */
  ignored?: string;
};

export type DeploymentConditions = {
  Ready: ConditionState;
  Progressing: ConditionState;
  Degraded: ConditionState;
};

/**
 * Knative's rule: Ready is True only when the revision the current spec asks for serves. While it is on its way
 * Ready is Unknown (an older revision may serve meanwhile: Serving says so) and Progressing True, so
 * `kubectl wait --for=condition=Ready` after an apply waits for the new version; when it cannot come (its build or
 * rollout failed, or the spec changed without a new revision) Ready is False and Degraded True with the reason.
 */
export function deploymentConditions(f: DeploymentFacts): DeploymentConditions {
  const ok = (reason: string): ConditionState => ({ status: 'False', reason, message: '' });
  const failed = (ready: ConditionState): DeploymentConditions => ({
    Ready: ready,
    Progressing: { ...ready, status: 'False' },
    Degraded: { ...ready, status: 'True' },
  });
  const meanwhile = f.routed && f.routed !== f.requested ? ` Serving ${f.routed} meanwhile.` : '';
  if (f.ignored) return failed({ status: 'False', reason: 'SpecChangeIgnored', message: f.ignored });
  if (f.routed === f.requested) {
    const ready: ConditionState = { status: 'True', reason: 'Serving', message: `Serving revision ${f.routed}.` };
    return { Ready: ready, Progressing: ok('Serving'), Degraded: ok('AsExpected') };
  }
  const view = f.requestedView;
  if (view && isDead(view.status) && view.status !== RevisionPhase.SKIPPED) {
    return failed({ status: 'False', reason: view.status, message: `${view.name}: ${f.requestedMessage}${meanwhile}` });
  }
  // Nothing serves and the revision that should is deployed but its server is in trouble (crash loop, OOMKilled,
  // database away): a failure until it heals, said the way Serving says it.
  if (!f.routed && view?.status === RevisionPhase.DEPLOYED && f.serving.status === 'False') return failed(f.serving);
  const phase = view ? view.status : 'AwaitingRevision';
  return {
    Ready: {
      status: 'Unknown',
      reason: 'Progressing',
      message: `Waiting for revision ${f.requested} to serve.${meanwhile}`,
    },
    Progressing: { status: 'True', reason: phase, message: `Revision ${f.requested} is ${phase}.${meanwhile}` },
    Degraded: ok('AsExpected'),
  };
}

/** What a revision snapshots from its deployment and runs with: changing one of these needs a new revision. */
function runInputs(s: AgentDeploymentSpec | AgentRevisionSpec): Record<string, unknown> {
  const c = s.sourceConfig;
  return {
    source: s.source,
    repoRef: s.sourceRevisionConfig.repoRef,
    graphConfigPath: s.sourceRevisionConfig.graphConfigPath,
    imageUri: s.sourceRevisionConfig.imageUri,
    repoUrl: c.repoUrl,
    integrationId: c.integrationId,
    resourceSpec: c.resourceSpec,
    accessMode: c.accessMode,
    secretsName: s.secretsName,
    secretReferences: s.secretReferences?.length ? s.secretReferences : undefined,
  };
}

/** JSON with null and undefined members dropped and keys sorted: "unset" is spelled three ways across writers. */
function canonical(v: unknown): string {
  const norm = (x: unknown): unknown =>
    Array.isArray(x)
      ? x.map(norm)
      : x && typeof x === 'object'
        ? Object.fromEntries(
            Object.entries(x as Record<string, unknown>)
              .filter(([, y]) => y !== null && y !== undefined)
              .sort(([a], [b]) => a.localeCompare(b))
              .map(([k, y]) => [k, norm(y)]),
          )
        : x;
  const n = norm(v);
  return n === null || n === undefined ? '' : JSON.stringify(n);
}

/**
 * A spec edit that only a new revision could carry, made without raising revisionCounter (a GitOps tool changing
 * imageUri in a manifest): the fields that differ from the newest revision's snapshot, or [] when none do. The
 * operator does not make the revision itself: revisionCounter and targetRevisionName belong to whoever writes the
 * spec (the control plane, or the manifest in git), and a revision the operator numbered would fight both.
 */
export function ignoredSpecChanges(dep: AgentDeploymentSpec, newest: AgentRevisionSpec | undefined): string[] {
  if (!newest || newest.revisionNumber !== dep.revisionCounter) return [];
  const want = runInputs(dep);
  const have = runInputs(newest);
  return Object.keys(want).filter((k) => canonical(want[k]) !== canonical(have[k]));
}

export function ignoredSpecMessage(dep: { name: string; revisionCounter: number }, fields: string[]): string {
  const next = revisionName(dep.name, dep.revisionCounter + 1);
  return (
    `The spec changed (${fields.join(', ')}) but spec.revisionCounter is still ${dep.revisionCounter}, so no revision ` +
    `carries the change and it does not run. Set revisionCounter to ${dep.revisionCounter + 1} and ` +
    `targetRevisionName to ${next} with it (the control plane API does both).`
  );
}

/**
 * The Event a change of the deployment's Ready condition is told by: a Warning with the failure's reason when it
 * turns False, Normal when it serves the requested revision or starts progressing; undefined when Ready says what
 * it said before.
 */
export function readyEvent(
  before: { status: string; reason?: string } | undefined,
  after: { status: string; reason?: string; message?: string },
): EventInput | undefined {
  if (before && before.status === after.status && before.reason === after.reason) return undefined;
  const note = after.message ?? '';
  if (after.status === 'True') return { type: 'Normal', reason: 'Ready', action: 'Route', note };
  if (after.status === 'Unknown') return { type: 'Normal', reason: 'Progressing', action: 'Rollout', note };
  return { type: 'Warning', reason: eventReason(after.reason || 'NotReady'), action: 'Rollout', note };
}

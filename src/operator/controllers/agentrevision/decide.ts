// Pure decisions of the revision controller: where a revision's status goes given what the runtime reports.
import { RevisionPhase, TERMINAL_REVISION_PHASES } from '../../../resources/index.ts';
import type { BuildStatus, ServerStatus } from '../../runtimes/types.ts';

const BUILD_PHASES: ReadonlySet<RevisionPhase> = new Set([
  RevisionPhase.CREATING,
  RevisionPhase.QUEUED,
  RevisionPhase.AWAITING_BUILD,
  RevisionPhase.BUILDING,
]);
const DEPLOY_PHASES: ReadonlySet<RevisionPhase> = new Set([RevisionPhase.AWAITING_DEPLOY, RevisionPhase.DEPLOYING]);
const TERMINAL_FAILED: ReadonlySet<RevisionPhase> = new Set(
  [...TERMINAL_REVISION_PHASES].filter((p) => p !== RevisionPhase.DEPLOYED),
);

export function inBuildPhase(status: RevisionPhase): boolean {
  return BUILD_PHASES.has(status);
}
export function inDeployPhase(status: RevisionPhase): boolean {
  return DEPLOY_PHASES.has(status);
}
/** Terminal and not live: failed, superseded or unknown. */
export function isDead(status: RevisionPhase): boolean {
  return TERMINAL_FAILED.has(status);
}
export function isInProgress(status: RevisionPhase): boolean {
  return inBuildPhase(status) || inDeployPhase(status);
}

export type RevisionFacts = {
  status: RevisionPhase;
  /**
   * Whether the runtime can run this revision's source at all; `nothingYet`: there is nothing to build (an
   * internal_source deployment's first revision, made before its first upload), which skips it instead of failing.
   */
  supported: { ok: true } | { ok: false; message: string; nothingYet?: boolean };
  /** The deployment wants this revision live. */
  isTarget: boolean;
  /** Observed build (asked only in build phases). */
  build?: BuildStatus;
  /** Observed server (asked only for the target once built). */
  server?: ServerStatus;
  /** Traffic goes to this revision now. */
  routed: boolean;
  /** Nothing is routed yet (after a restart) and this revision served last: it is coming back, not replaced. */
  keepServing?: boolean;
};

export type RevisionOutcome = { status: RevisionPhase; message: string; commitSha?: string };

const MESSAGES: Partial<Record<RevisionPhase, string>> = {
  QUEUED: 'Waiting for a build slot.',
  BUILDING: 'Building from source.',
  AWAITING_DEPLOY: 'Build finished; waiting to be deployed.',
  DEPLOYING: 'Starting the agent server.',
  DEPLOYED: 'Serving traffic.',
};

export function defaultMessage(status: RevisionPhase): string {
  return MESSAGES[status] ?? '';
}

/** The next status and its one-line message; `undefined` message means "keep the current one". */
export function nextRevisionStatus(f: RevisionFacts, currentMessage = ''): RevisionOutcome {
  const keep = { status: f.status, message: currentMessage };
  if (isDead(f.status)) return keep;
  if (!f.supported.ok) {
    const status = f.supported.nothingYet ? RevisionPhase.SKIPPED : RevisionPhase.CREATE_FAILED;
    return { status, message: f.supported.message };
  }
  const to = (status: RevisionPhase): RevisionOutcome => ({ status, message: defaultMessage(status) });
  if (inBuildPhase(f.status)) {
    if (!f.build || f.build.phase === 'Running') return to(RevisionPhase.BUILDING);
    if (f.build.phase === 'Failed') return { status: RevisionPhase.BUILD_FAILED, message: f.build.message };
    return { ...to(RevisionPhase.AWAITING_DEPLOY), commitSha: f.build.commitSha };
  }
  if (inDeployPhase(f.status)) {
    if (!f.isTarget || !f.server) return keep;
    if (f.server.phase === 'Failed') return { status: RevisionPhase.DEPLOY_FAILED, message: f.server.message };
    if (f.server.phase === 'Ready' && f.routed) return to(RevisionPhase.DEPLOYED);
    return to(RevisionPhase.DEPLOYING);
  }
  // DEPLOYED stays DEPLOYED: it can be routed to again (redeploy). Its message says whether traffic goes to it.
  if (f.status === RevisionPhase.DEPLOYED) {
    if (f.routed) return to(RevisionPhase.DEPLOYED);
    if (!f.isTarget && !f.keepServing) return { status: RevisionPhase.DEPLOYED, message: NOT_SERVING };
  }
  return keep;
}

/** A DEPLOYED revision another one took over from. */
export const NOT_SERVING = 'Not serving: traffic goes to another revision (redeploy this one to serve it again).';

/**
 * What to ask the runtime for. `keepServing`: the revision served last and nothing is routed now (after a
 * restart), so it comes back up even while a newer target is still building.
 */
export function revisionNeeds(
  status: RevisionPhase,
  isTarget: boolean,
  routed: boolean,
  keepServing = false,
): { build: boolean; serve: boolean; stop: boolean } {
  const build = inBuildPhase(status);
  const serve =
    (isTarget && (inDeployPhase(status) || status === RevisionPhase.DEPLOYED)) ||
    (keepServing && status === RevisionPhase.DEPLOYED);
  const stop = !serve && !routed && !build;
  return { build, serve, stop };
}

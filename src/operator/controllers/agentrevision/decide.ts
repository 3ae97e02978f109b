// Pure decisions of the revision controller: where a revision's status goes given what the runtime reports.
import type { BuildStatus, ServerStatus } from '../../runtimes/types.ts';

export const BUILD_PHASES = ['CREATING', 'QUEUED', 'AWAITING_BUILD', 'BUILDING'] as const;
export const DEPLOY_PHASES = ['AWAITING_DEPLOY', 'DEPLOYING'] as const;
export const TERMINAL_FAILED = [
  'CREATE_FAILED',
  'BUILD_FAILED',
  'DEPLOY_FAILED',
  'SKIPPED',
  'INTERRUPTED',
  'UNKNOWN',
] as const;

export function inBuildPhase(status: string): boolean {
  return (BUILD_PHASES as readonly string[]).includes(status);
}
export function inDeployPhase(status: string): boolean {
  return (DEPLOY_PHASES as readonly string[]).includes(status);
}
/** Terminal and not live: failed, superseded or unknown. */
export function isDead(status: string): boolean {
  return (TERMINAL_FAILED as readonly string[]).includes(status);
}
export function isInProgress(status: string): boolean {
  return inBuildPhase(status) || inDeployPhase(status);
}

export type RevisionFacts = {
  status: string;
  /** Whether the runtime can run this revision's source at all. */
  supported: { ok: true } | { ok: false; message: string };
  /** The deployment wants this revision live. */
  isTarget: boolean;
  /** Observed build (asked only in build phases). */
  build?: BuildStatus;
  /** Observed server (asked only for the target once built). */
  server?: ServerStatus;
  /** Traffic goes to this revision now. */
  routed: boolean;
};

export type RevisionOutcome = { status: string; message: string; commitSha?: string };

const MESSAGES: Record<string, string> = {
  QUEUED: 'Waiting for a build slot.',
  BUILDING: 'Building from source.',
  AWAITING_DEPLOY: 'Build finished; waiting to be deployed.',
  DEPLOYING: 'Starting the agent server.',
  DEPLOYED: 'Serving traffic.',
};

export function defaultMessage(status: string): string {
  return MESSAGES[status] ?? '';
}

/** The next status and its one-line message; `undefined` message means "keep the current one". */
export function nextRevisionStatus(f: RevisionFacts, currentMessage = ''): RevisionOutcome {
  const keep = { status: f.status, message: currentMessage };
  if (isDead(f.status)) return keep;
  if (!f.supported.ok) return { status: 'CREATE_FAILED', message: f.supported.message };
  if (inBuildPhase(f.status)) {
    if (!f.build || f.build.phase === 'Running') return { status: 'BUILDING', message: defaultMessage('BUILDING') };
    if (f.build.phase === 'Failed') return { status: 'BUILD_FAILED', message: f.build.message };
    return { status: 'AWAITING_DEPLOY', message: defaultMessage('AWAITING_DEPLOY'), commitSha: f.build.commitSha };
  }
  if (inDeployPhase(f.status)) {
    if (!f.isTarget || !f.server) return keep;
    if (f.server.phase === 'Failed') return { status: 'DEPLOY_FAILED', message: f.server.message };
    if (f.server.phase === 'Ready' && f.routed) return { status: 'DEPLOYED', message: defaultMessage('DEPLOYED') };
    return { status: 'DEPLOYING', message: defaultMessage('DEPLOYING') };
  }
  return keep; // DEPLOYED stays DEPLOYED: it can be routed to again (redeploy)
}

/**
 * What to ask the runtime for. `keepServing`: the revision served last and nothing is routed now (after a
 * restart), so it comes back up even while a newer target is still building.
 */
export function revisionNeeds(
  status: string,
  isTarget: boolean,
  routed: boolean,
  keepServing = false,
): { build: boolean; serve: boolean; stop: boolean } {
  const build = inBuildPhase(status);
  const serve =
    (isTarget && (inDeployPhase(status) || status === 'DEPLOYED')) || (keepServing && status === 'DEPLOYED');
  const stop = !serve && !routed && !build;
  return { build, serve, stop };
}

// What a person asks of a deployment first, in one read-only summary: does it serve, and which revision; is a
// newer one on its way; did the last change fail, and why. Derived from the revisions and the deployment's Ready
// condition on every read (nothing stored), in the spirit of a Knative Ready condition or a Vercel/Render status.
import { redactUrlsIn } from '../../../lib/redact.ts';
import {
  RevisionPhase,
  TERMINAL_REVISION_PHASES,
  type AgentDeployment,
  type AgentRevision,
} from '../../../resources/index.ts';
import type { Deployment, StatusSummary } from '../../../api/schemas/deployment-views.ts';

type SummaryState = StatusSummary['state'];

const phaseOf = (r: AgentRevision | undefined) => r?.status?.phase ?? RevisionPhase.CREATING;
const inProgress = (r: AgentRevision) => !TERMINAL_REVISION_PHASES.has(phaseOf(r));
/** Ended without running: failed builds and deploys, interruptions, and states nobody can explain. */
const failedPhase = (phase: RevisionPhase) =>
  TERMINAL_REVISION_PHASES.has(phase) && phase !== RevisionPhase.DEPLOYED && phase !== RevisionPhase.SKIPPED;
const messageOf = (r: AgentRevision) => (r.status?.statusMessage ? redactUrlsIn(r.status.statusMessage) : null);

export function summarizeStatus(
  dep: AgentDeployment,
  revs: { latest?: AgentRevision; active?: AgentRevision; target?: AgentRevision },
  health: Deployment['health'],
): StatusSummary {
  const { latest, active, target } = revs;
  // The active revision is the one the runtime routes to; it serves unless the Ready condition says it does not.
  const serving = active && phaseOf(active) === RevisionPhase.DEPLOYED && health.ready !== false ? active : undefined;
  // The revision the deployment asked for last: the newest one, or an older one chosen by a redeploy.
  const wanted = target ?? latest;
  const base = {
    serving_revision_id: serving?.metadata.uid ?? null,
    serving_revision_number: serving?.spec.revisionNumber ?? null,
    target_revision_id: wanted?.metadata.uid ?? null,
    target_revision_number: wanted?.spec.revisionNumber ?? null,
    latest_revision_id: latest?.metadata.uid ?? null,
    latest_revision_number: latest?.spec.revisionNumber ?? null,
  };
  const say = (state: SummaryState, reason: string | null, message: string | null): StatusSummary => ({
    state,
    ...base,
    reason,
    message,
  });

  if (dep.metadata.deletionTimestamp) {
    return say('deleting', 'Deleting', 'The deployment is being deleted: its agent server stops, its data goes.');
  }
  if (!wanted) return say('building', 'NoRevision', 'Its first revision is being made.');
  const phase = phaseOf(wanted);
  const n = wanted.spec.revisionNumber;
  if (inProgress(wanted)) {
    return say('building', phase, messageOf(wanted) ?? `Revision ${n} is on its way (${phase}).`);
  }
  if (failedPhase(phase)) return say('failed', phase, messageOf(wanted) ?? `Revision ${n} ended ${phase}.`);
  if (phase === RevisionPhase.DEPLOYED) {
    if (serving && serving.metadata.uid === wanted.metadata.uid) {
      // Asleep under the idle policy: it serves (the first request starts it), and says why it holds no process.
      if (health.reason === 'Sleeping') return say('serving', 'Sleeping', health.message);
      return say('serving', 'Serving', null);
    }
    if (health.ready === false) return say('failed', health.reason ?? 'NotServing', health.message);
    return say('building', 'Starting', `Revision ${n} is built; traffic moves to it once its agent server answers.`);
  }
  // SKIPPED: superseded before it went live; what serves is the answer.
  if (serving) return say('serving', 'Serving', null);
  return say('building', phase, messageOf(wanted));
}

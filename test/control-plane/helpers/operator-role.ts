// The test plays the operator: it writes the statuses the runtime would (revision phases, the revision that serves,
// the deployment's Ready condition) straight into the real store, so API and console tests reach every state at once.
import type { PlatformState } from '../../../src/state/types.ts';
import { deploymentName, revisionName, type RevisionPhase } from '../../../src/resources/index.ts';

const NS = 'default';

export async function setRevision(
  store: PlatformState,
  depId: string,
  n: number,
  phase: RevisionPhase,
  statusMessage?: string,
): Promise<void> {
  const rev = await store.get('AgentRevision', NS, revisionName(deploymentName(depId), n));
  await store.updateStatus('AgentRevision', {
    ...rev,
    status: { ...rev.status, phase, ...(statusMessage ? { statusMessage } : {}) },
  });
}

/** Routes traffic to revision n (which must be DEPLOYED) and says whether it answers (Ready). */
export async function serve(
  store: PlatformState,
  depId: string,
  n: number,
  ready: { status: 'True' | 'False'; reason: string; message?: string } = { status: 'True', reason: 'Serving' },
): Promise<void> {
  const dep = await store.get('AgentDeployment', NS, deploymentName(depId));
  await store.updateStatus('AgentDeployment', {
    ...dep,
    status: {
      ...dep.status,
      phase: 'READY',
      activeRevisionName: revisionName(dep.metadata.name, n),
      url: `http://127.0.0.1:1/${depId}`,
      conditions: [{ type: 'Ready', lastTransitionTime: new Date().toISOString(), ...ready }],
    },
  });
}

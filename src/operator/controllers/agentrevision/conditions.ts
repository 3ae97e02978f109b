// A revision's conditions follow from its phase alone: Built, Deployed and Ready.
import type { ConditionInput } from '../../../resources/index.ts';
import { inBuildPhase } from './decide.ts';

export function revisionConditions(phase: string, message: string, generation: number | undefined): ConditionInput[] {
  const c = (type: string, status: 'True' | 'False' | 'Unknown', reason: string, msg = ''): ConditionInput => ({
    type,
    status,
    reason,
    message: msg,
    observedGeneration: generation,
  });
  const built = inBuildPhase(phase)
    ? c('Built', 'Unknown', 'Building', message)
    : phase === 'BUILD_FAILED' || phase === 'CREATE_FAILED'
      ? c('Built', 'False', phase, message)
      : phase === 'SKIPPED'
        ? c('Built', 'False', 'Skipped', message)
        : c('Built', 'True', 'Built');
  const deployed =
    phase === 'DEPLOYED'
      ? c('Deployed', 'True', 'Deployed')
      : phase === 'AWAITING_DEPLOY' || phase === 'DEPLOYING' || inBuildPhase(phase)
        ? c('Deployed', 'Unknown', phase, message)
        : c('Deployed', 'False', phase, message);
  const ready = phase === 'DEPLOYED' ? c('Ready', 'True', 'Deployed') : c('Ready', 'False', phase, message);
  return [built, deployed, ready];
}

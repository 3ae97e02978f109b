// A revision's conditions: Built and Deployed follow from its phase; Ready too, except that a DEPLOYED revision
// that should serve says whether its agent server really does (`serving`, from the runtime).
import { RevisionPhase, type ConditionInput } from '../../../resources/index.ts';
import type { EventInput } from '../../controller-kit/events.ts';
import type { ServerStatus, SleepInfo } from '../../runtimes/types.ts';
import { inBuildPhase, inDeployPhase } from './decide.ts';

/** Ready of a DEPLOYED revision whose server the runtime was asked about: True only while it answers. */
export function servingCondition(server: ServerStatus): { status: 'True' | 'False'; reason: string; message: string } {
  if (server.phase === 'Ready' && server.sleeping)
    return { status: 'True', reason: 'Sleeping', message: sleepingMessage(server.sleeping) };
  if (server.phase === 'Ready') return { status: 'True', reason: 'Deployed', message: '' };
  if (server.phase === 'Failed') return { status: 'False', reason: 'NotServing', message: server.message };
  if (server.trouble) return { status: 'False', reason: server.trouble.reason, message: server.trouble.message };
  return { status: 'False', reason: 'Starting', message: 'The agent server is starting.' };
}

/** What a sleeping server's conditions say: it is stopped, what wakes it. */
export function sleepingMessage(sleeping: SleepInfo): string {
  const due = sleeping.wakeAt ? `; due work (a cron or a scheduled run) wakes it at ${sleeping.wakeAt}` : '';
  return `Idle: the agent server is stopped; the first request starts it${due}.`;
}

/**
 * Sleeping: True while the idle policy has the server stopped, False while it runs; only for a revision the runtime
 * was asked about (one that should serve).
 */
export function sleepingCondition(
  serving: ServerStatus | undefined,
  generation: number | undefined,
): ConditionInput | undefined {
  if (!serving) return undefined;
  const asleep = serving.phase === 'Ready' && serving.sleeping;
  return asleep
    ? {
        type: 'Sleeping',
        status: 'True',
        reason: 'Idle',
        message: sleepingMessage(asleep),
        observedGeneration: generation,
      }
    : { type: 'Sleeping', status: 'False', reason: 'Awake', message: '', observedGeneration: generation };
}

export function revisionConditions(
  phase: RevisionPhase,
  message: string,
  generation: number | undefined,
  serving?: ServerStatus,
): ConditionInput[] {
  const c = (type: string, status: 'True' | 'False' | 'Unknown', reason: string, msg = ''): ConditionInput => ({
    type,
    status,
    reason,
    message: msg,
    observedGeneration: generation,
  });
  const built = inBuildPhase(phase)
    ? c('Built', 'Unknown', 'Building', message)
    : phase === RevisionPhase.BUILD_FAILED || phase === RevisionPhase.CREATE_FAILED
      ? c('Built', 'False', phase, message)
      : phase === RevisionPhase.SKIPPED
        ? c('Built', 'False', 'Skipped', message)
        : c('Built', 'True', 'Built');
  const deployed =
    phase === RevisionPhase.DEPLOYED
      ? c('Deployed', 'True', 'Deployed')
      : inDeployPhase(phase) || inBuildPhase(phase)
        ? c('Deployed', 'Unknown', phase, message)
        : c('Deployed', 'False', phase, message);
  const live = phase === RevisionPhase.DEPLOYED && serving ? servingCondition(serving) : undefined;
  const ready = live
    ? c('Ready', live.status, live.reason, live.message)
    : phase === RevisionPhase.DEPLOYED
      ? c('Ready', 'True', 'Deployed')
      : c('Ready', 'False', phase, message);
  const sleeping = phase === RevisionPhase.DEPLOYED ? sleepingCondition(serving, generation) : undefined;
  return [built, deployed, ready, ...(sleeping ? [sleeping] : [])];
}

/** BUILD_FAILED -> BuildFailed: an Event reason in the API's UpperCamelCase. */
export function eventReason(s: string): string {
  return s
    .toLowerCase()
    .split(/[^a-z0-9]+/)
    .filter(Boolean)
    .map((w) => w[0]!.toUpperCase() + w.slice(1))
    .join('');
}

/** The Event a revision's move to `phase` is told by (failures as Warnings), or undefined when nothing moved. */
export function phaseEvent(from: RevisionPhase, to: RevisionPhase, message: string): EventInput | undefined {
  if (from === to) return undefined;
  const failed =
    to !== RevisionPhase.SKIPPED && to !== RevisionPhase.DEPLOYED && !inBuildPhase(to) && !inDeployPhase(to);
  return {
    type: failed ? 'Warning' : 'Normal',
    reason: eventReason(to),
    action: inBuildPhase(to) || to === RevisionPhase.BUILD_FAILED ? 'Build' : 'Deploy',
    note: message || `${from} -> ${to}`,
  };
}

// Small pieces both adapters share, so their behaviour cannot drift apart.
import type { RunOutcome, ThreadStatus } from './types.ts';

/** ISO 8601 with an explicit UTC offset, as the platform's records show them. */
export function isoNow(ms = Date.now()): string {
  return new Date(ms).toISOString().replace('Z', '+00:00');
}

/** Thread status after a run ends (reference: error > interrupted > busy when more runs wait > idle). */
export function threadStatusAfter(outcome: RunOutcome, morePending: boolean): ThreadStatus {
  if (outcome.status === 'error' || outcome.status === 'timeout') return 'error';
  if (outcome.interrupted) return 'interrupted';
  return morePending ? 'busy' : 'idle';
}

export const BUSY_THREAD_DETAIL =
  'Thread is already running a task. Wait for it to finish or choose a different multitask strategy.';

export const ASSISTANT_SORT = new Set(['assistant_id', 'graph_id', 'name', 'created_at', 'updated_at']);
export const THREAD_SORT = new Set(['thread_id', 'status', 'created_at', 'updated_at']);

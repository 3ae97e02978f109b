// When an idle agent server may go to sleep, and when a sleeping one must wake for work its store holds: pure
// decisions over what was counted of its traffic and what the agent's store says. Shared by both runtimes: on one
// machine the proxy counts and local/idle.ts reads the store; in a cluster the server says both
// (GET /ok?activity=1) and kubernetes/idle.ts asks it.
import type { PendingWork } from '../../agent-server/storage/pending-work.ts';

export type IdleFacts = {
  now: number;
  /** The deployment's idle window (ms); 0: it never sleeps. */
  timeoutMs: number;
  /** When the server last took or finished a request, or became ready. */
  lastActiveMs: number;
  /** Requests, event streams and WebSockets open through the proxy now. */
  open: number;
  /** What its store holds (undefined: not read yet, or it could not be read). */
  work?: PendingWork;
};

export type IdleVerdict =
  { sleep: false; why: 'never' | 'traffic' | 'recent' | 'unknown' | 'runs' | 'due' } | { sleep: true };

/**
 * Sleep only when nothing says otherwise: no open request or stream, none for the whole window, no run executing or
 * queued, and nothing due within the window (waking right away again would cost more than it saves). A store that
 * could not be read keeps it awake: what it holds is unknown.
 */
export function idleVerdict(f: IdleFacts): IdleVerdict {
  if (f.timeoutMs <= 0) return { sleep: false, why: 'never' };
  if (f.open > 0) return { sleep: false, why: 'traffic' };
  if (f.now - f.lastActiveMs < f.timeoutMs) return { sleep: false, why: 'recent' };
  if (!f.work) return { sleep: false, why: 'unknown' };
  if (f.work.activeRuns > 0) return { sleep: false, why: 'runs' };
  if (f.work.nextDueMs !== null && f.work.nextDueMs - f.now < f.timeoutMs) return { sleep: false, why: 'due' };
  return { sleep: true };
}

/**
 * When a server that has just stopped must start again, from what its store holds now that nothing changes it: at
 * once for runs that came in while it stopped (or a store that cannot be read: what it holds is unknown), at the
 * first due time otherwise, never when nothing is waiting.
 */
export function wakeAt(now: number, work: PendingWork | undefined): number | undefined {
  if (!work || work.activeRuns > 0) return now;
  return work.nextDueMs === null ? undefined : Math.max(now, work.nextDueMs);
}

// What a thread's stream (GET /threads/{id}/stream, client.threads.joinStream) carries besides its runs' own
// events, and which of them each thread stream mode keeps (the platform's ThreadStreamMode):
// - "run_modes" (the default): every event of every run of the thread, plus a `metadata` event
//   {"status": "run_done", "run_id"} when a run ends;
// - "lifecycle": only the runs' starts (their `metadata` event {run_id, attempt}) and ends (run_done);
// - "state_update": only `state_update` events, each the thread's state as GET /threads/{id}/state returns it,
//   sent when a state update (POST /threads/{id}/state) or a run changed it.
// Run streams (runs.stream / runs.joinStream) carry neither run_done nor state_update, as on the platform.
import { stringify } from '../serde.ts';
import type { StoredStreamEvent, StreamEventStore } from '../storage/types.ts';
import { eventFilter } from './follow.ts';

export const THREAD_STREAM_MODES = ['run_modes', 'lifecycle', 'state_update'] as const;

const RUN_DONE_PREFIX = '{"status":"run_done"';

/** The event that ends a run's part of its thread's stream (appended by the process that executed it). */
export function runDoneEvent(runId: string): [event: string, data: string] {
  return ['metadata', `${RUN_DONE_PREFIX},"run_id":${JSON.stringify(runId)}}`];
}

export const isRunDone = (e: StoredStreamEvent): boolean =>
  e.event === 'metadata' && e.data.startsWith(RUN_DONE_PREFIX);

/** Events of the thread's stream that never reach a run's own stream. */
export const isThreadOnly = (e: StoredStreamEvent): boolean => e.event === 'state_update' || isRunDone(e);

/**
 * Stores a state_update event on the thread's stream (not part of any run: it gets a run id of its own, so run
 * streams never read it). Resolves once it is readable everywhere (or its write failed).
 */
export async function publishStateUpdate(
  streams: StreamEventStore,
  threadId: string,
  state: unknown,
  eventRunId: string,
): Promise<void> {
  streams.append(eventRunId, threadId, 'state_update', stringify(state));
  // A failed write is logged by the store; the state update itself stands.
  await streams.flush().catch(() => undefined);
}

/**
 * Which stored events a thread stream with these modes sends. Run stream modes (values, updates, ...) may be
 * given too: they keep those events of the runs (and metadata, error, feedback), as on a run's stream.
 */
export function threadEventFilter(modes: string[] | undefined): {
  keep: (e: StoredStreamEvent) => boolean;
  stateUpdates: boolean;
} {
  const asked = modes?.length ? modes : ['run_modes'];
  const thread = new Set<string>(THREAD_STREAM_MODES);
  const runModes = asked.filter((m) => !thread.has(m));
  const all = asked.includes('run_modes');
  const lifecycle = asked.includes('lifecycle');
  const stateUpdates = asked.includes('state_update');
  const byMode = runModes.length ? eventFilter(runModes) : null;
  return {
    stateUpdates,
    keep: (e) => {
      if (e.event === 'state_update') return stateUpdates;
      if (all) return true;
      // A run's start and its end are its only metadata events.
      if (lifecycle && e.event === 'metadata') return true;
      return !!byMode?.(e.event);
    },
  };
}

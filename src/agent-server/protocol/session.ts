// A thread's protocol session as a subscriber sees it: the thread's durable event log from the start of its current
// run (the oldest run still pending or running, else the latest), mapped to protocol events and filtered by the
// subscriber's channels / namespaces / depth / since. Nothing is kept per thread between requests, so any replica
// serves any session, and a client re-attaching (a rotated SSE stream, a WebSocket reconnect, a remounted page)
// gets the same events under the same ids. A subscriber holds one page of the log and the mapper's few sets.
import { matchesSubscription } from '@langchain/langgraph/stream';
import { NotFoundError } from '../../lib/errors.ts';
import { namedInterruptIds } from '../runs/state.ts';
import { followStream } from '../streams/follow.ts';
import type { RunEngine } from '../runs/engine.ts';
import { TERMINAL_RUN_STATUSES, type RunRecord, type RunStore, type StreamEventStore } from '../storage/types.ts';
import { ProtocolMapper, type ProtocolEvent, type RunFacts } from './events.ts';

/** What a session reads: the event log and the thread's runs (the agent service gives both). */
export interface SessionSource {
  streams: StreamEventStore;
  runs: Pick<RunStore, 'get' | 'list'>;
}

export interface EventFilter {
  channels: string[];
  namespaces?: string[][];
  depth?: number;
  since?: number;
}

/** How far back in the log the thread's session starts (events with a greater id belong to it). */
export async function sessionStart(source: SessionSource, threadId: string): Promise<number> {
  // Read first: a run with no events yet writes only ids above it.
  const last = await source.streams.lastId();
  const runs = await source.runs.list(threadId, { limit: 20, offset: 0 });
  if (!runs.length) return last;
  const current = [...runs].reverse().find((r) => !TERMINAL_RUN_STATUSES.has(r.status)) ?? runs[0]!;
  return (await runStart(source, current.run_id)) ?? last;
}

/** The stored id just before a run's first event (where a replay of the run starts); null: it has none yet. */
export async function runStart(source: SessionSource, runId: string): Promise<number | null> {
  const first = await source.streams.read(runId, -1, 1, true);
  return first.length ? first[0]!.id - 1 : null;
}

/** What the mapper knows of a run: its graph, status, error, the interrupts it answers and a refusal. */
export const runFactsOf = (run: RunRecord | null): RunFacts | null => {
  if (!run) return null;
  const configurable = (run.kwargs.config as { configurable?: { graph_id?: unknown } } | undefined)?.configurable;
  const err = run.error as {
    message?: unknown;
    reason?: unknown;
    interrupt_ids?: string[];
    pending_ids?: string[];
  } | null;
  const command = run.kwargs.command as { resume?: unknown } | null | undefined;
  const answers = command ? namedInterruptIds(command.resume) : null;
  return {
    graphName: typeof configurable?.graph_id === 'string' ? configurable.graph_id : run.assistant_id,
    status: run.status,
    ...(answers ? { answers } : {}),
    ...(typeof err?.message === 'string' ? { error: err.message } : {}),
    ...(typeof err?.reason === 'string'
      ? {
          refusal: {
            reason: err.reason,
            interrupt_ids: err.interrupt_ids ?? [],
            pending_ids: err.pending_ids ?? [],
          },
        }
      : {}),
  };
};

/** What the mapper reads of runs: a run when it starts, and once it has ended (waiting for that). */
export function runFacts(source: SessionSource, engine: RunEngine, threadId: string, signal: AbortSignal) {
  return {
    started: async (runId: string) => runFactsOf(await source.runs.get(threadId, runId)),
    ended: async (runId: string) => runFactsOf(await engine.waitForRun(threadId, runId, signal)),
  };
}

/** The session's events matching `filter`, page by page, live, until `signal` aborts. */
export async function* followSession(
  source: SessionSource,
  engine: RunEngine,
  threadId: string,
  filter: EventFilter,
  signal: AbortSignal,
  /**
   * Custom auth: whether the caller may see the thread. Asked before the first events go out (a session may be
   * opened on a thread id that exists only later, made by someone else); false ends it with NotFoundError.
   */
  visible?: () => Promise<boolean>,
  /** Read from this stored id on when it is before the session's start (a reconnect to an earlier run's events). */
  from?: number,
): AsyncGenerator<ProtocolEvent[]> {
  let allowed = !visible;
  const mapper = new ProtocolMapper(runFacts(source, engine, threadId, signal));
  const afterId = Math.min(await sessionStart(source, threadId), from ?? Infinity);
  for await (const page of followStream({
    streams: source.streams,
    key: { thread_id: threadId },
    afterId,
    ended: new Promise(() => undefined),
    signal,
  })) {
    const out: ProtocolEvent[] = [];
    for (const e of page) {
      for (const pe of await mapper.map(e)) if (matchesSubscription(pe as never, filter as never)) out.push(pe);
    }
    if (out.length && !allowed) {
      if (!(await visible!())) throw new NotFoundError(`Thread not found: ${threadId}`);
      allowed = true;
    }
    yield out;
  }
}

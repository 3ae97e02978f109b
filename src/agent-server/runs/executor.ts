// Executes one run's graph: stream it, relay its events, and tell the outcome. The engine keeps the bookkeeping
// (claims, leases, timeouts, cancels, finish); an executor only runs graphs. Two kinds:
// - InlineExecutor runs graphs on the engine's own thread;
// - ThreadExecutor runs them on worker threads (executor-worker.ts), each with its own checkpointer connection,
//   so graph execution uses another core than HTTP and storage.
import { Command, Send } from '@langchain/langgraph';
import type { GraphRegistry, StateSnapshotLike } from '../graphs/index.ts';
import type { Json, RunOutcome, RunRecord } from '../storage/types.ts';
import { serializeError, stringify, toPlain } from '../serde.ts';
import type { RunCheckpointer } from './checkpointer.ts';
import { interruptsOf, namedInterruptIds } from './state.ts';
import { planStream, StreamTranslator } from '../streams/stream-modes.ts';
import { PROTOCOL_GRAPH_MODES, protocolEventName } from '../streams/run-events.ts';
import { ProtocolMessagesRecorder } from './protocol-messages.ts';

export interface ExecRequest {
  run: RunRecord;
  graphId: string;
  config: Json;
}

/** The graph's own result: an outcome, or the error it raised (with the thread's latest values). */
export type ExecResult =
  | { ok: true; outcome: RunOutcome }
  | { ok: false; error: { name: string; message: string; code?: string; stack?: string }; values?: Json };

export interface RunExecutor {
  /** Runs the graph until it ends or `signal` aborts; events go to onEvent as (event name, JSON text of the data). */
  execute(req: ExecRequest, onEvent: (event: string, json: string) => void, signal: AbortSignal): Promise<ExecResult>;
  /** Rollback: from now on drop this run's checkpoint writes. */
  discard(runId: string): void;
  /** Resolves once the run's checkpoint writes already started have landed. */
  settle(runId: string): Promise<void>;
  forget(runId: string): void;
  close(): Promise<void>;
}

interface RunKwargs {
  stream_mode?: string[];
  subgraphs?: boolean;
  input?: unknown;
  command?: { resume?: unknown; update?: unknown; goto?: unknown } | null;
  interrupt_before?: string[] | '*' | null;
  interrupt_after?: string[] | '*' | null;
  durability?: 'sync' | 'async' | 'exit';
  /** Started over the thread protocol (protocol/): its events are LangGraph's protocol-native (v3) stream. */
  protocol?: boolean;
  /** A resume naming an interrupt no longer waiting fails instead of being ignored (SDK strictResume). */
  strict_resume?: boolean;
}

export class InlineExecutor implements RunExecutor {
  /**
   * `store` (a BaseStore) is attached to every graph when given, so `config.store` / `getStore()` reach it; without
   * one, getStore() inside a node answers undefined.
   */
  constructor(
    private readonly graphs: GraphRegistry,
    private readonly checkpoints: RunCheckpointer,
    private readonly store?: unknown,
  ) {}

  private attachments() {
    return { checkpointer: this.checkpoints.saver, ...(this.store !== undefined ? { store: this.store } : {}) };
  }

  async execute(
    req: ExecRequest,
    onEvent: (event: string, json: string) => void,
    signal: AbortSignal,
  ): Promise<ExecResult> {
    const { run, graphId, config } = req;
    const kw = run.kwargs as RunKwargs;
    try {
      if (signal.aborted) throw signal.reason;
      const graph = await this.graphs.getGraph(graphId, config, this.attachments());
      if (kw.strict_resume && kw.command?.resume !== undefined) {
        const snapshot = await graph.getState({ configurable: { thread_id: run.thread_id, checkpoint_ns: '' } });
        const refused = strictResumeRefusal(kw.command.resume, snapshot);
        if (refused) return { ok: true, outcome: refused };
      }
      const input = kw.command ? toCommand(kw.command) : (kw.input ?? null);
      const plan = planStream(kw.stream_mode, kw.subgraphs);
      const options = {
        ...config,
        signal,
        streamMode: plan.graphModes,
        subgraphs: plan.subgraphs,
        ...(kw.interrupt_before ? { interruptBefore: kw.interrupt_before } : {}),
        ...(kw.interrupt_after ? { interruptAfter: kw.interrupt_after } : {}),
        ...(kw.durability ? { durability: kw.durability } : {}),
      };
      // The last root "values" chunk is the final state; an "__interrupt__" chunk means the run paused.
      let last: unknown;
      let lastJson: string | undefined;
      let paused = false;
      const translate = new StreamTranslator(plan, onEvent, (data, json) => {
        if (data && typeof data === 'object' && '__interrupt__' in data) paused = true;
        else {
          last = data;
          lastJson = json;
        }
      });
      if (kw.protocol) {
        // Content-block message events come only from LangGraph's v3 stream; every chunk is stored as it comes.
        const v3 = { ...options, streamMode: PROTOCOL_GRAPH_MODES, subgraphs: true, version: 'v3' };
        for await (const chunk of await graph.stream(input, v3 as never)) {
          const [ns, mode, data] = chunk as [string[], string, unknown];
          const json = stringify(data);
          if (mode === 'values' && !ns.length) {
            if (data && typeof data === 'object' && '__interrupt__' in data) paused = true;
            else {
              last = data;
              lastJson = json;
            }
          }
          onEvent(protocolEventName(mode, ns), json);
        }
      } else {
        // The run API's modes, plus the token stream as protocol message events for the thread's protocol clients
        // (protocol-messages.ts), stored apart from what the run-centric streams send. Only when the run's modes make
        // its models stream (messages, messages-tuple, events): a values-only run has no tokens to relay (its
        // messages reach protocol clients in its values), and the recorder's callbacks cost such a run ~20 % more
        // CPU (bench/ab-cycle.ts).
        const streamsTokens = plan.useEvents || plan.graphModes.includes('messages');
        const recorder = streamsTokens
          ? new ProtocolMessagesRecorder((ns, payload) =>
              onEvent(protocolEventName('messages', ns), stringify(payload)),
            )
          : undefined;
        const given = (options as { callbacks?: unknown }).callbacks;
        const withDeltas = recorder
          ? { ...options, callbacks: [...(Array.isArray(given) ? given : []), recorder] }
          : options;
        if (plan.useEvents && graph.streamEvents) {
          for await (const e of graph.streamEvents(input, { ...withDeltas, version: 'v2' } as never))
            translate.event(e as never);
        } else {
          for await (const chunk of await graph.stream(input, withDeltas as never)) translate.chunk(chunk as unknown[]);
        }
      }
      if (!paused && last !== undefined) {
        // The final values as JSON text: the stream's serialisation when there was one, stored as it is.
        return {
          ok: true,
          outcome: { status: 'success', valuesJson: lastJson ?? stringify(last), interrupted: false, interrupts: {} },
        };
      }
      // Paused (or nothing streamed): the checkpoint tells what waits and why.
      const snapshot = await graph.getState({ configurable: { thread_id: run.thread_id, checkpoint_ns: '' } });
      const interrupted = snapshot.next.length > 0;
      return {
        ok: true,
        outcome: {
          status: interrupted ? 'interrupted' : 'success',
          values: toPlain<Json>(snapshot.values ?? {}),
          interrupted,
          interrupts: interruptsOf(snapshot),
        },
      };
    } catch (err) {
      const e = err instanceof Error ? err : new Error(serializeError(err).message);
      // The code (SQLSTATE, errno) tells a lost database connection apart from the graph's own failure.
      const code = (e as { code?: unknown }).code;
      const error = {
        name: e.name || 'Error',
        message: e.message,
        ...(typeof code === 'string' ? { code } : {}),
        ...(e.stack ? { stack: e.stack } : {}),
      };
      const values = await this.latestValues(graphId, config, run.thread_id).catch(() => undefined);
      return { ok: false, error, ...(values !== undefined ? { values } : {}) };
    }
  }

  private async latestValues(graphId: string, config: Json, threadId: string): Promise<Json | undefined> {
    const graph = await this.graphs.getGraph(graphId, config, this.attachments());
    const s = await graph.getState({ configurable: { thread_id: threadId, checkpoint_ns: '' } });
    return toPlain<Json>(s.values ?? {});
  }

  discard(runId: string): void {
    this.checkpoints.discard(runId);
  }

  settle(runId: string): Promise<void> {
    return this.checkpoints.settle(runId);
  }

  forget(runId: string): void {
    this.checkpoints.forget(runId);
  }

  async close(): Promise<void> {}
}

/**
 * strict_resume: the refusal of a resume that names an interrupt not waiting on the thread (or, a plain resume
 * value, when nothing waits at all), or null to go on. The refused run ends in error without running anything;
 * its thread keeps what it had (RunOutcome.refused). The error carries reason, interrupt_ids and pending_ids, as the
 * SDK's UnknownInterruptError reads them.
 */
export function strictResumeRefusal(resume: unknown, snapshot: StateSnapshotLike): RunOutcome | null {
  const waiting = interruptsOf(snapshot);
  const pending = Object.values(waiting)
    .flat()
    .map((i) => (i && typeof i === 'object' ? (i as { id?: unknown }).id : undefined))
    .filter((id): id is string => typeof id === 'string');
  const named = namedInterruptIds(resume);
  const unknown = named ? named.filter((id) => !pending.includes(id)) : pending.length ? [] : ['*'];
  if (!unknown.length) return null;
  const message = named
    ? `Interrupt(s) ${unknown.join(', ')} not waiting on this thread (waiting: ${pending.join(', ') || 'none'})`
    : 'Nothing is waiting on this thread for a resume';
  return {
    status: 'error',
    refused: true,
    error: {
      error: 'UnknownInterruptError',
      message,
      reason: named ? 'unknown_interrupt' : 'no_pending_interrupt',
      interrupt_ids: named ? unknown : [],
      pending_ids: pending,
    },
    interrupted: snapshot.next.length > 0,
    interrupts: waiting as Json,
  };
}

/** A command as the API takes it, as a LangGraph Command: goto entries shaped {node, input} become Sends. */
export function toCommand(c: NonNullable<RunKwargs['command']>): Command {
  const goto =
    c.goto === undefined || c.goto === null
      ? undefined
      : (Array.isArray(c.goto) ? c.goto : [c.goto]).map((g) =>
          typeof g === 'object' && g !== null && 'node' in g
            ? new Send(String((g as Json).node), (g as Json).input)
            : String(g),
        );
  return new Command({
    ...(c.resume !== undefined ? { resume: c.resume } : {}),
    ...(c.update !== undefined && c.update !== null ? { update: c.update as Json } : {}),
    ...(goto ? { goto } : {}),
  });
}
